"""What a reviewer of the quickstart report found unflagged (s10): cells whose model predicts one
label for every item or writes the option list back (answer-parse rate 1.000 and no warning), and
verbal metrics computed on a few parsed items or on confidences that copy the prompt's example
value. A small spec is run into a run directory (records of known shape), the report is built and
its files are read. Each test fails on the old output."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from report_fixtures import build_run, make_records

from auditlang.report import build_report
from auditlang.score.cellmetrics import write_cell_metrics
from auditlang.store.records import write_records

SPEC = """
settings s { seed = 42, data_root = "DATA" }
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=20, seed=42)
model small = hf("org/small-1b", size=1.0, revision="r1", dtype=bf16)
model mid = hf("org/mid-3b", size=3.0, revision="r2", dtype=bf16, chat=false)
template t_plain = template("Answer the following multiple-choice question. {{ question }} Answer:")
template conf_07 = template("How sure are you? Reply with a probability between 0.0 and 1.0 only, e.g. 0.7.")
variant plain = variant(t_plain)
protocol tok = token_prob(readout=first_token, normalise=label_set, window=top_k, top_k=20)
protocol verbal = verbalized(scale=decimal_01, phrasing=conf_07, provenance=self, mode=followup)
evaluator fc = first_char()
metric ece10 = ece(bins=10, binning=equal_width)
audit a {
  models = [small, mid]
  datasets = [arc]
  variants = [plain]
  protocols = [tok, verbal]
  evaluators = [fc]
  metrics = [accuracy, ece10, brier]
  bootstrap = bootstrap(resamples=50, seed=1)
}
"""


def _report(tmp: Path, edit=None, text: str = SPEC) -> Path:
    spec, plan, run_dir = build_run(tmp, text)
    recs = make_records(spec, plan)
    if edit is not None:
        recs = [edit(r) for r in recs]
    write_records(run_dir / "records.parquet", recs)
    write_cell_metrics(spec, plan, run_dir, recs)
    return build_report(spec, plan, run_dir)


def _read(out: Path, name: str) -> str:
    return (out / name).read_text(encoding="utf-8")


def _all_b_with_options(r):
    """Model small answers 'B' to every item and writes the four options back."""
    if r.model != "small":
        return r
    return replace(r, pred="B", correct=0.0, generation="\nA. one\nB. two\nC. three\nD. four")


_seen = {"small": 0, "mid": 0}


def _copies_example(r):
    """Model mid's verbal confidences: 0.7 (the phrasing's example) for 18 of 20 items; 2 parsed
    for model small."""
    if r.protocol != "verbal":
        return r
    _seen[r.model] += 1
    if r.model == "mid":
        return replace(r, confidence=0.7 if _seen["mid"] <= 18 else 0.95, confidence_parsed=True)
    ok = _seen["small"] <= 2
    return replace(r, confidence=0.9 if ok else float("nan"), confidence_parsed=ok)


@pytest.fixture(scope="module")
def degenerate(tmp_path_factory) -> Path:
    return _report(tmp_path_factory.mktemp("degenerate"), _all_b_with_options)


@pytest.fixture(scope="module")
def verbal(tmp_path_factory) -> Path:
    return _report(tmp_path_factory.mktemp("verbal"), _copies_example)


def test_one_label_for_every_item_is_flagged(degenerate):
    md, cells = _read(degenerate, "checklist.md"), _read(degenerate, "cells.md")
    want = "cell small / arc / plain / fc predicts 'B' for 20/20 items (the gold label is 'B' for 0/20)"
    assert f"WARNING: {want}" in md
    # issue 34 item 5: the warning is the checklist's (and the HTML report's), not a line in the paper tables
    assert want.replace("'", "&#x27;") in _read(degenerate, "report.html")
    assert want not in cells and "predicts `B' for 20/20 items" not in " ".join(_read(degenerate, "tables/cells_a.tex").split())
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert want in summary  # listed in the checklist's summary
    assert "(the cells of protocols tok, verbal)" in md
    assert "cell mid /" not in md  # mid answers the items


def test_paper_tables_carry_no_warning_or_unspecified_line(degenerate):
    """issue 34 item 5: results tables (tables/*.tex), disclosure.md/.tex and the cells tables hold
    no WARNING / UNSPECIFIED item; the checklist has them."""
    report = degenerate / "report" if (degenerate / "report").is_dir() else degenerate
    paper = [*sorted(report.glob("tables/*.tex")), report / "disclosure.md", report / "disclosure.tex", report / "cells.md"]
    assert len(paper) > 3
    for f in paper:
        text = f.read_text(encoding="utf-8")
        assert "WARNING" not in text and "UNSPECIFIED" not in text, f.name
    md = _read(degenerate, "checklist.md")
    assert "WARNING:" in md


def test_option_list_written_back_is_flagged(degenerate):
    md = _read(degenerate, "checklist.md")
    assert "writes back the option list instead of one answer in 20/20 generations" in md


def test_no_flag_without_a_degenerate_cell(verbal):
    md = _read(verbal, "checklist.md")
    assert "none: no answer set of 5 or more items predicts one label for every item" in md


def test_verbal_metrics_state_their_item_count(verbal):
    cells = _read(verbal, "cells.md")
    assert "small / arc / plain / verbal / fc: n_conf=2 of n=20" in cells
    assert "computed on the n_conf items whose confidence was read, not on n" in cells
    assert "small / arc / plain / verbal / fc: n_conf=2 of n=20" in _read(verbal, "checklist.md")
    assert "\\auditid{n\\_conf}=2 of n=20" in _read(verbal, "tables/cells_a.tex")
    assert "mid / arc / plain / verbal / fc: n_conf" not in cells  # every confidence of mid parsed


def test_example_value_copies_are_warned_from_the_prompt(verbal):
    md = _read(verbal, "checklist.md")
    want = ('18 of 20 parsed verbal confidences of verbal from model mid equal 0.7, the example value its prompt '
            'shows (\u201ce.g. 0.7\u201d)')
    assert f"WARNING: {want}" in md
    assert want not in _read(verbal, "cells.md")  # the checklist's, not the paper table's (issue 34 item 5)
    assert "from model small equal" not in md  # 2 parsed, neither the example


def test_which_model_uses_a_chat_template_and_how_the_follow_up_was_asked(verbal):
    md = _read(verbal, "checklist.md")
    assert ("Prompts are rendered through the chat template for org/small-1b; org/mid-3b is given plain text, "
            "without a chat template.") in md
    assert ("asked after the model's answer with the phrasing conf_07 (a user turn after the assistant's answer, "
            "through the chat template for org/small-1b; the answer prompt, the answer, a blank line and the phrasing "
            "as one plain text for org/mid-3b)") in md
    assert "asked in a follow-up turn" not in md
    assert ("small: a follow-up user turn: [user: the answer prompt, assistant: the answer, user: the phrasing conf_07] "
            "(chat template)") in md
    assert ("mid: one plain-text prompt: the answer prompt, the answer, a blank line and the phrasing conf_07 "
            "concatenated (no chat template)") in md
    tex = " ".join(_read(verbal, "methods.tex").split())
    assert "is given plain text, without a chat template" in tex


def test_each_comparison_states_its_own_resample_count(tmp_path):
    spec = SPEC.replace("protocols = [tok, verbal]", "protocols = [tok, verbal, tb]") + """
protocol tb = token_prob(readout=T1, scored=generated, context=bare)
compare g20 = protocol_grid(a, verbal=verbal, configs=[tb], estimators=[ece10], resamples=20)
compare g = protocol_grid(a, verbal=verbal, configs=[tb], estimators=[ece10])
"""
    s, plan, run_dir = build_run(tmp_path, spec)
    out = build_report(s, plan, run_dir)
    md = _read(out, "checklist.md")
    assert "(B=50, seed 1). The g20 comparison uses its own B=20 resamples." in md
    assert "comparison g20 (audit a): its own resamples=20 (B=20, seed=1), not the audit's B=50" in md
    assert "The g comparison uses" not in md  # g has no resamples=: the audit's B


@pytest.fixture(scope="module")
def marks(tmp_path_factory) -> Path:
    """The verbal run with the parse-rate metric declared (a 'vpr' metric column next to VPR)."""
    spec = SPEC.replace("metrics = [accuracy, ece10, brier]", "metrics = [accuracy, ece10, brier, pr]") + \
        "metric pr = vpr()\n"
    tmp = tmp_path_factory.mktemp("marks")
    s, plan, run_dir = build_run(tmp, spec)
    recs = [_nothing_parsed_for_small(r) for r in make_records(s, plan)]
    write_records(run_dir / "records.parquet", recs)
    write_cell_metrics(s, plan, run_dir, recs)
    return build_report(s, plan, run_dir)


def _nothing_parsed_for_small(r):
    if r.protocol == "verbal" and r.model == "small":
        return replace(r, confidence=float("nan"), confidence_parsed=False)
    return r


def test_not_applicable_and_undefined_have_distinct_marks(marks):
    import pandas as pd

    md = _read(marks, "cells.md")
    tok = next(ln for ln in md.splitlines() if ln.startswith("| a/small/arc/plain/tok/fc "))
    verbal = next(ln for ln in md.splitlines() if ln.startswith("| a/small/arc/plain/verbal/fc "))
    cols = [c.strip() for c in md.splitlines()[2].strip("|").split("|")]
    tok_v = dict(zip(cols, [c.strip() for c in tok.strip("|").split("|")]))
    verbal_v = dict(zip(cols, [c.strip() for c in verbal.strip("|").split("|")]))
    assert tok_v["vpr"] == "n/a" and tok_v["excluded"] == "n/a"  # no verbal parse rate for a token cell
    assert verbal_v["vpr"].split(" [")[0] == "0.000" and verbal_v["ece(binning=equal_width, bins=10)"] == "–"  # undefined
    assert "– = undefined: the records give no value" in md and "n/a = not applicable to this cell" in md
    csv = pd.read_csv(marks / "cells.csv", keep_default_na=False).set_index("cell_id")
    assert csv.loc["a/small/arc/plain/tok/fc", "vpr"] == "n/a"
    assert csv.loc["a/small/arc/plain/verbal/fc", "ece(binning=equal_width, bins=10)"] == ""
    html = _read(marks, "report.html")
    assert '<td class="na" data-sort="">n/a</td>' in html and "n/a = not applicable to this cell" in html


def test_vpr_is_one_column_in_every_format(marks):
    tex = _read(marks, "tables/cells_a.tex")
    header = next(ln for ln in tex.splitlines() if ln.startswith("Protocol &"))
    assert header.count("VPR") == 1 and "vpr" not in header  # the parse-rate metric is the VPR column
    row = next(ln for ln in tex.splitlines() if ln.startswith("tok &"))
    assert row.split(" & ")[3] == "n/a"  # Protocol, n, Ans. parse, VPR: as in cells.md
    assert "-- = undefined" in tex and "n/a = not applicable" in tex


LONG = SPEC.replace("variant plain = variant(t_plain)", "variant plain = variant(t_plain)\n"
                    "variant surface_paraphrase = variant(t_plain)\nvariant instruction_reorder = variant(t_plain)") \
    .replace("variants = [plain]", "variants = [surface_paraphrase, instruction_reorder]") \
    .replace("protocol tok = ", "protocol token_normalised = ").replace("protocols = [tok, verbal]",
                                                                       "protocols = [token_normalised, verbal]")


@pytest.fixture(scope="module")
def long_names(tmp_path_factory) -> Path:
    return _report(tmp_path_factory.mktemp("long"), text=LONG)


def test_identifiers_in_latex_open_with_an_opening_quote(long_names):
    tex = _read(long_names, "checklist.tex")
    assert "variant `\\auditid{surface\\_paraphrase}' does not set temperature" in tex
    assert " '\\auditid{" not in tex and "('\\auditid{" not in tex


def test_disclosure_breaks_identifiers_only_at_their_separators(long_names, tmp_path):
    import re
    import shutil
    import subprocess

    from latex_fit import compile_fit

    if not shutil.which("pdflatex") or not shutil.which("pdftotext"):
        pytest.skip("pdflatex / pdftotext not installed")
    tex = _read(long_names, "disclosure.tex")
    assert "\\penalty5000\\hskip0pt" not in tex  # the macro has no break between two letters
    fit = compile_fit(long_names / "disclosure.tex", tmp_path, twocolumn=True)
    assert fit.returncode == 0 and fit.overfull == []
    text = subprocess.run(["pdftotext", str(tmp_path / "doc.pdf"), "-"], capture_output=True, text=True).stdout
    words = set(re.findall(r"[A-Za-z0-9]+", text))
    for name in ("surface_paraphrase", "instruction_reorder", "token_normalised"):
        for part in re.split(r"[._/-]", name):
            assert part in words, (part, text)  # never "paraphra" + "se" on two lines


VARIANTS = SPEC.replace("variant plain = variant(t_plain)", """variant plain = variant(t_plain)
template t_bare = template("{{ question }} The answer is:")
variant bare = variant(t_bare, max_tokens=64)
variant shuffled = variant(t_plain, perturb=[option_shuffle(seed=4)])""").replace(
    "variants = [plain]", "variants = [plain, bare, shuffled]")


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> Path:
    return _report(tmp_path_factory.mktemp("variants"), text=VARIANTS)


def _paragraph(out: Path) -> str:
    return next(ln[2:] for ln in _read(out, "checklist.md").splitlines() if ln.startswith("> Audit "))


def test_methods_name_metrics_and_decoding_in_words(variants):
    text = _paragraph(variants)
    assert ("The metrics are accuracy, expected calibration error (ECE) with 10 equal-width bins and Brier score."
            in text)
    assert "ece(" not in text and "equal_width" not in text
    assert ("Answers are generated with greedy decoding, at most 32 new tokens (max_tokens=32; 64 under variant "
            "bare).") in text
    assert "decoded greedy" not in text
    assert "Answers are scored with the answer's first character as the label (fc)." in text
    assert "a stated confidence, a decimal between 0 and 1, about" in text and "decimal_01" not in text


def test_methods_describe_what_each_variant_does(variants):
    text = _paragraph(variants)
    assert ("Prompt variants: plain gives the item after the instruction \u201cAnswer the following multiple-choice "
            "question.\u201d and ends with \u201cAnswer:\u201d; bare gives the item with no instruction before it and "
            "ends with \u201cThe answer is:\u201d and allows answers of up to 64 tokens; shuffled applies the "
            "perturbation \u201cshuffle the options so that the gold option always moves\u201d (seed 4) to the "
            "template t_plain.") in text
    tex = " ".join(_read(variants, "methods.tex").split())
    assert "``Answer the following multiple-choice question.''" in tex


def test_prefilled_answer_is_described_per_prompt_form(tmp_path):
    spec = SPEC.replace("protocols = [tok, verbal]", "protocols = [tok, vpre]") + """
template pre = template("Guess: {{ proposed_answer }}\\nProbability:")
protocol vpre = verbalized(scale=decimal_01, phrasing=conf_07, prefill=pre, provenance=gold, max_tokens=8)
"""
    md = _read(_report(tmp_path, text=spec), "checklist.md")
    assert ("asked with the prompt conf_07 answered by the prefill pre, which holds the answer, so that the model "
            "writes only the value (the prefill as the open assistant turn of the chat template for org/small-1b; "
            "prompt and prefill concatenated as plain text for org/mid-3b)") in md
    assert "prefilled in the assistant's answer slot" not in md
    assert ("small: the prompt conf_07 answered by the prefill pre, which holds the answer; the model writes only the "
            "value (chat template: the prefill is the open assistant turn)") in md
    assert "mid: the prompt conf_07 answered by the prefill pre" in md and "concatenated as plain text)" in md


def test_a_variant_whose_template_includes_another_is_described_by_the_included_text(tmp_path):
    """Study 000's classification templates are one ``{% include %}`` of the reasoning template:
    the methods quote the included instruction, never "with no instruction before it"."""
    spec = SPEC.replace('template t_plain = template("Answer the following multiple-choice question. {{ question }} Answer:")',
                        'template t_plain = template(file="stdlib:s000/classification/instruction_reorder")')
    text = _paragraph(_report(tmp_path, text=spec))
    assert ("Prompt variant: plain gives the item after the instruction \u201cChoose the correct answer:\u201d and ends "
            "with \u201cCorrect answer letter:\u201d.") in text
    assert "no instruction before it" not in text
