"""The BoolQ study of issue 35 as one spec (examples/boolq_contrast.audit): both embedded models
really run (``--limit 4``, answers of at most 4 tokens), and the model contrast smol - gemma with
its paired interval is in report.html and the LaTeX table, with the numbers ``auditc diff --match``
gives on the same run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from auditlang.cli import main

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "examples" / "boolq_contrast.audit"


def test_boolq_model_contrast_in_html_and_latex(tmp_path: Path, shared_data: Path, capsys) -> None:
    out = tmp_path / "run"
    # 4-token answers: the first letter (first_char) and the follow-up are what the cells need
    rc = main(["run", str(SPEC), "--data-root", str(shared_data), "--limit", "4", "--model-args", "max_tokens=4",
               "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    rows = list(csv.DictReader((out / "report" / "comparisons" / "smol_vs_gemma.csv").open(encoding="utf-8")))
    assert {(r["a"], r["b"]) for r in rows} == {("smol", "gemma")}
    assert {r["protocol"] for r in rows} == {"s000.token_norm", "s000.verbal_decimal"}
    cells = {(r["model"], r["protocol"]): r for r in csv.DictReader((out / "metrics" / "cells.csv").open(encoding="utf-8"))}
    html = (out / "report" / "report.html").read_text(encoding="utf-8")
    tex = (out / "report" / "tables" / "smol_vs_gemma.tex").read_text(encoding="utf-8")
    assert "smol_vs_gemma (contrast)" in html and "Paired contrast a - b over models" in tex

    capsys.readouterr()
    assert main(["diff", str(out), str(out), "--match", "smol=gemma", "--format", "json"]) == 0
    diff = {(r["cell_id"].split("/")[4], r["metric"]): r for r in json.loads(capsys.readouterr().out)["rows"]}
    acc = [r for r in rows if r["metric"] == "accuracy"]
    assert len(acc) == 2
    for r in acc:
        smol, gemma = cells[("smol", r["protocol"])], cells[("gemma", r["protocol"])]
        # the point estimate is exactly the difference of the two cells' accuracies (every item answered)
        assert int(r["n_paired"]) == 4 and float(r["delta"]) == float(smol["accuracy"]) - float(gemma["accuracy"])
        lo, hi, d = float(r["delta lo"]), float(r["delta hi"]), float(r["delta"])
        assert lo <= d <= hi
        other = diff[(r["protocol"], "accuracy")]  # B - A = gemma - smol: the same interval, negated
        assert abs(other["diff"] + d) < 1e-12 and abs(other["low"] + hi) < 1e-9 and abs(other["high"] + lo) < 1e-9
        shown = f"{d:.3f} [{lo:.3f}, {hi:.3f}]".replace("-0.000", "0.000")
        assert shown in html
        assert f"{{[}}{lo:.3f}, {hi:.3f}]".replace("-0.000", "0.000") in tex
