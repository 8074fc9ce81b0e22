"""A CSV dataset plans like the same rows as JSONL: CSV cells are text, converted as the schema
says, so an ``answer_index`` column of ``1`` is the integer index (issue 24 item 10)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from auditlang.cli import main

from .conftest import make_project

ROWS = [{"id": f"q{i}", "question": f"Which is {i}?", "choices": [str(i), str(i + 1), str(i + 2)],
         "answer_index": i % 3} for i in range(9)]

SPEC = """import "stdlib/s000"
dataset arc = {ctor}("arc.{ext}", task=multiple_choice, gold=none, sample=6, seed=3)
model smol = embedded("smollm2-135m-instruct", max_tokens=4)
audit a {{
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
}}
"""


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    for r in rows:
        w.writerow({**r, "choices": json.dumps(r["choices"])})
    return buf.getvalue()


def _plan(capsys, spec: str) -> dict:
    capsys.readouterr()
    rc = main(["plan", spec, "--data-root", "data", "--format", "json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def test_csv_answer_index_plans_like_jsonl(tmp_path, capsys):
    proj = make_project(tmp_path / "p", SPEC.format(ctor="jsonl", ext="jsonl"),
                        rows="".join(json.dumps(r) + "\n" for r in ROWS))
    (proj / "data" / "arc.csv").write_text(_csv(ROWS), encoding="utf-8")
    (proj / "c.audit").write_text(SPEC.format(ctor="csv", ext="csv"), encoding="utf-8")
    a, b = _plan(capsys, "s.audit"), _plan(capsys, "c.audit")
    assert a["datasets"]["arc"]["indices"] == b["datasets"]["arc"]["indices"]
    assert a["requests"] == b["requests"] and len(a["requests"]) > 0


@pytest.mark.parametrize("cell, said", [("x", "not a valid index"), ("7", "not a valid index")])
def test_a_bad_csv_index_is_still_a_data_error(tmp_path, capsys, cell, said):
    rows = [dict(r) for r in ROWS]
    rows[2]["answer_index"] = cell
    proj = make_project(tmp_path / "p", SPEC.format(ctor="csv", ext="csv"))
    (proj / "data" / "arc.csv").write_text(_csv(rows), encoding="utf-8")
    assert main(["plan", "s.audit", "--data-root", "data"]) == 1
    err = capsys.readouterr().err
    assert said in err and "arc.csv:4" in err
