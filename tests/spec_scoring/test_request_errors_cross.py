"""A cross-stage request is never built from a failed answer (issue 22 item 3): a ``wrong_from``
protocol shows model m1 the answer model m2 gave; when m2's answer failed in its engine, m1's row
for that item is missing (status error, naming the failed source), not given a fallback answer
and not scored; a rerun that succeeds builds the request from m2's real answer. Real spec,
``auditc run``, scripted engine (tests/scripted_engine.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from auditlang.cli import main
from auditlang.core.requests import Result
from scripted_engine import generation, prompt_text, use_scripted_engine

ROWS = "".join(json.dumps({"id": f"q{i}", "question": f"What is the capital of country {i}?", "answer": f"City{i}"}) + "\n"
               for i in range(4))
SPEC = """import "stdlib/s001"
dataset caps = jsonl("caps.jsonl", task=open_qa)
model m1 = hf("org/m1", dtype=float32, max_tokens=8)
model m2 = hf("org/m2", dtype=float32, max_tokens=8)
protocol pw = s001.verbal_plausible_wrong with (wrong_from=[m2])
audit supplied {
  models = [m1, m2]
  datasets = [caps]
  variants = [s001.bare]
  protocols = [pw]
  evaluators = [s001.lenient]
}
report cells
"""
FAILING = {"on": True}


def _script(req):
    text = prompt_text(req)
    if req.kind != "generate":
        return None
    if "Wrongtown" in text:  # the supplied-answer confidence request shows m2's answer
        return generation(req, "0.4")
    if req.model == "m2" and "country 1" in text and FAILING["on"]:
        return Result(request_id=req.id, kind=req.kind, error="HTTP 500: upstream failed")
    return generation(req, "Wrongtown")


def test_wrong_from_source_failure_is_missing_then_retried(tmp_path: Path, monkeypatch, capsys):
    eng = use_scripted_engine(monkeypatch, _script)
    FAILING["on"] = True
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "caps.jsonl").write_text(ROWS, encoding="utf-8")
    spec = tmp_path / "s.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    args = ["run", str(spec), "--data-root", str(tmp_path / "data"), "--out", str(out), "--no-progress"]
    assert main(args) == 4, capsys.readouterr().err

    df = pd.read_parquet(out / "records.parquet").set_index(["model", "item_id"])
    row = df.loc[("m1", "q1")]
    assert row["status"] == "error" and row["error"].startswith("wrong_from_source: the answer of model m2 failed")
    assert pd.isna(row["confidence"]) and pd.isna(row["correct"])
    assert (df.drop(index=[("m1", "q1"), ("m2", "q1")])["status"] == "ok").all()
    # nothing was shown to m1 for q1: no fallback (off-type) answer, no request built from an empty answer
    asked = {prompt_text(r) for r in eng.seen if r.model == "m1" and "country 1" in prompt_text(r)}
    assert len(asked) == 1 and "Guess:" not in next(iter(asked))  # its own answer only
    cells = pd.read_csv(out / "metrics" / "cells.csv").set_index("model")
    assert (cells.loc["m1", "n"], cells.loc["m1", "n_error"]) == (3, 1)

    FAILING["on"] = False
    capsys.readouterr()
    assert main(args) == 0, capsys.readouterr().err
    df = pd.read_parquet(out / "records.parquet").set_index(["model", "item_id"])
    assert (df["status"] == "ok").all()
    assert any(r.model == "m1" and "country 1" in prompt_text(r) and "Wrongtown" in prompt_text(r) for r in eng.seen)
