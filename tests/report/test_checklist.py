"""The reporting checklist names every item, flags what the spec left unspecified, lists excluded cells."""

from __future__ import annotations

import re

import pytest

from auditlang.resolve.templates import compile_obj
from auditlang.report.checklist import ITEMS
from auditlang.report.latex import unmark, escape


@pytest.fixture(scope="module")
def md(run) -> str:
    return (run.report / "checklist.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tex(run) -> str:
    return unmark((run.report / "checklist.tex").read_text(encoding="utf-8"))


def test_every_item_in_every_group(md, tex):
    for title in ITEMS.values():
        assert f"### {title}" in md, title
        assert escape(title) in tex, title
    # C1-C4 and normalisation once per protocol group: 5 protocols of main + 3 probes
    for key in ("C1", "C2", "C3", "C4", "norm"):
        assert md.count(f"### {ITEMS[key]}\n") == 8, key
    assert md.count("## Audit main, cells of protocol") == 5


def test_unspecified_flags(md):
    flags = [ln for ln in md.splitlines() if "UNSPECIFIED" in ln]
    text = "\n".join(flags)
    assert "the audit names no evaluator; first_char was used by default" in text  # audit probes, evaluator <default>
    assert "model 'mid' has no revision" in text and "model 'big' has no revision" in text
    assert "model 'small' has no revision" not in text and "model 'small' does not set revision" not in text
    assert "model 'big' does not set dtype" in text
    assert "dataset 'obqa' does not set seed" in text
    assert "perturbation 'typod.perturb[0]' sets no seed" in text
    assert "audit 'probes' declares no bootstrap" in text
    assert "protocol 'verbal' does not set answer_form" in text
    assert "protocol 'tok_bare' does not set normalise" not in text  # not applicable to a T1 readout
    # explicitly set parameters are never flagged
    assert "protocol 'tok_norm' does not set normalise" not in text
    assert "dataset 'arc' does not set seed" not in text


def test_single_phrasing_warning_and_excluded_cells(md):
    assert "WARNING: audit 'main' elicits verbal confidence with one phrasing only" in md
    assert re.search(r"\| mid / mmlu / reorder / verbal / fc \| 0\.\d+ \| excluded \|", md)  # the per-cell table
    assert "2 of 48 cells excluded: mid / mmlu / reorder / verbal / fc" in md
    assert "Inclusion threshold: VPR >= 0.80 (audit vpr_threshold" in md
    assert re.search(r"\| small / arc / plain / verbal / fc \| 0\.\d+ \| included \|", md)


def test_templates_hashes_indices_and_engines(run, md):
    for tid in ("t_plain", "t_reorder", "t_cot", "t_framing", "conf_dec"):
        ct = compile_obj(run.spec, run.spec.get(tid))
        assert f"template {tid} (hash {ct.hash})" in md
        assert ct.source in md
    idx = run.plan.datasets["arc"]["indices"]
    assert f"dataset arc sample indices: {', '.join(map(str, idx))}" in md
    assert "random.Random(7).sample" in md  # mmlu's own seed
    assert "ran on engine 'hf' (transformers 5.19.0, torch 2.13.0), dtype 'bfloat16', revision 'rev-small'" in md
    assert "model big: declared hf('org/big-7b', dtype=auto); not computable: no engine fingerprint" in md
    # run files relative to the run directory (issue 11: no absolute path in a report)
    assert ": records.parquet (" in md and ": journal.sqlite (" in md and str(run.run_dir) not in md


def test_evaluator_rules_and_protocol_axes(md):
    assert "evaluator fc (first_char) on multiple_choice datasets: First-character evaluator (study 000, A.3)" in md
    assert "evaluator rx (regex_reparse) on multiple_choice datasets: Regex re-parse (study 000, C.1)" in md
    assert "context=verbal_prefix; prefix template (the variant prompt), answer slot Guess:" in md
    assert "T1 = exp(mean log p(a_i | h, a_<i))" in md
    assert "normalise=label_set (p_norm = P(l*) / sum over valid labels in the window), window=top_k, top_k=200" in md
    assert re.search(r"top-k label coverage: mean example-level coverage 0\.925 over 24 cells; 12 cells with full coverage", md)


def test_accuracy_gap_uses_aligned_comparison(md):
    assert re.search(r"arc: accuracy \(mean over variants, evaluator fc\) small 0\.\d+, mid 0\.\d+, big 0\.\d+; largest gap", md)
    m = re.search(r"comparison al, ECE: accuracy-controlled views agree with raw in (\d+) of (\d+) cases with every "
                  r"view computed \(160 cases in all\)", md)
    assert m and int(m.group(1)) <= int(m.group(2)) <= 160


def test_aligned_names_da_default_and_never_counts_a_missing_view_as_agreeing(md):
    # 003 §6 "Practical Recommendations": "We recommend using DA as the default reporting metric"
    assert "default view: DA (study 003 §6 recommends Distribution-Aligned as the default reporting view" in md
    # the fixture's records carry no cross-stage candidates: CA is not computable in any case, so
    # no case may be reported as "every view agrees with raw"
    assert "no case has every requested view computed, so agreement with raw (ECE) is not assessed" in md
    assert re.search(r"160 of 160 cases miss a view that could not be computed \(not counted as agreeing\)", md)
    assert "cases miss an accuracy-controlled view that could not be computed" in md


def test_evaluator_rule_reflects_spec_parameters(md):
    # the spec's tail=150 reaches the scorer, and describe() states it
    assert "does not take" not in md
    assert "the last standalone upper-case valid letter in the final 150 characters" in md
    assert "upper case only" in md  # regex_reparse case_sensitive=true (the default) is disclosed


def test_checklist_opens_with_a_summary_of_every_flag(run, md):
    """Issue 25 item 2: counts, then every UNSPECIFIED / WARNING item, before the first group; the
    per-cell VPR detail is one table, not a bullet per cell."""
    head, rest = md.split("\n## Run\n", 1)
    assert "## Summary" in head
    flags = [ln for ln in rest.splitlines() if ln.startswith("- **UNSPECIFIED") or ln.startswith("- **WARNING")]
    assert flags
    for ln in flags:  # "- **UNSPECIFIED: text**" is listed under **UNSPECIFIED** as "- Group > Item: text"
        kind, text = ln[4:-2].split(": ", 1)
        section = head.split(f"**{kind}**", 1)[1].split("\n\n**", 1)[0]
        assert text in section, ln
    n_u = sum("UNSPECIFIED" in ln for ln in flags)
    n_w = sum("WARNING" in ln for ln in flags)
    assert f"{n_u} UNSPECIFIED" in head and f"{n_w} WARNING" in head
    assert not [ln for ln in md.splitlines() if ln.startswith("- VPR ")]
    assert "| cell: model / dataset / variant / protocol / evaluator | VPR | status |" in md
    tex = (run.report / "checklist.tex").read_text(encoding="utf-8")
    assert tex.index("\\section*{Summary}") < tex.index("\\section*{Run}")
    assert "\\begin{tabularx}{\\linewidth}" in tex
