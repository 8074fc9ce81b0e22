"""Study 000's statistical annotations through ``auditc run`` on a spec (issue 41 item 5), each
recomputed from the run's records with the paper's resampling unit (App. E.2):

* per-cell VPR with its interval when the audit declares ``vpr`` (binary parse indicators resampled);
* signed over-confidence (verbal - accuracy, verbal - token) with its interval (the parsed rows'
  triples resampled together);
* the ARC-style paired drop of the first-character evaluator on format_change against the mean of
  the reference variants (Figure 1), with its paired bootstrap interval;
* Table 6's VPR-threshold sensitivity (``ece_gap(..., thresholds=[...])``).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from auditlang.cli import main
from auditlang.metrics.bootstrap import bootstrap_ci
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

B, SEED = 200, 7
SPEC = f"""
import "stdlib/s000"
dataset arc = jsonl("items.jsonl", task=multiple_choice)
model a = hf("org/a", dtype=float32)
audit primary {{
  models = [a]
  datasets = [arc]
  variants = [s000.surface_paraphrase, s000.instruction_reorder, s000.format_change]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, vpr]
  bootstrap = bootstrap(resamples={B}, seed={SEED}, unit=auto)
  vpr_threshold = 0.8
}}
audit repair {{
  models = [a]
  datasets = [arc]
  variants = [s000.format_change]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char, s000.regex_reparse]
  metrics = [accuracy]
  bootstrap = bootstrap(resamples={B}, seed={SEED}, unit=paired)
}}
compare gap = ece_gap(primary, verbal=s000.verbal_decimal, token=s000.token_norm, thresholds=[0.7, 0.9])
compare rep = evaluator_repair(repair, base=s000.first_char, repairs=[s000.regex_reparse], reference_audit=primary,
                               reference_variants=[s000.surface_paraphrase, s000.instruction_reorder],
                               variant=s000.format_change)
report cells, comparisons(format=both), figures
"""


def script(req):
    text = prompt_text(req)
    m = re.search(r"Which number is (\d+)\?", text)
    i = int(m.group(1)) if m else 0
    if req.kind != "generate":
        return None
    if "confidence in your answer" in text:  # decimal_01; surface_paraphrase answers parse 3 in 4 times
        if "Answer with only the letter" in text and i % 4 == 0:
            return generation(req, "very sure")
        return generation(req, f"0.{9 - i % 3}")
    if "Think step by step" in text:  # format_change: reasoning first, the letter on the last line
        return generation(req, f"The options say... Final answer: {'A' if i % 3 else 'B'}")
    return generation(req, "A" if i % 3 else "B")


def test_s000_intervals_drop_and_thresholds(tmp_path: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, script)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "items.jsonl").write_text(number_items(12), encoding="utf-8")
    spec = tmp_path / "s000.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(tmp_path / "data"), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr()
    rec = pd.read_parquet(out / "records.parquet")
    cells = pd.read_csv(out / "metrics" / "cells.csv")
    comp = out / "report" / "comparisons"

    # -- VPR with its interval: example-level resampling of the binary parseable indicators
    vc = cells[cells["protocol"] == "s000.verbal_decimal"].set_index("variant")
    for v, r in vc.iterrows():
        parsed = rec[(rec["protocol"] == "s000.verbal_decimal") & (rec["variant"] == v)].sort_values("item_index")[
            "confidence_parsed"].to_numpy(float)
        ci = bootstrap_ci("accuracy", parsed, B=B, seed=SEED)
        assert math.isclose(r["vpr"], parsed.mean())
        assert (r["vpr lo"], r["vpr hi"]) == (ci.low, ci.high), v
    assert vc.loc["s000.surface_paraphrase", "vpr"] == 0.75 and vc.loc["s000.surface_paraphrase", "vpr lo"] < 0.75

    # -- signed over-confidence with its interval: the parsed rows' (verbal, token, correct) resampled together
    gap = pd.read_csv(comp / "gap.csv").set_index("variant")
    # format_change opens with a reasoning word: no label token, so no token confidence and no row to pair
    assert gap["overconf_vs_acc"].notna().sum() == 2
    for v, r in gap[gap["overconf_vs_acc"].notna()].iterrows():
        vr = rec[(rec["protocol"] == "s000.verbal_decimal") & (rec["variant"] == v)].set_index("item_id")
        tr = rec[(rec["protocol"] == "s000.token_norm") & (rec["variant"] == v)].set_index("item_id")
        ok = vr["confidence_parsed"].astype(bool)
        items = vr.index[ok]
        verbal, z = vr.loc[items, "confidence"].to_numpy(float), vr.loc[items, "correct"].to_numpy(float)
        token = tr.loc[items, "confidence"].to_numpy(float)
        assert math.isclose(r["overconf_vs_acc"], verbal.mean() - z.mean())
        ci = bootstrap_ci(lambda a, b: float(a.mean() - b.mean()), verbal, z, B=B, seed=SEED)
        assert math.isclose(r["overconf_vs_acc lo"], ci.low) and math.isclose(r["overconf_vs_acc hi"], ci.high), v
        ci = bootstrap_ci(lambda a, b: float(a.mean() - b.mean()), verbal, token, B=B, seed=SEED)
        assert math.isclose(r["overconf_vs_token lo"], ci.low) and math.isclose(r["overconf_vs_token hi"], ci.high)

    # -- Table 6: per-model means over the cells passing each threshold, n = cells contributing
    th = pd.read_csv(comp / "gap_thresholds.csv").iloc[0]
    for t in (0.7, 0.9):
        sel = gap[gap["vpr"] >= t]["overconf_vs_acc"].dropna()
        assert th[f"n >= {t:.2f}"] == len(sel) and math.isclose(th[f"VPR >= {t:.2f}"], sel.mean())
    assert th["n >= 0.70"] == 2 and th["n >= 0.90"] == 1  # surface_paraphrase (VPR 0.75) drops at 0.90

    # -- Figure 1: first-char drop on format_change vs the mean of the reference variants, paired interval
    drop = pd.read_csv(comp / "rep_drop.csv").iloc[0]
    def first_char(audit: str, v: str) -> np.ndarray:
        sel = rec[(rec["cell_id"].str.startswith(audit + "/")) & (rec["protocol"] == "s000.token_norm")
                  & (rec["evaluator"] == "s000.first_char") & (rec["variant"] == v)]
        return sel.set_index("item_id").sort_index()["correct"].to_numpy(float)

    refs = [first_char("primary", "s000.surface_paraphrase"), first_char("primary", "s000.instruction_reorder")]
    base = first_char("repair", "s000.format_change")
    want = np.mean([x.mean() for x in refs]) - base.mean()
    assert math.isclose(drop["drop"], want) and drop["drop"] > 0.5  # "The..." never reads as a letter
    assert math.isclose(drop["relative drop %"], 100 * want / np.mean([x.mean() for x in refs]))
    assert drop["drop lo"] <= want <= drop["drop hi"] and drop["drop lo"] > 0
    tex = (out / "report" / "tables" / "gap.tex").read_text(encoding="utf-8")
    assert "study 000 Table 6" in tex and "verbal - acc" in tex
    assert "study 000 Figure 1" in (out / "report" / "tables" / "rep.tex").read_text(encoding="utf-8")
    figs = {p.name for p in (out / "report" / "figures").glob("*.png")}
    assert {"drop_rep.png", "overconfidence_gap.png"} <= figs, figs  # 000 Figures 1 and 2
