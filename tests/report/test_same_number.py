"""Issue 34: "the same number printed in two tables is the same number (one computation, referenced
twice)". The issue's study -- both embedded models, two wordings, token-probability, verbalized
percent and P(True) confidence, a model comparison (``aligned`` and ``contrast(models=...)``) --
through ``auditc run`` on a scripted engine (a few items): where a comparison table prints a cell's
ECE or Brier on all of that cell's items, it is the per-cell table's number (``metrics/cells.csv``,
``cells.md``); where it uses fewer items (the other model left some confidences missing), a note
under it says so with the n used. The issue's report was "raw ECE 0.000 in the model comparison,
0.333 in the per-cell table for the same cell"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from auditlang.cli import main
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

SPEC = """import "stdlib/s000"
import "stdlib/s003"
dataset nums = jsonl("nums.jsonl", task=multiple_choice)
model smol = embedded("smollm2-135m-instruct", max_tokens=8)
model gem = embedded("gemma3-270m", max_tokens=8)
audit a {
  models = [smol, gem]
  datasets = [nums]
  variants = [s000.surface_paraphrase, s000.instruction_reorder]
  protocols = [s000.token_norm, s000.verbal_percent, s003.p_true]
  evaluators = [s000.first_char]
  metrics = [accuracy, ece, brier]
  bootstrap = bootstrap(resamples=50, seed=1)
}
compare models = aligned(a, views=[instance, distribution])
compare smol_vs_gem = contrast(a, models=[smol, gem], metrics=[ece, brier])
report cells, comparisons
"""


def _h(req) -> int:
    return sum(map(ord, prompt_text(req) + req.model)) % 7


def script(req):
    h = _h(req)
    text = prompt_text(req)
    if req.kind == "generate" and "How confident are you" in text:  # the verbal follow-up
        if req.model == "gem" and h < 3:
            return generation(req, "I cannot say")  # gem's verbal confidence missing on some items
        return generation(req, f"{[100, 90, 80, 70, 60, 40, 20][h]}")
    if req.kind == "generate":
        return generation(req, "ABCD"[h % 4] if h != 6 else "A")
    if req.kind == "choice_logprobs":
        lps = {c: (-0.2 if i == h % len(req.p["choices"]) else -2.0 - i) for i, c in enumerate(req.p["choices"])}
        return type(generation(req, ""))(request_id=req.id, kind=req.kind, choice_logprobs=lps, top_logprobs=dict(lps))
    return None


def test_a_cells_number_is_the_same_in_every_table(tmp_path: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, script)
    (tmp_path / "nums.jsonl").write_text(number_items(8), encoding="utf-8")
    spec = tmp_path / "study.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(tmp_path), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    cells = pd.read_csv(out / "metrics" / "cells.csv")
    ece = next(c for c in cells.columns if c.startswith("ece"))
    cell = cells.set_index(["model", "variant", "protocol"])
    verbal = cell.xs("s000.verbal_percent", level="protocol")
    assert (verbal.loc["gem", "n_conf"] < verbal.loc["smol", "n_conf"]).all()  # the case the notes are for

    # aligned: raw ECE / Brier per model
    long = pd.read_csv(out / "report" / "comparisons" / "models.csv")
    md = (out / "report" / "comparisons" / "models.md").read_text(encoding="utf-8")
    checked = noted = 0
    for _, r in long[long["view"] == "raw"].iterrows():
        col = ece if r["metric"] == "ECE" else "brier"
        for m, v in ((r["model_1"], r["value_1"]), (r["model_2"], r["value_2"])):
            mine = cell.loc[(m, r["variant"], r["protocol"])]
            shown = f"{r['model_1']} vs {r['model_2']} / nums / {r['variant']} / {r['protocol']} / s000.first_char"
            if math.isclose(v, mine[col], abs_tol=1e-12):
                checked += 1
            else:  # fewer items than the cell: the note says which n
                assert f"{shown}: raw, IA, DA and CA use the n=" in md, (m, r.to_dict(), mine[col])
                noted += 1
    assert checked and noted

    # contrast(models=...): value_a / value_b per cell
    con = pd.read_csv(out / "report" / "comparisons" / "smol_vs_gem.csv")
    cmd = (out / "report" / "comparisons" / "smol_vs_gem.md").read_text(encoding="utf-8")
    checked = noted = 0
    for _, r in con.iterrows():
        col = ece if r["metric"].startswith("ece") else "brier"
        for m, v in ((r["a"], r["value_a"]), (r["b"], r["value_b"])):
            mine = cell.loc[(m, r["variant"], r["protocol"])]
            if int(r["n_paired"]) == int(mine["n_conf"]):
                assert math.isclose(v, mine[col], abs_tol=1e-12), (m, r.to_dict(), mine[col])
                checked += 1
            else:
                where = f"{r['a']} vs {r['b']} / nums / {r['variant']} / {r['protocol']} / s000.first_char"
                assert (f"{where}: value_a and value_b use the n_paired={int(r['n_paired'])} items both cells "
                        "scored") in cmd, (m, r.to_dict())
                noted += 1
    assert checked and noted
    # the per-cell table (cells.md) prints cells.csv's numbers
    cmd_cells = (out / "report" / "cells.md").read_text(encoding="utf-8")
    for v in cells[ece].dropna():
        assert f"{v:.3f}" in cmd_cells
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))
