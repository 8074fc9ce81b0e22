"""``auditc rescore`` with any evaluator expression the spec language accepts (issue 35 item 5):
the spec's own evaluators, stdlib ones, parameterised constructors; a bad expression is a
diagnostic with a caret; the rescored cells appear in ``auditc report`` and ``auditc diff``.
Through ``auditc run`` on a scripted engine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from auditlang.cli import main
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

N = 24
SPEC = """import "stdlib/s000"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model m = hf("org/scripted", dtype=float32, max_tokens=8)
evaluator strict = regex_reparse(tail=150, case_sensitive=true)
evaluator anycase = regex_reparse(tail=150, case_sensitive=false)
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal]
  evaluators = [strict, anycase]
  metrics = [accuracy, brier]
}
compare by_evaluator = contrast(a, evaluators=[anycase, strict], metrics=[accuracy])
report cells, comparisons, html
"""
LOOSE = "regex_reparse(tail=150, case_sensitive=false)"


def _script(req):
    text = prompt_text(req)
    if req.kind == "generate" and "confidence" in text:
        return generation(req, "0.8")
    if req.kind == "generate":
        i = int(re.search(r"Which number is (\d+)\?", text).group(1))
        return generation(req, "Let me think.\nAnswer: " + ("a" if i % 2 == 0 else "b"))  # gold is A
    return None


def test_rescore_with_expressions_in_report_and_diff(tmp_path: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, _script)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "arc.jsonl").write_text(number_items(N), encoding="utf-8")
    spec = tmp_path / "s.audit"
    spec.write_text(SPEC, encoding="utf-8")
    run = tmp_path / "run"
    assert main(["run", str(spec), "--data-root", str(tmp_path / "data"), "--out", str(run), "--no-progress"]) == 0
    capsys.readouterr()

    # a parameterised constructor under a label, the spec's own evaluator, a stdlib one, a bare registered name
    assert main(["rescore", str(run), "--evaluator", f"loose={LOOSE}", "--evaluator", "strict",
                 "--evaluator", "s000.regex_reparse", "--evaluator", "exact_match"]) == 0
    said = capsys.readouterr().out
    assert f"under loose = {LOOSE}" in said
    for label in ("loose", "strict", "s000.regex_reparse", "exact_match"):
        assert (run / "rescore" / label / "records.parquet").is_file()
    meta = json.loads((run / "rescore" / "loose" / "rescore.json").read_text(encoding="utf-8"))
    assert meta["evaluator"] == "regex_reparse" and meta["params"]["case_sensitive"] is False

    # a bad expression: a diagnostic with a caret under the parameter and a hint, no traceback
    assert main(["rescore", str(run), "--evaluator", "regex_reparse(tial=5)"]) == 1
    err = capsys.readouterr().err
    assert "error[E120]: unknown parameter 'tial' for regex_reparse()" in err and "^^^^" in err
    assert "did you mean 'tail'?" in err and "Traceback" not in err
    assert main(["rescore", str(run), "--evaluator", "constrained"]) == 1
    assert "sends requests to a model" in capsys.readouterr().err

    # the report shows every rescore
    assert main(["report", str(run)]) == 0
    md = (run / "report" / "rescore.md").read_text(encoding="utf-8")
    assert f"Re-scored under evaluator loose = {LOOSE}" in md and "| m | arc |" in md
    html = (run / "report" / "report.html").read_text(encoding="utf-8")
    assert "Rescored under other evaluators" in html and f"loose = {LOOSE}" in html

    # diff the run against its rescore: strict reads no letter (upper case only), loose reads a/b
    capsys.readouterr()
    assert main(["diff", str(run), str(run / "rescore" / "loose"), "--match", "strict=loose", "--metric", "accuracy",
                 "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    z_strict = np.zeros(N)
    z_loose = np.array([1.0 if i % 2 == 0 else 0.0 for i in range(N)])
    idx = np.random.default_rng(42).integers(0, N, size=(1000, N))
    reps = z_loose[idx].mean(1) - z_strict[idx].mean(1)
    lo, hi = np.quantile(reps, [0.025, 0.975])
    assert row["a"] == 0.0 and row["b"] == 0.5 and row["diff"] == 0.5 and row["n_paired"] == N
    assert abs(row["low"] - lo) < 1e-12 and abs(row["high"] - hi) < 1e-12 and row["significant"] is True
    # two rescores against each other, paired by ignoring the evaluator axis
    assert main(["diff", str(run / "rescore" / "strict"), str(run / "rescore" / "loose"), "--match", "evaluator",
                 "--metric", "accuracy", "--format", "json"]) == 0
    row2 = json.loads(capsys.readouterr().out)["rows"][0]
    assert (row2["diff"], row2["low"], row2["high"]) == (row["diff"], row["low"], row["high"])
    # a contrast over evaluators inside the run: anycase - strict, the same numbers
    import csv

    con = next(csv.DictReader((run / "report" / "comparisons" / "by_evaluator.csv").open(encoding="utf-8")))
    assert (con["a"], con["b"], con["model"]) == ("anycase", "strict", "m")
    assert (float(con["delta"]), float(con["delta lo"]), float(con["delta hi"])) == (row["diff"], row["low"], row["high"])
