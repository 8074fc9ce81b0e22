"""Which files are written, the report statement's selection, and explicit "not computable" lines."""

from __future__ import annotations

import json

import pandas as pd
from report_fixtures import build_run

from auditlang.report import build_report, requested_outputs

SMALL = """
settings s { seed = 1, data_root = "DATA", vpr_threshold = 0.9 }
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=12, seed=3)
model small = hf("org/small-1b", size=1.0, revision="r1", dtype=bf16)
template t_plain = template("Q: {{ question }} A:")
variant plain = variant(t_plain)
variant other = variant(t_plain)
protocol tok_norm = token_prob(readout=first_token, normalise=label_set, window=top_k, top_k=20)
template conf = template("How confident are you? Reply with a number between 0.0 and 1.0.")
protocol verbal = verbalized(scale=decimal_01, phrasing=conf, provenance=self, answer_form=full)
evaluator fc = first_char()
audit main {
  models = [small]
  datasets = [arc]
  variants = [plain, other]
  protocols = [tok_norm, verbal]
  evaluators = [fc]
  bootstrap = bootstrap(resamples=50, seed=1)
}
compare sz = size_spread(main, variants=[plain, other])
compare al = aligned(main)
compare gap = ece_gap(main, verbal=verbal, token=tok_norm, metric=bri)
metric bri = brier()
REPORT
"""


def test_all_outputs_by_default(run):
    files = set(json.loads((run.report / "manifest.json").read_text())["files"])
    for f in ("cells.csv", "cells.md", "checklist.md", "checklist.tex", "disclosure.md", "disclosure.tex",
              "disclosure_standalone.tex", "report.html", "comparisons.md", "comparisons/sp.csv", "comparisons/grid.md",
              "comparisons/cons_cross.csv", "vpr/vpr_main_verbal_fc.md", "figures/reliability_main_small.png",
              "figures/reliability_main_small.pdf", "figures/spread_sp.png", "figures/size_spread_sz.pdf",
              "figures/consistency_cons_small_obqa.png", "index.md"):
        assert f in files, f
        assert (run.report / f).stat().st_size > 0, f
    assert (run.report / "figures/spread_sp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (run.report / "figures/spread_sp.pdf").read_bytes()[:5] == b"%PDF-"


def test_vpr_matrix_marks_below_threshold(run):
    md = (run.report / "vpr" / "vpr_main_verbal_fc.md").read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| mid | mmlu |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3].endswith("✗")  # reorder
    assert not any(c.endswith("✗") for i, c in enumerate(cells[2:]) if i != 1)
    assert "excluded: mid / mmlu / reorder" in md


def test_not_computable_lines_are_explicit(run):
    rob = (run.report / "comparisons" / "rob.md").read_text()
    assert "not computable: A-STB / A-SST: the comparison names no samples= protocol" in rob
    al = (run.report / "comparisons" / "al.md").read_text()
    assert "not computable: CA: records carry no cross-model candidate scores (extras 'supplied'" in al
    t = pd.read_csv(run.report / "comparisons" / "rob.csv")
    assert t["A-STB"].isna().all() and t["A-SST"].isna().all()  # no fake numbers
    long = pd.read_csv(run.report / "comparisons" / "al.csv")
    ca = long[long["view"] == "CA"]  # shown as not computed, never left out (issue 41) and never a number
    assert len(ca) and set(ca["reversal"]) == {"not computed"} and ca["value_1"].isna().all()


def test_report_statement_selects_outputs(tmp_path):
    spec, plan, run_dir = build_run(tmp_path, SMALL.replace("REPORT", "report checklist, disclosure(format=latex)"),
                                    journal=False)
    assert requested_outputs(spec) == {"checklist": {}, "disclosure": {"format": "latex"}}
    selected = list(spec.report)
    spec.report = []  # first build everything, then rebuild with the spec's selection
    everything = build_report(spec, plan, run_dir)
    assert (everything / "report.html").exists() and (everything / "comparisons" / "sz.csv").exists()
    spec.report = selected
    out = build_report(spec, plan, run_dir)
    assert not (out / "comparisons" / "sz.csv").exists()  # files of the previous build are removed
    names = {p.name for p in out.iterdir()}
    assert {"checklist.md", "checklist.tex", "disclosure.tex", "disclosure_standalone.tex"} <= names
    assert not names & {"disclosure.md", "report.html", "cells.csv", "comparisons", "figures", "comparisons.md"}
    md = (out / "checklist.md").read_text()
    assert "not computable: no request journal" in md
    assert "UNSPECIFIED: protocol 'verbal' does not set mode" in md
    assert "UNSPECIFIED: protocol 'verbal' does not set answer_form" not in md
    assert "UNSPECIFIED: model" not in md  # revision and dtype are set


def test_small_run_not_computable_cases(tmp_path):
    spec, plan, run_dir = build_run(tmp_path, SMALL.replace("REPORT", ""), journal=False)
    out = build_report(spec, plan, run_dir)
    comp = (out / "comparisons.md").read_text()
    # one model: no size correlation, no model pair
    assert "not computable: spearman correlation for arc / fc: fewer than 3 models (n=1)" in comp
    assert "## al (aligned, audit main)" in comp
    # a Brier metric where the comparison is defined on equal-width ECE: a reason, not a number
    assert "not computable: metric brier is not an equal-width ECE" in comp
    vpr = (out / "vpr" / "vpr_main_verbal_fc.md").read_text()
    assert "VPR >= 0.90" in vpr
    assert "settings vpr_threshold" in (out / "checklist.md").read_text()


def test_run_without_results_reports_only_reasons(run, tmp_path):
    out = build_report(run.spec, run.plan, tmp_path / "empty_run")
    index = (out / "index.md").read_text()
    assert "Missing run files: records.parquet, metrics/cells.csv, run.json, plan.json, journal.sqlite." in index
    assert "not computable: the run has no scored records" in (out / "cells.md").read_text()
    comp = (out / "comparisons.md").read_text()
    assert "not computable: spread for small / arc / fc: no scored records for variant 'plain'" in comp
    for name in ("sp", "gap", "ns", "grid", "rob"):
        assert pd.read_csv(out / "comparisons" / f"{name}.csv").empty, name  # headers only, no numbers
    md = (out / "checklist.md").read_text()
    assert "not computable: no records table (records.parquet) in the run directory" in md and "not computable: no request journal" in md
