"""Study 004's results tables and figures in the paper's shape (issue 41), through ``auditc run``
of examples/s004_twin.audit on a scripted engine with ``--limit 2`` (two MMLU and two HellaSwag
items): Table 1 (models as column blocks, best bold / worst underlined) and Table 6 (the same,
unmarked), Table 3 (the two AskCals with the corrected one's (+/-) differences), Figure 2 (mean
IoU_cons against model size, from ``<compare>_by_size``) and Figures 4-8 (cross-method DecCons and
IoU_cons heatmaps per variant type, from ``<compare>_cross_by_type``).

The script answers "A" to every question, 0.7 to every confidence question, and "Yes" to MoreInfo's
"Do you need more information" only under the one-shot prompt (whose example is "Who sings 'Here
Comes the Sun'?" on MMLU): MoreInfo accepts both items under every variant but the one-shot one,
where it rejects both. By hand (004 section 3), MoreInfo against the original prompt: under the
one-shot prompt A_1 = {1, 2}, A_2 = {} and R_1 = {}, R_2 = {1, 2}, so IoU_acc = 0, IoU_rej = 0,
DecCons = 0; under Space A_1 = A_2 = {1, 2}, so IoU_acc = 1 and DecCons = 1 (IoU_rej 0/0 = 0, the
metrics' convention). Cross-method, NOTA answers "A" (never "E: none of the above") so it accepts
both items: its DecCons with MoreInfo is 1 under the original prompt and 0 under the one-shot one.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any

import pytest

from auditlang.cli import main
from auditlang.core.requests import Result
from scripted_engine import generation, prompt_text, use_scripted_engine

ROOT = Path(__file__).resolve().parents[2]
METRICS = ("IoU_cons", "IoU_acc", "IoU_rej", "DecCons", "Agreement")
TYPES = ["space_insertion", "option_shuffle", "typo", "one_shot"]


def script(req):
    if req.kind == "choice_logprobs":
        return Result(request_id=req.id, kind=req.kind,
                      choice_logprobs={c: -0.5 - k for k, c in enumerate(req.p["choices"])})
    if req.kind != "generate":
        return None
    text = prompt_text(req)
    if "more information" in text:
        return generation(req, "Yes" if "Here Comes the Sun" in text else "No")
    if "robab" in text or "onfiden" in text:
        return generation(req, "0.7")
    return generation(req, "A")


@pytest.fixture(scope="module")
def report(tmp_path_factory, shared_data: Path) -> Path:
    mp = pytest.MonkeyPatch()
    use_scripted_engine(mp, script)
    out = tmp_path_factory.mktemp("s004") / "run"
    try:
        rc = main(["run", str(ROOT / "examples" / "s004_twin.audit"), "--data-root", str(shared_data), "--out",
                   str(out), "--limit", "2", "--no-progress"])
    finally:
        mp.undo()
    assert rc == 0
    return out / "report"


def rows(report: Path, name: str) -> list[dict[str, str]]:
    with open(report / "comparisons" / f"{name}.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def md_row(report: Path, name: str, first: str, second: str) -> list[str]:
    for line in (report / "comparisons" / f"{name}.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:2] == [first, second]:
            return cells
    raise AssertionError(f"{name}: no row {first} / {second}")


def test_table1_models_as_column_blocks_with_best_and_worst_marked(report: Path) -> None:
    got = rows(report, "consistency_mmlu_by_model")
    assert list(got[0]) == ["probe", "variant type"] + [f"smollm2 {m}" for m in METRICS]
    probes = list(dict.fromkeys(r["probe"] for r in got))
    assert probes == [f"s004.{p}" for p in ("tokprob_probe", "askcal", "embedding", "nota", "moreinfo", "selfref")]
    assert [r["variant type"] for r in got if r["probe"] == "s004.moreinfo"] == TYPES
    more = {r["variant type"]: r for r in got if r["probe"] == "s004.moreinfo"}
    assert float(more["one_shot"]["smollm2 IoU_acc"]) == 0.0 and float(more["one_shot"]["smollm2 DecCons"]) == 0.0
    assert float(more["space_insertion"]["smollm2 IoU_acc"]) == 1.0
    assert float(more["space_insertion"]["smollm2 DecCons"]) == 1.0
    # the same means as the by-type table (004 Table 1: the mean over the type's variants)
    by_type = {(r["probe"], r["variant type"]): r for r in rows(report, "consistency_mmlu_by_type")}
    for r in got:
        for m in METRICS:
            assert math.isclose(float(r[f"smollm2 {m}"]), float(by_type[(r["probe"], r["variant type"])][f"{m} mean"]))
    # Markdown: best bold, worst in italics (no underline there), at two decimals
    md = md_row(report, "consistency_mmlu_by_model", "s004.moreinfo", "one_shot")
    assert md[2 + METRICS.index("DecCons")] == "_0.00_"
    assert md_row(report, "consistency_mmlu_by_model", "s004.moreinfo", "space_insertion")[5] == "**1.00**"
    text = (report / "comparisons" / "consistency_mmlu_by_model.md").read_text(encoding="utf-8")
    assert "the best (highest) variant type in bold, the worst (lowest) underlined" in text
    assert "shown in italics here (Markdown has no underline)" in text
    html = (report / "report.html").read_text(encoding="utf-8")  # HTML underlines, as 004 prints it
    assert "<u>0.00</u>" in html and "<strong>1.00</strong>" in html
    # LaTeX: one column block per model (model over metric), the probe on its first row, marks as 004 prints them
    tex = (report / "tables" / "consistency_mmlu.tex").read_text(encoding="utf-8")
    assert "study 004 Tables 1, 6" in tex and "Best results in bold and the worst underlined" in tex
    assert "\\begin{tabular}[b]{@{}r@{}}smollm2\\\\{}DecCons\\end{tabular}" in tex
    line = next(x for x in tex.splitlines() if x.endswith("% row: s004.moreinfo / one_shot"))
    assert line.startswith(" & \\auditid{one\\_shot} & ") and "\\underline{0.00}" in line
    line = next(x for x in tex.splitlines() if x.endswith("% row: s004.moreinfo / space_insertion"))
    assert line.startswith("\\auditid{s004.moreinfo} & ") and "\\textbf{1.00}" in line


def test_table6_scaling_blocks_unmarked(report: Path) -> None:
    got = rows(report, "consistency_scaling_by_model")
    assert list(got[0])[2:] == [f"{m} {x}" for m in ("smollm2", "gemma3") for x in METRICS]
    text = (report / "comparisons" / "consistency_scaling_by_model.md").read_text(encoding="utf-8")
    assert "**" not in text and "underlined" not in text  # 004 Table 6 marks nothing (best_worst not set)
    more = {r["variant type"]: r for r in got if r["probe"] == "s004.moreinfo"}
    assert float(more["one_shot"]["gemma3 DecCons"]) == 0.0 and float(more["typo"]["gemma3 DecCons"]) == 1.0


def test_table3_askcal_differences(report: Path) -> None:
    got = rows(report, "askcal_correction_hellaswag_difference")
    first, second = "s004.askcal_nocorr", "s004.askcal"
    assert [r["probe"] for r in got] == [first] * 4 + [second] * 4
    assert [r["variant type"] for r in got] == TYPES * 2
    by_type = {(r["probe"], r["variant type"]): r for r in rows(report, "askcal_correction_hellaswag_by_type")}
    for r in got:
        for m in METRICS:
            diff = r[f"{m} - {first}"]
            if r["probe"] == first:
                assert diff == ""
            else:
                want = float(by_type[(second, r["variant type"])][f"{m} mean"]) - float(
                    by_type[(first, r["variant type"])][f"{m} mean"])
                assert math.isclose(float(diff), want)
    tex = (report / "tables" / "askcal_correction_hellaswag.tex").read_text(encoding="utf-8")
    assert "study 004 Table 3" in tex
    block = next(x for x in tex.splitlines() if x.endswith("% row: s004.askcal / typo") and " (" in x)
    vals = [c.strip() for c in block.split("\\\\")[0].split("&")[1:]]
    r = next(x for x in got if x["probe"] == second and x["variant type"] == "typo")
    for cell, m in zip(vals, METRICS):  # ".53 (+.29)": the value, then the signed difference without its 0
        d = float(r[f"{m} - {first}"])
        assert re.fullmatch(r"\d\.\d\d \([+-](\.|1\.)\d\d\)", cell), cell
        assert cell.startswith(f"{float(r[m]):.2f} (") and cell.endswith(f"{d:+.2f})".replace("0.", ".", 1))


def test_figures_4_to_8_cross_method_heatmaps_per_variant_type(report: Path) -> None:
    got = rows(report, "consistency_mmlu_cross_by_type")
    types = list(dict.fromkeys(r["variant type"] for r in got))
    assert types == ["original"] + TYPES
    pair = {r["variant type"]: r for r in got if (r["probe_1"], r["probe_2"]) == ("s004.nota", "s004.moreinfo")}
    assert float(pair["original"]["DecCons mean"]) == 1.0 and float(pair["one_shot"]["DecCons mean"]) == 0.0
    cross = rows(report, "consistency_mmlu_cross")
    for r in got:  # the mean over the variants of each type (one each in the twin)
        vals = [float(x["DecCons"]) for x in cross if (x["probe_1"], x["probe_2"]) == (r["probe_1"], r["probe_2"])
                and (x["variant"] == "s004.original") == (r["variant type"] == "original")]
        assert vals and float(r["DecCons mean"]) in vals
    html = (report / "report.html").read_text(encoding="utf-8")
    for compare, model, dataset in (("consistency_mmlu", "smollm2", "mmlu"), ("consistency_hellaswag", "gemma3", "hellaswag"),
                                    ("consistency_scaling", "gemma3", "mmlu")):
        for metric in ("DecCons", "IoU_cons"):
            png = report / "figures" / f"consistency_by_type_{compare}_{metric}_{model}_{dataset}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            w, h = _png_size(png)
            assert w > 3 * h  # five panels side by side: original, space, options, typo, one-shot
            assert (f"Cross-method {metric} per variant type, mean over each type&#39;s variants: model {model}, "
                    f"dataset {dataset} ({compare}") in html


def test_figure2_mean_iou_cons_against_size(report: Path) -> None:
    got = rows(report, "consistency_scaling_by_size")
    assert list(got[0]) == ["dataset", "evaluator", "probe", "model", "size (B)", "family", "n_types", "IoU_cons mean"]
    sizes = {r["model"]: float(r["size (B)"]) for r in got}
    assert sizes == {"smollm2": 0.135, "gemma3": 0.27}  # the embedded catalogue's sizes
    by_type = rows(report, "consistency_scaling_by_type")
    for r in got:
        vals = [float(x["IoU_cons mean"]) for x in by_type if (x["model"], x["probe"]) == (r["model"], r["probe"])]
        assert int(r["n_types"]) == len(vals) == 4 and math.isclose(float(r["IoU_cons mean"]), sum(vals) / 4)
    png = report / "figures" / "consistency_size_consistency_scaling.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (report / "report.html").read_text(encoding="utf-8")
    assert "Mean intra-method IoU_cons per probe against model size (consistency_scaling" in html
    # smollm2 and gemma3 are two families: no line joins their sizes (session 21: one line did)
    assert "one line per probe and family (line style), none joins two families" in html
    assert not (report / "figures" / "consistency_size_consistency_mmlu.png").exists()  # one model: no size line


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_figure2_lines_stay_within_a_family() -> None:
    from auditlang.report.figures_s004 import size_lines

    sm = {"sizes": {"a1": 1.0, "a8": 8.0, "b3": 3.0, "c": 2.0}, "families": {"a1": "A", "a8": "A", "b3": "B", "c": None},
          "values": {("d", "e", "p", m): v for m, v in (("a1", 0.1), ("a8", 0.8), ("b3", 0.3), ("c", 0.2))}}
    got = size_lines(sm)[("d", "e")]
    assert got == {("p", "A"): [(1.0, 0.1), (8.0, 0.8)], ("p", "B"): [(3.0, 0.3)], ("p", "model c"): [(2.0, 0.2)]}


def test_methods_quote_the_rendered_answer_slot_not_the_template_comment(report: Path) -> None:
    """s004's probe templates name `generation` in their {# source #} note: methods.tex quoted that
    note as where the answer is shown (session 21). It quotes the rendered line around the answer."""
    tex = " ".join((report / "methods.tex").read_text(encoding="utf-8").split())
    assert "source: paper 004" not in tex and "\\# source" not in tex
    assert "(shown as ``\\ldots{} one answer from the above choices. Guess: $<$answer$>$ Provide the probability" in tex
    # self_ref's new prompt holds the variant's answer prompt; said of the prompt, not of the conversation
    # it does not continue (session 36: "... conversation (form) that repeats the variant's answer prompt")
    assert ("not a continuation of the answer's conversation (a single user turn through the chat template), and this "
            "new prompt repeats the variant's answer prompt (every request checked contains it)") in tex
    assert "template) that repeats" not in tex


def test_answer_slot_skips_comments_and_cuts_long_lines() -> None:
    from types import SimpleNamespace

    from auditlang.protocols.facts import answer_slot

    tpl = SimpleNamespace(inlined_source="{# the generation fills {response1} #}\nQ: {{ question }}\nProposed Answer: "
                                         "{{ generation | trim }}\n")
    assert answer_slot(tpl) == "Proposed Answer: <answer>"
    long = SimpleNamespace(inlined_source="x " * 60 + "Guess: {{ proposed_answer }} " + "y " * 60)
    got = answer_slot(long)
    assert got.startswith("\u2026 ") and got.endswith(" \u2026") and "Guess: <answer> y" in got and len(got) < 110


def test_checklist_lists_the_probes_default_templates(report: Path) -> None:
    """A probe whose spec sets no template uses its program's declared stdlib default (and the
    _oneshot form for one-shot items): the checklist names both with their hashes and lists their
    text, as for the spec's own templates; it never says the text was 'not listed' (session 21)."""
    md = (report / "checklist.md").read_text(encoding="utf-8")
    assert "<built-in default of ask_cal>" not in md and "&lt;built-in default of ask_cal>" not in md
    assert "template template" not in md and "is not listed here" not in md
    for probe in ("askcal", "nota", "moreinfo", "selfref"):
        assert f"stdlib template s004/mc/{probe} (hash " in md and f"stdlib template s004/mc/{probe}_oneshot (hash " in md
    assert "protocol s004.askcal (ask_cal): the stdlib template s004/mc/askcal (the protocol's default), sha256 " in md


def test_cross_heatmap_marks_pairs_without_a_value_na() -> None:
    """A probe with no abstain decisions under a variant type (askcal under space insertion in the
    embedded s004 report) has no pair value there: its cells, the diagonal included, print "n/a"
    and the caption says why (session 36: they were blank and the diagonal showed 1.00)."""
    import matplotlib

    matplotlib.use("Agg")
    from auditlang.report.comparisons.common import Comparison
    from auditlang.report.figures_s004 import NA_NOTE, cross_matrix, s004_figures

    probes = ["p.a", "p.b", "p.c"]
    hm = {"probes": probes, "types": ["original", "typo"],
          "DecCons": {("original", "p.a", "p.b"): 0.5, ("original", "p.a", "p.c"): 0.25, ("original", "p.b", "p.c"): 1.0,
                      ("typo", "p.b", "p.c"): 0.75},
          "IoU_cons": {("original", "p.a", "p.b"): 0.4, ("original", "p.a", "p.c"): 0.2, ("original", "p.b", "p.c"): 0.9,
                       ("typo", "p.b", "p.c"): 0.6}}
    full, typo = cross_matrix(hm, "DecCons", "original"), cross_matrix(hm, "DecCons", "typo")
    assert full.tolist() == [[1.0, 0.5, 0.25], [0.5, 1.0, 1.0], [0.25, 1.0, 1.0]]
    assert [math.isnan(x) for x in typo.ravel()] == [True, True, True, True, False, False, True, False, False]
    assert typo[1, 2] == typo[2, 1] == 0.75 and typo[1, 1] == typo[2, 2] == 1.0
    c = Comparison("cmp", "consistency", "main", shape="consistency", data={"cross_by_type": {("m", "d", "e"): hm}})
    saved: list[tuple[Any, str, str]] = []
    figs = s004_figures([c], lambda fig, name, title: saved.append((fig, name, title)) or fig, lambda s: s)
    assert [n for _, n, _ in saved] == ["consistency_by_type_cmp_DecCons_m_d", "consistency_by_type_cmp_IoU_cons_m_d"]
    fig, _, title = saved[0]
    assert title.endswith("; " + NA_NOTE) and fig._suptitle.get_text() == title
    original, typo_ax = fig.axes[:2]
    assert sorted(t.get_text() for t in original.texts) == sorted(["1.00"] * 3 + ["0.50", "0.25", "1.00"] * 2)
    assert sorted(t.get_text() for t in typo_ax.texts) == sorted(["n/a"] * 5 + ["1.00", "1.00", "0.75", "0.75"])
    for f in figs:
        matplotlib.pyplot.close(f)
    hm_full = {**hm, "types": ["original"]}
    c2 = Comparison("cmp", "consistency", "main", shape="consistency", data={"cross_by_type": {("m", "d", "e"): hm_full}})
    saved.clear()
    figs = s004_figures([c2], lambda fig, name, title: saved.append((fig, name, title)) or fig, lambda s: s)
    assert saved and all("n/a" not in title for _, _, title in saved)  # the note only where a cell is n/a
    for f in figs:
        matplotlib.pyplot.close(f)


def test_methods_tell_askcal_with_and_without_the_threshold_correction_apart(report: Path) -> None:
    """004 Table 3 compares AskCal with and without the §5.5 threshold correction
    (s004.askcal_nocorr = askcal with (correction=false)); the methods paragraph said the same of
    both until session 37. Each thresholded probe now states its rule, as its fit applies it."""
    from auditlang.metrics.thresholds import DEFAULT_BOUNDS, FALLBACK_THRESHOLD

    assert (DEFAULT_BOUNDS, FALLBACK_THRESHOLD) == ((0.05, 0.95), 0.5)
    text = re.sub(r"\\auditid\{([^}]*)\}", r"\1", (report / "methods.tex").read_text(encoding="utf-8")).replace("\\_", "_")
    on = ("verbalized confidence thresholded on the dev split (ask_cal; a fitted threshold outside [0.05, 0.95] is "
          "replaced by 0.5, 004 Sec. 5.5)")
    off = ("verbalized confidence thresholded on the dev split (ask_cal; the fitted threshold is kept, without 004 "
           "Sec. 5.5's replacement by 0.5)")
    hellaswag = text.split("Audit hellaswag_probes")[1].split("Audit ")[0]
    assert on in hellaswag and off in hellaswag
    assert off not in text.split("Audit hellaswag_probes")[0]  # mmlu_probes has the corrected AskCal only
    assert ("the raw first-token probability of the answer (top-20 window), thresholded on the dev split (a fitted "
            "threshold outside [0.05, 0.95] is replaced by 0.5, 004 Sec. 5.5)") in text


def test_methods_state_how_many_new_prompts_repeat_the_answer_prompt(report: Path) -> None:
    """AskCal's and MoreInfo's new prompts repeat the variant's answer prompt except under the one-shot
    variant (their _oneshot templates lay the example out their own way): the methods paragraph
    gives the count the checklist states, where until session 37 it said nothing of a mixed count."""
    md = (report / "checklist.md").read_text(encoding="utf-8")
    counts = set(re.findall(r"- smollm2: (\d+) of (\d+) requests checked contain the variant's answer prompt", md))
    mixed = {(h, n) for h, n in counts if 0 < int(h) < int(n)}
    assert mixed, counts
    text = re.sub(r"\\auditid\{([^}]*)\}", r"\1", (report / "methods.tex").read_text(encoding="utf-8"))
    mmlu = text.split("Audit hellaswag_probes")[0]
    for h, n in mixed:
        assert f"and this new prompt repeats the variant's answer prompt in {h} of {n} requests checked" in mmlu
