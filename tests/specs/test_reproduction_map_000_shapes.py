"""Study 000's results tables and figures in the paper's shape (issue 41), through ``auditc run`` of
examples/s000_twin.audit on a scripted engine with ``--limit 2`` (two SST-2 and two ARC items):
Figure 1 (the accuracy drop under format_change with the 4-choice random baseline at 0.25) and
Table 3 (a row per model by ascending size with Size and Family, a column per dataset, the two
lowest and two highest spreads of each column in bold).

The script answers "A" to every question, and "Let me think. Final answer: A" under format_change's
"Think step by step"; 0.8 to the decimal_01 follow-up and 75% to percent_0_100, except that smollm2
answers the decimal follow-up with "sure" (unparsable) under surface_paraphrase ("Answer the
following multiple-choice question."): its VPR there is 0 under decimal_01 and 1 under
percent_0_100.
"""

from __future__ import annotations

import csv
import types
from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.core.requests import Result
from auditlang.report.comparisons.spread import by_model_table
from auditlang.resolve import compile_spec
from scripted_engine import generation, prompt_text, use_scripted_engine

ROOT = Path(__file__).resolve().parents[2]
SURFACE = "Answer the following multiple-choice question."


def script(req):
    if req.kind == "choice_logprobs":
        return Result(request_id=req.id, kind=req.kind,
                      choice_logprobs={c: -0.5 - k for k, c in enumerate(req.p["choices"])})
    if req.kind != "generate":
        return None
    text = prompt_text(req)
    if "decimal probability" in text:
        return generation(req, "sure" if req.model == "smollm2" and SURFACE in text else "0.8")
    if "percentage" in text:
        return generation(req, "75%")
    if "Think step by step" in text:
        return generation(req, "Let me think. Final answer: A")
    return generation(req, "A")


@pytest.fixture(scope="module")
def report(tmp_path_factory, shared_data: Path) -> Path:
    mp = pytest.MonkeyPatch()
    use_scripted_engine(mp, script)
    out = tmp_path_factory.mktemp("s000") / "run"
    try:
        rc = main(["run", str(ROOT / "examples" / "s000_twin.audit"), "--data-root", str(shared_data), "--out",
                   str(out), "--limit", "2", "--no-progress"])
    finally:
        mp.undo()
    assert rc == 0
    return out / "report"


def rows(report: Path, name: str) -> list[dict[str, str]]:
    with open(report / "comparisons" / f"{name}.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_figure1_random_baseline(report: Path, shared_data: Path) -> None:
    got = rows(report, "arc_repair_drop")
    assert [r["model"] for r in got] == ["smollm2", "gemma3"]
    # every ARC item of the twin's draw has four options: the baseline is 1/4 (000 Figure 1's 0.25 line)
    assert all(float(r["random baseline"]) == 0.25 for r in got)
    for r in got:  # first-char reads "L" under format_change: 0 correct; the drop is the reference accuracy
        assert float(r["acc s000.first_char @ s000.format_change"]) == 0.0
        assert float(r["drop"]) == float(r["acc s000.first_char @ mean of 4 variants"])
    md = (report / "comparisons" / "arc_repair_drop.md").read_text(encoding="utf-8")
    assert "random baseline = the accuracy of a uniform guess among each item's options" in md
    png = report / "figures" / "drop_arc_repair.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (report / "report.html").read_text(encoding="utf-8")
    assert "(study 000 Figure 1; dashed: random baseline 0.25 = mean 1 / options)" in html


def test_table3_models_by_size_with_size_family_and_bold_extremes(report: Path) -> None:
    got = rows(report, "spread4_by_model")
    assert list(got[0]) == ["model", "size (B)", "family", "sst2", "arc"]
    assert [(r["model"], float(r["size (B)"]), r["family"]) for r in got] == [
        ("smollm2", 0.135, "smollm2"), ("gemma3", 0.27, "gemma3")]  # ascending size, the catalogue's families
    spreads = {(r["model"], r["dataset"]): float(r["spread"]) for r in rows(report, "spread4")}
    for r in got:
        for d in ("sst2", "arc"):
            assert float(r[d]) == spreads[(r["model"], d)]
    tex = (report / "tables" / "spread4.tex").read_text(encoding="utf-8")
    assert "Model & Size & Family & sst2 & arc" in tex
    assert "study 000 Table 3" in tex and "Bold marks the 2 lowest and 2 highest values per column." in tex
    assert "smollm2 & 0.135B & smollm2 & " in tex


# 000 Table 3 as printed (model, SST-2, MNLI spreads) in the order of the full spec's instruct10
PAPER_T3 = [("llama32_3b", 0.270, 0.110), ("phi4_mini", 0.084, 0.030), ("gemma3_4b", 0.456, 0.254),
            ("mistral_7b", 0.500, 0.254), ("qwen25_7b", 0.096, 0.218), ("llama32_1b", 0.202, 0.110),
            ("gemma3_1b", 0.296, 0.160), ("smollm2_17b", 0.398, 0.008), ("qwen25_3b", 0.028, 0.402),
            ("r1_qwen_7b", 0.916, 0.538)]


def test_table3_paper_order_and_bold_on_the_papers_numbers() -> None:
    """The by-model table of the full spec's models fed the paper's spreads: the paper's row order
    (ascending size, Llama-3.2-1B before Gemma-3-1B at 1.0B), Size and Family as printed, and bold on
    exactly the values 000 Table 3 bolds (SST-2: 0.028, 0.084, 0.500, 0.916; MNLI: 0.008, 0.030,
    0.402, 0.538)."""
    spec = compile_spec(ROOT / "specs" / "s000_multivariant_audit.audit")
    rd = types.SimpleNamespace(spec=spec)
    data = [{"model": m, "dataset": d, "evaluator": "e", "protocol": "p", "spread": v}
            for m, sst, mnli in PAPER_T3 for d, v in (("sst2", sst), ("mnli", mnli))]
    t = by_model_table(rd, "spread4", data, 2)
    assert [(r["model"], r["size (B)"], r["family"]) for r in t.records()] == [
        ("llama32_1b", 1.0, "llama"), ("gemma3_1b", 1.0, "gemma"), ("smollm2_17b", 1.7, "smollm"),
        ("qwen25_3b", 3.1, "qwen"), ("llama32_3b", 3.2, "llama"), ("phi4_mini", 3.8, "phi"),
        ("gemma3_4b", 4.0, "gemma"), ("r1_qwen_7b", 7.0, "deepseek"), ("mistral_7b", 7.2, "mistral"),
        ("qwen25_7b", 7.6, "qwen")]
    for col, want in (("sst2", {0.028, 0.084, 0.500, 0.916}), ("mnli", {0.008, 0.030, 0.402, 0.538})):
        bold = {t.rows[i][t.columns.index(col)] for (i, c), mark in t.marks.items() if c == col and mark == "extreme"}
        assert bold == want, col
    md = t.to_markdown()
    assert "| qwen25_3b | 3.100 | qwen | **0.028** | **0.402** |" in md


def test_table9_phrasings_side_by_side(report: Path) -> None:
    got = {r["model"]: r for r in rows(report, "verbal_gap_phrasings")}
    dec, pct = "s000.verbal_decimal", "s000.verbal_percent"
    assert list(next(iter(got.values()))) == ["model", "evaluator"] + [
        f"{q} ({p})" for q in ("verbal - acc", "verbal - tok", "ECE_gap") for p in (dec, pct)] + [f"n ({dec})", f"n ({pct})"]
    # 10 cells per model (2 datasets x 5 variants). ARC format_change has no token confidence (the answer
    # starts "Let", no label: every token row dropped), so it enters neither phrasing: 9. smollm2's decimal
    # follow-up never parses after the surface_paraphrase text, which SST-2's format_change prompt also
    # starts with: VPR 0 < 0.80 on 3 more cells, so 6 under decimal_01 and 9 under percent_0_100, each
    # phrasing's own rule (000 D.3 "applied independently to each run")
    assert (got["smollm2"][f"n ({dec})"], got["smollm2"][f"n ({pct})"]) == ("6", "9")
    assert (got["gemma3"][f"n ({dec})"], got["gemma3"][f"n ({pct})"]) == ("9", "9")
    for name, p in (("verbal_gap_by_model", dec), ("verbal_gap_pct_by_model", pct)):
        for r in rows(report, name):  # the same means as each phrasing's own Table 2 comparison
            g = got[r["model"]]
            assert float(g[f"verbal - acc ({p})"]) == pytest.approx(float(r["mean overconf_vs_acc"]))
            assert float(g[f"verbal - tok ({p})"]) == pytest.approx(float(r["mean overconf_vs_token"]))
            assert float(g[f"ECE_gap ({p})"]) == pytest.approx(float(r["mean ece_gap"]))
            assert g[f"n ({p})"] == r["n_included"]
    # by hand: the script states 0.8 (decimal) and 0.75 (percent) on every parsed row
    cells = rows(report, "verbal_gap")
    accs = [float(x["overconf_vs_acc"]) for x in cells if x["model"] == "gemma3" and x["overconf_vs_acc"]]
    assert float(got["gemma3"][f"verbal - acc ({pct})"]) == pytest.approx(sum(accs) / len(accs) - 0.05)
    tex = (report / "tables" / "verbal_gap.tex").read_text(encoding="utf-8")
    assert "study 000 Table 9" in tex
    assert "verbal - acc\\\\{}(decimal)" in tex and "verbal - acc\\\\{}(percent)" in tex
    assert "n\\\\{}decimal / percent" in tex
    line = next(x for x in tex.splitlines() if x.startswith("smollm2 & +") and x.endswith("% row: smollm2"))
    assert line.split("&")[-1].strip().startswith("6 / 9")


def test_table7_vpr_by_dataset_and_variant_with_crosses(report: Path) -> None:
    got = rows(report, "mistral_vpr")
    variants = ["s000.surface_paraphrase", "s000.instruction_reorder", "s000.fewshot_3", "s000.implicit_framing"]
    assert list(got[0]) == ["model", "dataset", "evaluator", *variants]  # no format_change, no intervals
    assert [(r["model"], r["dataset"]) for r in got] == [("smollm2", "sst2"), ("smollm2", "arc")]
    for r in got:  # "sure" never parses after the surface_paraphrase prompt; 0.8 always does elsewhere
        assert [float(r[v]) for v in variants] == [0.0, 1.0, 1.0, 1.0]
    md = (report / "comparisons" / "mistral_vpr.md").read_text(encoding="utf-8")
    assert "| smollm2 | sst2 | s000.first_char | 0.000 ✗ | 1.000 | 1.000 | 1.000 |" in md
    tex = (report / "tables" / "mistral_vpr.tex").read_text(encoding="utf-8")
    assert "study 000 Tables 7-8" in tex and "A cross marks cells below the VPR $\\geq$ 0.80 inclusion threshold." in tex
    assert "sst2 & 0.000~$\\times$ & 1.000 & 1.000 & 1.000 \\\\ % row: sst2" in tex


def test_table8_vpr_under_both_phrasings_with_intervals_and_delta(report: Path) -> None:
    got = rows(report, "mistral_vpr_phrasings")
    dec, pct = "VPR (s000.verbal_decimal)", "VPR (s000.verbal_percent)"
    assert list(got[0]) == ["model", "dataset", "evaluator", dec, f"{dec} lo", f"{dec} hi", pct, f"{pct} lo",
                            f"{pct} hi", "delta"]
    with open(report.parent / "metrics" / "cells.csv", encoding="utf-8") as f:
        cells = {(r["model"], r["dataset"], r["variant"], r["protocol"]): r for r in csv.DictReader(f)
                 if r["audit"] == "primary"}
    for r in got:
        for col, p in ((dec, "s000.verbal_decimal"), (pct, "s000.verbal_percent")):
            c = cells[(r["model"], r["dataset"], "s000.surface_paraphrase", p)]
            assert (float(r[col]), r[f"{col} lo"], r[f"{col} hi"]) == (float(c["vpr"]), c["vpr lo"], c["vpr hi"])
        assert float(r["delta"]) == float(r[pct]) - float(r[dec]) == 1.0  # 0/2 parsed -> 2/2
    md = (report / "comparisons" / "mistral_vpr_phrasings.md").read_text(encoding="utf-8")
    assert "✗" not in md  # 000 Table 8 marks no cell
    tex = (report / "tables" / "mistral_vpr_phrasings.tex").read_text(encoding="utf-8")
    line = next(x for x in tex.splitlines() if x.endswith("% row: arc"))
    assert line.startswith("arc & \\begin{tabular}[t]{@{}r@{}}0.000\\\\{}{[}0.000, 0.000]\\end{tabular} & ")
    assert line.split("&")[-1].strip().startswith("+1.000")
