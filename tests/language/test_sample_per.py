"""``sample_per=[...]``: a stratified draw with one sample size per ``filter_in`` value (study 001
App. M: MMLU high-school physics 151, philosophy 311, government 193, miscellaneous 500 =
1,155, "not a uniform 500 per subject"), through ``auditc plan`` / ``auditc check``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.plan.planner import build_plan
from auditlang.resolve import compile_spec

SPEC = """
settings {{ seed = 42 }}
dataset d = jsonl("rows.jsonl", task=open_qa, seed=7, filter_field="subject", filter_in=["x", "y", "z"], {extra})
model m = hf("org/m-1b", size=1.0)
template t = template("Q: {{{{ question }}}} A:")
variant v = variant(t)
protocol p = verbalized(scale=decimal_01, phrasing=t, provenance=self, mode=followup)
evaluator e = exact_match()
audit a {{ models = [m]  datasets = [d]  variants = [v]  protocols = [p]  evaluators = [e] }}
"""


def write(tmp_path: Path, extra: str) -> Path:
    rows = [{"id": f"{s}{i}", "question": f"q {s}{i}", "answer": "a", "subject": s}
            for s, n in (("x", 30), ("y", 5), ("w", 9), ("z", 12)) for i in range(n)]
    random.Random(0).shuffle(rows)
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    path = tmp_path / "s.audit"
    path.write_text(SPEC.format(extra=extra), encoding="utf-8")
    return path


def test_stratified_draw_is_random_sample_within_each_value(tmp_path):
    path = write(tmp_path, "sample_per=[10, 8, 12]")
    plan = build_plan(compile_spec(path), data_root=str(tmp_path))
    ids = [ctx.item["id"] for u in plan.units.values() for ctx in u.contexts]
    assert len(ids) == 10 + 5 + 12  # y has only 5 rows: capped by availability
    # independent check: random.Random(seed).sample within each value's rows, in file order
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["subject"] in ("x", "y", "z")]
    want = []
    for s, k in (("x", 10), ("y", 8), ("z", 12)):
        stratum = [r["id"] for r in rows if r["subject"] == s]
        want += stratum if k >= len(stratum) else random.Random(7).sample(stratum, k)
    assert ids == want
    assert plan.datasets["d"]["n_sample"] == 27


def test_declared_size_is_the_sum(tmp_path):
    plan = build_plan(compile_spec(write(tmp_path, "sample_per=[10, 8, 12]")), load_data=False)
    assert {c.n_items for c in plan.cells} == {30}


@pytest.mark.parametrize("extra, text", [
    ("sample_per=[10, 8]", "sample_per= has 2 sizes for 3 filter_in values"),
    ("sample_per=[10, 8, 12], sample=31", "sample=31 but sample_per= sums to 30"),
    ("sample_per=[10, 0, 12]", "at least 1"),
])
def test_sample_per_diagnostics(tmp_path, capsys, extra, text):
    rc = main(["check", str(write(tmp_path, extra))])
    out = capsys.readouterr()
    msg = out.out + out.err
    assert rc == 1 and "error[E123]" in msg and text in msg and "^" in msg, msg
