"""Study 002's results figures and tables in the paper's shape (issue 41), through ``auditc run`` of
examples/s002_twin.audit on a scripted engine with ``--limit 2`` (two TriviaQA and two PopQA items):
Figure 3 (each method's AVG over the models per metric, A-STB / A-SST with their qualifying shares),
Figure 4 (metric x metric Pearson heatmap over the (method, model) points), Figure 5 (per model),
Figure 6 (accuracy per model and dataset) and Figures 7-9 (VC's confidence-prompt x prompt Pearson
heatmaps with the datasets' items pooled, one figure per family and one of the families' largest models).

The script answers every question with its question's own length class ("A" or "B": the lenient
match marks none correct) and each verbal confidence prompt with a value that depends on the question
(v = 0.1 .. 0.9 from the question's characters), in the prompt's scale: so each of the four pooled
items has its own confidence, identical (up to the scale's rounding) under P(1) and P(%), which are
then correlated with r = 1 over the 4 pooled items, while each dataset alone (2 items) has no r.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from auditlang.cli import main
from auditlang.report.figures_s002 import model_groups
from auditlang.core.requests import Result
from scripted_engine import generation, prompt_text, use_scripted_engine

ROOT = Path(__file__).resolve().parents[2]
EXPRESSIONS = ["Almost No Chance", "Highly Unlikely", "Chances are Slight", "Little Chance", "Unlikely",
               "Probably Not", "About Even", "Better than Even", "Likely", "Probably", "Very Good Chance",
               "Highly Likely", "Almost Certain"]


def _question_value(req) -> float:
    """0.1 .. 0.9 from the item's question (its first line ending in a question mark)."""
    lines = prompt_text(req).splitlines()
    q = next((ln for ln in lines if ln.rstrip().endswith("?")), lines[-1] if lines else "")
    return (sum(map(ord, q)) % 9 + 1) / 10


def script(req):
    if req.kind == "choice_logprobs":
        v = _question_value(req)
        cs = req.p["choices"]
        return Result(request_id=req.id, kind=req.kind,
                      choice_logprobs={c: math.log(v if k == 0 else 1 - v) for k, c in enumerate(cs)})
    if req.kind != "generate":
        return None
    text = prompt_text(req)
    v = _question_value(req)
    if "one of the following expressions" in text:
        return generation(req, EXPRESSIONS[int(v * 12)])
    if "0% and 100%" in text:
        return generation(req, f"{100 * v:.0f}%")
    if "robab" in text or "onfiden" in text or "ertaint" in text:
        return generation(req, f"{v:.1f}")
    if req.p.get("n", 1) > 1:  # the K samples (A-STB / A-SST): 7 x "A", 3 x "B"
        got = [generation(req, a).samples[0] for a in "AAAAAAABBB"[: req.p["n"]]]
        return Result(request_id=req.id, kind=req.kind, samples=got)
    return generation(req, "A" if len(text) % 2 else "B")


@pytest.fixture(scope="module")
def report(tmp_path_factory, shared_data: Path) -> Path:
    mp = pytest.MonkeyPatch()
    use_scripted_engine(mp, script)
    out = tmp_path_factory.mktemp("s002") / "run"
    try:
        rc = main(["run", str(ROOT / "examples" / "s002_twin.audit"), "--data-root", str(shared_data), "--out",
                   str(out), "--limit", "2", "--no-progress"])
    finally:
        mp.undo()
    assert rc == 0
    return out / "report"


def rows(report: Path, name: str) -> list[dict[str, str]]:
    with open(report / "comparisons" / f"{name}.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _png(report: Path, name: str) -> tuple[int, int]:
    data = (report / "figures" / f"{name}.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (report / "figures" / f"{name}.pdf").exists()
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


# the twin's methods= names of each comparison's row protocols (002 Table 6 / Figs 3-5 names)
METHODS = {"robustness_answer": {"s002.prob": "Prob.", "s002.ps": "PS", "s002.p_true": "P(True)"},
           "robustness_vc": {"verbalized(3 prompts)": "VC"}, "robustness_vc_answer": {"s002.vc_P_1": "VC"}}


def _avg_points(report: Path, name: str) -> dict[tuple[str, str], dict[str, float]]:
    """(method, model) -> {metric row of <name>_avg: value} (lenient evaluator)."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows(report, f"{name}_avg"):
        for m in ("smollm2", "gemma3"):
            out.setdefault((METHODS[name][r["protocol"]], m), {})[r["metric"]] = float(r[m]) if r[m] else math.nan
    return out


def test_figure3_method_averages_pooled_over_the_robustness_comparisons(report: Path) -> None:
    pts = {**_avg_points(report, "robustness_answer"), **_avg_points(report, "robustness_vc")}
    methods = {p for p, _ in pts}
    assert methods == {"Prob.", "PS", "P(True)", "VC"}  # the answer-prompt methods and VC, by their methods= names
    for name, names in list(METHODS.items())[:2]:  # each _avg table's AVG is the bar height (equal-weight over the models)
        for proto, p in names.items():
            for metric in ("P-RB", "Brier (mean over prompts)"):
                avg = next(r for r in rows(report, f"{name}_avg") if r["protocol"] == proto and r["metric"] == metric)
                want = np.nanmean([pts[(p, m)][metric] for m in ("smollm2", "gemma3")])
                assert math.isclose(float(avg["AVG"]), want)
    from auditlang.report.figures_s002 import pooled_shares, pooled_values
    from auditlang.report.comparisons.common import Comparison
    from auditlang.report.tables import Table

    # the figure's pooling itself: a comparison's methods= names key its rows, the first comparison wins
    a, b = Table("x_avg", "", ["protocol", "evaluator", "metric", "m1", "AVG", "n_models"]), Table("y_avg", "", [
        "protocol", "evaluator", "metric", "m1", "AVG", "n_models"])
    a.add("p.prob", "e", "P-RB", 0.9, 0.9, 1)
    b.add("p.prob_gen", "e", "P-RB", 0.5, 0.5, 1)
    cx = Comparison("x", "robustness", "u", tables=[a], data={"methods": {"p.prob": "Prob."}}, shape="robustness")
    cy = Comparison("y", "robustness", "v", tables=[b], data={"methods": {"p.prob_gen": "Prob."}}, shape="robustness")
    assert pooled_values([cx, cy]) == {"e": {("Prob.", "m1"): {"P-RB": 0.9}}} and pooled_shares([cx, cy]) == {}
    # every item has 7 x "A" and 3 x "B" among its samples: Y^max holds 7 answers (A-STB qualifies) and there
    # are two groups (A-SST qualifies), so the bars' annotation is 100% for each answer-prompt method
    for r in rows(report, "robustness_answer"):
        assert float(r["A-STB share of items qualifying"]) == 1.0 and float(r["A-SST share of items qualifying"]) == 1.0
    w, h = _png(report, "robustness_avg_s002_lenient")
    assert w > 2 * h
    html = (report / "report.html").read_text(encoding="utf-8")
    assert ("Averaged performance among all models per method, evaluator s002.lenient (robustness_answer, "
            "robustness_vc, robustness_vc_answer)") in html


def test_figure4_metric_correlations_over_method_model_points(report: Path) -> None:
    from auditlang.report.figures_s002 import metric_matrix

    pts = {**_avg_points(report, "robustness_answer"), **_avg_points(report, "robustness_vc")}
    named = {k: {"P-RB": v.get("P-RB", math.nan), "Brier": v.get("Brier (mean over prompts)", math.nan)}
             for k, v in pts.items()}
    labels, mat, n = metric_matrix(named)
    assert labels == ["P-RB", "A-STB", "A-SST", "Brier", "AUROC"] and n == 8  # 4 methods x 2 models
    xy = np.array([(v["P-RB"], v["Brier"]) for v in named.values() if not math.isnan(v["P-RB"])])
    assert math.isclose(mat[0, 3], float(np.corrcoef(xy[:, 0], xy[:, 1])[0, 1])) and mat[0, 3] == mat[3, 0]
    assert math.isnan(mat[1, 4])  # no A-STB / AUROC values given: undefined, drawn as n/a
    _png(report, "robustness_metric_corr_s002_lenient")


def test_figure5_per_model_and_figure6_accuracy(report: Path) -> None:
    w, h = _png(report, "robustness_by_model_s002_lenient")
    assert w > 3 * h  # five metric panels side by side
    acc = rows(report, "robustness_answer_accuracy")
    assert [(r["model"], r["dataset"]) for r in acc] == [(m, d) for m in ("smollm2", "gemma3") for d in ("triviaqa", "popqa")]
    with open(report.parent / "metrics" / "cells.csv", encoding="utf-8") as f:
        cells = [r for r in csv.DictReader(f) if r["audit"] == "answer_prompts" and r["variant"] == "s002.a1"]
    for r in acc:  # the accuracy of the a1 answer (every protocol scores the same answer)
        vals = [float(c["accuracy"]) for c in cells if (c["model"], c["dataset"]) == (r["model"], r["dataset"])]
        assert r["prompt"] == "s002.a1" and math.isclose(float(r["accuracy"]), float(np.mean(vals)))
    _png(report, "robustness_accuracy_s002_lenient")


def test_figures_7_to_9_prompt_correlations_pooled_over_datasets(report: Path) -> None:
    pooled = {(r["model"], r["prompt_1"], r["prompt_2"]): r for r in rows(report, "robustness_vc_prompt_corr_pooled")}
    per_ds = rows(report, "robustness_vc_prompt_corr")
    r = pooled[("smollm2", "s002.vc_P_1", "s002.vc_P_pct")]
    assert int(r["n_items"]) == 4 and math.isclose(float(r["pearson r"]), 1.0)  # 0.1..0.9 and 10%..90%: r = 1
    # each dataset alone has two items: no correlation; pooled, its items are the points (not a mean of r)
    assert all(x["pearson r"] == "" and x["n_items"] == "2" for x in per_ds if x["model"] == "smollm2")
    groups = model_groups({"smollm2": (0.135, "smollm2"), "gemma3": (0.27, "gemma3")})
    assert [g[0] for g in groups] == ["largest", "smollm2", "gemma3"]
    assert model_groups({"q72": (72.0, "qwen"), "q14": (14.0, "qwen"), "q32": (32.0, "qwen")}) == [
        ("qwen", "family qwen", ["q72", "q32", "q14"])]  # 002 Fig 8: one family, sizes descending
    for key in ("largest", "smollm2", "gemma3"):
        _png(report, f"prompt_corr_robustness_vc_s002_lenient_{key}")
    html = (report / "report.html").read_text(encoding="utf-8")
    assert "datasets pooled: the largest model of each family, evaluator s002.lenient (robustness_vc)" in html


def test_table6_one_table_methods_by_models_with_avg(report: Path) -> None:
    got = rows(report, "robustness_answer_pooled")
    assert list(got[0]) == ["evaluator", "CE", "metric", "smollm2", "gemma3", "AVG"]
    assert list(dict.fromkeys(r["CE"] for r in got)) == ["Prob.", "PS", "P(True)", "VC"]  # 002's CE column
    assert [r["metric"] for r in got if r["CE"] == "Prob."][:5] == ["P-RB ↑", "A-STB ↑", "A-SST ↑", "Brier ↓", "AUROC ↑"]
    assert any(r["metric"].startswith("ece(") and r["metric"].endswith(" ↓") for r in got)  # Table 6's ECE row
    own = {(METHODS[n][r["protocol"]], r["metric"]): r for n in ("robustness_answer", "robustness_vc")
           for r in rows(report, f"{n}_avg")}
    for r in got:  # each value is its comparison's per-model mean over the datasets; VC's from robustness_vc
        src = own[(r["CE"], {"P-RB ↑": "P-RB", "Brier ↓": "Brier (mean over prompts)"}.get(r["metric"], "-"))] \
            if r["metric"] in ("P-RB ↑", "Brier ↓") else None
        if src is not None:
            for m in ("smollm2", "gemma3", "AVG"):
                assert math.isclose(float(r[m]), float(src[m]))
        vals = [float(r[m]) for m in ("smollm2", "gemma3") if r[m]]
        assert math.isclose(float(r["AVG"]), float(np.mean(vals)))


def test_table7_vc_conf_p_and_ans_p(report: Path) -> None:
    got = rows(report, "robustness_answer_pooled_prb")
    assert [(r["CE"], r["prompts"], r["comparison"]) for r in got] == [
        ("VC", "Conf-P", "robustness_vc"), ("VC", "Ans-P", "robustness_vc_answer")]  # only VC: two comparisons
    for r, name in zip(got, ("robustness_vc", "robustness_vc_answer")):
        prb = next(x for x in rows(report, f"{name}_avg") if x["metric"] == "P-RB")
        for m in ("smollm2", "gemma3", "AVG"):
            assert math.isclose(float(r[m]), float(prb[m]))
    # Ans-P: each answer prompt's own answer ("A" or "B" by prompt length) scored by P(1) with the
    # question's value: one confidence per item under every prompt, so P-RB = 1
    assert float(got[1]["AVG"]) == 1.0


def test_table8_a_sst_y_min_and_not_max(report: Path) -> None:
    got = rows(report, "robustness_answer_pooled_sst")
    assert [(r["CE"], r["Y"]) for r in got] == [(m, y) for m in ("Prob.", "PS", "P(True)") for y in ("Y^min", "Y^!=max")]
    avg = {(METHODS["robustness_answer"][r["protocol"]], r["metric"]): r for r in rows(report, "robustness_answer_avg")}
    for r in got:
        src = avg[(r["CE"], "A-SST" if r["Y"] == "Y^min" else "A-SST not max")]
        assert math.isclose(float(r["gemma3"]), float(src["gemma3"]))


def test_table1_simulation_of_section_3_2(report: Path) -> None:
    got = rows(report, "simulation")
    assert list(got[0])[:6] == ["estimator", "ECE ↓", "Brier ↓", "AUROC ↑", "STB ↑", "SST ↑"]
    assert [r["estimator"] for r in got] == ["f_oracle", "f_constant", "f_random", "f_prior"]  # 002 Table 1's rows
    v = {r["estimator"]: {k: float(x) for k, x in r.items() if k != "estimator"} for r in got}
    assert [v["f_oracle"][k] for k in ("ECE ↓", "Brier ↓", "AUROC ↑", "STB ↑", "SST ↑")] == [0.0, 0.0, 1.0, 1.0, 1.0]
    # by hand, with p = 1 - d ~ U[0, 1]: Brier(constant) = E[p(1 - p)] = 1/6, Brier(random) = E[2p(1 - p)] = 1/3,
    # Brier(prior) = 1/4; AUROC(prior) = 1/2; constant and prior are constant within an input: STB 1, SST 0
    assert abs(v["f_constant"]["Brier ↓"] - 1 / 6) < 0.01 and abs(v["f_random"]["Brier ↓"] - 1 / 3) < 0.01
    assert v["f_prior"]["Brier ↓"] == 0.25 and v["f_prior"]["AUROC ↑"] == 0.5
    assert v["f_constant"]["ECE ↓"] < 0.02 and v["f_prior"]["ECE ↓"] < 0.02 and v["f_random"]["ECE ↓"] > 0.25
    for est in ("f_constant", "f_prior"):
        assert v[est]["STB ↑"] == 1.0 and v[est]["SST ↑"] == 0.0
    assert 0.75 < v["f_constant"]["AUROC ↑"] < 0.9 and 0.6 < v["f_random"]["AUROC ↑"] < 0.72
    text = (report / "comparisons" / "simulation.md").read_text(encoding="utf-8")
    assert "N = 2,000 inputs and M = 10 generations each, seed 42" in text and "study 002 Table 1" in text


def test_simulation_stability_equals_the_metric_functions() -> None:
    from auditlang.metrics.robustness import answer_sensitivity, answer_stability
    from auditlang.report.comparisons.simulation import draw, max_group, stability_sensitivity

    corr, preds = draw(200, 10, 7)
    groups = [list(r) for r in corr.astype(int)]
    for conf in preds.values():
        stb, sst, _, _ = stability_sensitivity(conf, corr)
        assert math.isclose(stb, answer_stability(conf.tolist(), groups).value, abs_tol=1e-12)
        assert math.isclose(sst, answer_sensitivity(conf.tolist(), groups).value, abs_tol=1e-12)
    tie = np.array([[0.0, 1.0, 1.0, 0.0]])  # a 2-2 tie: Y^max is the group of the first generation (wrong)
    assert max_group(tie).tolist() == [[True, False, False, True]]



CASES = [("smollm2", "triviaqa"), ("gemma3", "popqa")]


def test_case_study_tables_9_and_2_prompt_robustness(report: Path) -> None:
    got = rows(report, "case_prompts")
    assert list(got[0]) == ["model", "dataset", "item", "question", "y", "Corr.", "CE", "t_1", "t_2", "t_3", "P-RB"]
    assert [(r["model"], r["dataset"], r["CE"]) for r in got] == [
        (m, d, ce) for m, d in CASES for ce in ("Prob.", "PS", "VC", "P(True)")]  # methods= order, per case
    summary = {r["CE"]: r for r in rows(report, "case_prompts_summary")}
    assert list(rows(report, "case_prompts_summary")[0]) == ["CE"] + [
        f"{m} / {d} {x}" for m, d in CASES for x in ("max", "min", "mean", "P-RB")]
    for r in got:
        assert r["Corr."] in ("0", "1") and r["question"].endswith("?") and r["y"] in ("A", "B")
        vals = np.array([float(r[f"t_{k}"]) for k in (1, 2, 3) if r[f"t_{k}"]])
        if vals.size >= 2:  # by hand: 1 - population Std over the item's prompts (002 eq. 3)
            assert math.isclose(float(r["P-RB"]), 1 - float(np.std(vals)))
        s = summary[r["CE"]]
        lab = f"{r['model']} / {r['dataset']}"
        assert math.isclose(float(s[f"{lab} max"]), vals.max()) and math.isclose(float(s[f"{lab} min"]), vals.min())
        assert math.isclose(float(s[f"{lab} mean"]), vals.mean())
    # VC's prompts are the three confidence prompts: P(1) and P(%) read the question's value v, the
    # linguistic one the expression int(12 v) maps to, so t_1 = t_2 (0.1 .. 0.9 and 10% .. 90%)
    for r in got:
        if r["CE"] == "VC":
            assert r["t_1"] == r["t_2"] and 0.1 <= float(r["t_1"]) <= 0.9
    md = (report / "comparisons" / "case_prompts.md").read_text(encoding="utf-8")
    assert "study 002 Table 9" in md and "item=first: the first item of the dataset's sample in the records" in md
    assert "study 002 Table 2" in (report / "comparisons" / "case_prompts_summary.md").read_text(encoding="utf-8")


def test_case_study_tables_10_and_3_sampled_answers(report: Path) -> None:
    got = rows(report, "case_samples")
    assert list(got[0]) == ["model", "dataset", "item", "question", "y*", "CE", *[f"y_{k}" for k in range(1, 11)],
                            "A-STB", "A-SST"]
    assert [(r["model"], r["CE"]) for r in got] == [(m, ce) for m, _ in CASES for ce in ("answer", "Prob.", "PS", "P(True)")]
    for r in got:
        if r["CE"] == "answer":  # the script's K = 10 samples: 7 x "A", 3 x "B" (002 Table 10's answer row)
            assert [r[f"y_{k}"] for k in range(1, 11)] == list("AAAAAAABBB") and r["y*"]
        else:  # each method scores every sample of the item alike here: A-STB = 1, A-SST = 0 by hand
            vals = {r[f"y_{k}"] for k in range(1, 11)}
            assert len(vals) == 1 and math.isclose(float(r["A-STB"]), 1.0) and abs(float(r["A-SST"])) < 1e-12
    s = rows(report, "case_samples_summary")
    assert list(s[0]) == ["CE"] + [c for m, d in CASES for c in (f"{m} / {d}: A [Y^max]", f"{m} / {d}: B [Y^min]",
                                                                  f"{m} / {d} A-STB", f"{m} / {d} A-SST")]
    ten = {(r["model"], r["CE"]): float(r["y_1"]) for r in got if r["CE"] != "answer"}
    for r in s:
        for m, d in CASES:
            assert math.isclose(float(r[f"{m} / {d}: A [Y^max]"]), ten[(m, r["CE"])])
    assert "study 002 Table 3" in (report / "comparisons" / "case_samples_summary.md").read_text(encoding="utf-8")


def test_case_study_latex_in_the_paper_s_block_shape(report: Path) -> None:
    """tables/case_*.tex: Tables 10 and 9 as 002 sets them (model and dataset on a case's first row, a
    rule between cases, the question in the notes, short sampled answers as the first row), Table 3
    transposed (a row per distinct answer, a column per method) with its note saying so."""
    tex = (report / "tables" / "case_samples.tex").read_text(encoding="utf-8")
    assert tex.count("\\begin{tabular") == 2 and "study 002 Table 10" in tex and "study 002 Table 3" in tex
    ten, three = tex.split("\\end{\\auditwide}", 1)  # each float: its tabular's box, then the float
    assert "question" not in ten.split("\\midrule", 1)[0]  # no question column: it is in the notes
    assert " & ".join(["answer", *"AAAAAAABBB"]) in ten
    assert ten.count("\\midrule") == 2  # the header's rule, and one between the two cases
    assert "One row per distinct sampled answer text" in three and "One column per distinct" not in three
    for m, d in CASES:
        assert f"{m} / {d} & A [Y\\^{{}}max]" in three and "& B [Y\\^{}min]" in three
    prompts = (report / "tables" / "case_prompts.tex").read_text(encoding="utf-8")
    assert "study 002 Table 9" in prompts and "study 002 Table 2" in prompts
    assert "\\auditid{t\\_1}" in prompts or "t\\_1" in prompts


def test_methods_say_the_case_studies_and_the_simulation_have_no_intervals(report: Path) -> None:
    """They compute none (their tables have no lo/hi columns): methods.tex says so, not that they
    'declare no resampling unit' (the sentence for a plugin comparison that declares nothing)."""
    tex = " ".join((report / "methods.tex").read_text(encoding="utf-8").split())
    assert "declare no resampling unit" not in tex and "declares no resampling unit" not in tex
    assert ("The \\auditid{robustness\\_answer}, \\auditid{case\\_prompts}, \\auditid{case\\_samples} and simulation "
            "comparisons have no intervals.") in tex
    for name in ("case_prompts", "case_samples", "simulation"):
        header = (report / "comparisons" / f"{name}.csv").read_text(encoding="utf-8").splitlines()[0]
        assert " lo" not in header and " hi" not in header
