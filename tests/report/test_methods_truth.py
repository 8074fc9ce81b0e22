"""The methods paragraph, checklist and disclosure say only what was run (issue 23, "Sentences that
are not true"). Each test recompiles the report fixture's spec with one thing changed and reads the
sentences built from the same run directory; every sentence names the run-directory fields it
states, and those fields exist."""

from __future__ import annotations

import json

import pytest
from report_fixtures import DATA, SPEC

from auditlang.report.checklist import build_checklist
from auditlang.report.disclosure import disclosure_tables
from auditlang.report.methods import methods_sentences, to_latex_fragment
from auditlang.report.rundata import load_run
from auditlang.resolve import compile_spec


def run_with(run, tmp_path, old: str, new: str, keep_compare: str | None = None, more: tuple = ()):
    """RunData of the fixture's run directory under the fixture spec with ``old`` replaced by ``new``
    (and the ``(old, new)`` pairs of ``more``; with ``keep_compare``, only the compare statements of
    that constructor)."""
    from auditlang.plan.planner import build_plan

    text = SPEC.replace("DATA", str(DATA))
    for o, n in ((old, new), *more):
        assert o in text, o
        text = text.replace(o, n)
    if keep_compare:
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("compare ") or keep_compare in ln)
    path = tmp_path / "variant.audit"
    path.write_text(text, encoding="utf-8")
    spec = compile_spec(path)
    return load_run(spec, build_plan(spec, str(DATA)), run.run_dir)


def paragraph(rd) -> str:
    return " ".join(s.text for s in methods_sentences(rd))


def test_no_vpr_exclusion_sentence_without_a_threshold(run, tmp_path):
    rd = run_with(run, tmp_path, "  vpr_threshold = 0.8\n", "")
    text = paragraph(rd)
    assert "below 0.00" not in text and "are excluded" not in text
    assert "No verbal-confidence cell is excluded for its parse rate (no inclusion threshold is declared)." in text
    assert "below 0.80 are excluded" in paragraph(load_run(run.spec, run.plan, run.run_dir))


def test_rows_read_in_file_order_are_not_called_random(run, tmp_path):
    rd = run_with(run, tmp_path, 'dataset obqa = jsonl("openbookqa.jsonl", task=multiple_choice, sample=30)',
                  'dataset obqa = jsonl("openbookqa.jsonl", task=multiple_choice)')
    text = paragraph(rd)
    n = rd.plan.datasets["obqa"]["n_items"]
    assert f"obqa: all {n} rows in file order" in text
    assert "arc: 40 of 1172 rows drawn at random with seed 42" in text
    assert "Items are drawn at random" not in text


def test_macro_bootstrap_is_described_as_intervals_over_settings(run, tmp_path):
    rd = run_with(run, tmp_path, "bootstrap = bootstrap(resamples=200, seed=42)",
                  "bootstrap = bootstrap(resamples=200, seed=42, unit=macro)", keep_compare="protocol_grid")
    text = paragraph(rd)
    assert "percentile-bootstrap intervals over settings" in text
    assert "over items" not in text.split("Audit probes")[0]


def test_label_forms_are_told_apart_everywhere(run, tmp_path):
    rd = run_with(run, tmp_path, "protocol tok_raw = tok_norm with (normalise=raw)",
                  "protocol tok_raw = tok_norm with (label_form=space, window=full)\n"
                  "protocol tok_rawb = tok_norm with (label_form=bare, window=full)")
    text = paragraph(rd)
    assert 'label tokens with a leading space (" A")' in text
    md = build_checklist(rd, []).to_markdown()
    assert "label_form=space" in md and "label_form=auto" in md
    disc = "\n".join(t.to_markdown() for t in disclosure_tables(rd))
    assert "Label token form" in disc and "label_form=space" in disc


def test_models_by_id_and_revision_protocols_by_what_they_do(run):
    rd = load_run(run.spec, run.plan, run.run_dir)
    first = methods_sentences(rd)[0].text
    assert "org/small-1b at revision rev-small" in first and "org/big-7b (no revision recorded)" in first
    protocols = next(s.text for s in methods_sentences(rd) if s.text.startswith("Confidence is measured as"))
    assert "tok_norm" not in protocols and "token_prob" not in protocols
    assert "normalised over the valid labels" in protocols and "unnormalised" in protocols
    assert "teacher-forced after a verbal-confidence prefix" in protocols


def test_every_sentence_names_run_directory_fields_that_exist(run):
    rd = load_run(run.spec, run.plan, run.run_dir)
    plan = json.loads((run.run_dir / "plan.json").read_text())
    info = json.loads((run.run_dir / "run.json").read_text())
    for s in methods_sentences(rd):
        assert s.fields, s.text
        for f in s.fields:
            where, path = f.split(":", 1)
            if where == "plan.json":
                assert path.split(".")[1] in plan["datasets"], f
            elif where == "run.json":
                assert path.split(".")[0] in ("fingerprints", "data"), f
                if path.startswith("fingerprints."):  # a model the journal has no fingerprint for says so
                    mid = path.split(".")[1]
                    assert mid in info["fingerprints"] or "no revision recorded" in s.text, f
            elif where == "spec":
                assert path.split(".")[0] in rd.spec.objects, f
            else:
                assert (run.run_dir / where).exists(), f


def test_methods_tex_is_plain_prose_with_identifier_macros(run):
    tex = (run.report / "methods.tex").read_text(encoding="utf-8")
    body = tex.split("\\makeatother", 1)[1]  # after the \auditid definition: plain prose
    assert "\\penalty" not in body and "\\hskip" not in body
    assert body.count("\\allowbreak") < 12
    assert "\\auditid{" in body or "auditid" in to_latex_fragment(methods_sentences(load_run(run.spec, run.plan, run.run_dir)))


@pytest.mark.parametrize("name", ["checklist.tex", "disclosure.tex", "methods.tex"])
def test_identifiers_use_the_macro(run, name):
    tex = (run.report / name).read_text(encoding="utf-8")
    assert "\\DeclareRobustCommand\\auditid" in tex
    assert "\\penalty100" not in tex.split("\\makeatother", 1)[1]


def test_no_answer_form_difference_between_self_and_supplied_answers(run, tmp_path):
    rd = run_with(run, tmp_path, "protocols = [tok_norm, tok_raw, verbal, tok_bare, tok_prefix]",
                  "protocols = [tok_norm, tok_raw, vself, vpw, tok_bare, tok_prefix]\n}\n"
                  "protocol vself = verbal with (answer_form=extracted)\n"
                  "protocol vpw = verbal with (provenance=plausible_wrong, wrong_from=[mid])\naudit unused {\n"
                  "  models = [small]\n  datasets = [arc]\n  variants = [plain]\n  protocols = [tok_norm]",
                  keep_compare="no compare")
    table = next(t for t in disclosure_tables(rd) if "main" in t.title or "main" in t.name)
    rows = [r for r in table.records() if "vpw" in str(r) and "vself" in str(r) and r["Axis"] != "Confidence signal"]
    assert rows, table.to_markdown()
    for r in rows:
        axis = str(list(r.values())[0])
        assert "Answer shown" not in axis and "answer_form" not in axis and "wrong answers" not in axis, r
        assert axis.startswith("Verb. answer provenance"), r


def test_one_shot_by_index_has_no_seed_flag(run, tmp_path):
    rd = run_with(run, tmp_path, "variant typod = variant(t_plain, perturb=[typo()])",
                  "variant typod = variant(t_plain, perturb=[one_shot(index=1)])")
    md = build_checklist(rd, []).to_markdown()
    assert "(one_shot) makes no random choice with index=1 (declared by the perturbation), so no seed" in md
    assert not [ln for ln in md.splitlines() if "UNSPECIFIED" in ln and "one_shot" in ln]


def test_evaluators_differing_only_in_label_form_are_told_apart(run, tmp_path):
    rd = run_with(run, tmp_path, "evaluators = [fc, rx]", "evaluators = [fc, rx, ll_space, ll_bare]",
                  more=[("evaluator rx = regex_reparse(tail=150)",
                         "evaluator rx = regex_reparse(tail=150)\nevaluator ll_space = loglik_argmax(label_form=space)\n"
                         "evaluator ll_bare = loglik_argmax(label_form=bare)")], keep_compare="no compare")
    text = paragraph(rd)
    # the evaluator in words, its spec name and label form in parentheses (s10: no spec syntax as prose)
    assert 'the label of highest log-likelihood (ll_space, label tokens with a leading space (" A"))' in text
    assert 'the label of highest log-likelihood (ll_bare, label tokens without a leading space ("A"))' in text
    disc = "\n".join(t.to_markdown() for t in disclosure_tables(rd))
    assert "ll_space (label_form=space); ll_bare (label_form=bare)" in disc



def test_a_single_metric_is_named_in_the_singular(run, tmp_path):
    """s000's repair audit declares metrics = [accuracy]: the paragraph said "The metrics are
    accuracy." (session 20, examples/reports/s000/methods.tex)."""
    rd = run_with(run, tmp_path, "metrics = [accuracy, ece10, brier, auroc]", "metrics = [accuracy]")
    text = paragraph(rd)
    assert "The metric is accuracy." in text and "The metrics are accuracy." not in text
    assert "The metrics are accuracy, " in paragraph(load_run(run.spec, run.plan, run.run_dir))


def test_decision_only_probes_are_named_as_abstention_not_confidence(run):
    """NOTA, MoreInfo and SelfRef give a decision and no confidence: the methods paragraph says so
    in their own declared words (a noun phrase, not their DOC's imperative), and leads the probes
    audit's protocol sentence with abstention; an audit of confidences keeps its lead."""
    rd = load_run(run.spec, run.plan, run.run_dir)
    texts = [s.text for s in methods_sentences(rd)]
    probes = next(t for t in texts if t.startswith("Confidence and abstention are measured as"))
    assert ("(1) an abstention decision, not a confidence: the options gain a last option 'None of the above', "
            "and choosing it means abstain (nota)") in probes
    assert "the model is asked whether it needs more information, and Yes means abstain (more_info)" in probes
    assert "the model is asked whether that answer is true or false, and False means abstain (self_ref)" in probes
    assert "add a 'none of the above'" not in probes
    assert sum(t.startswith("Confidence is measured as (1) the first-token probability") for t in texts) == 1


def test_methods_state_what_each_built_in_comparisons_intervals_resample(run, tmp_path):
    """A contrast resamples the items both cells scored; a VPR matrix with intervals=false has none
    (it once read 'declares no resampling unit', the sentence for a plugin that declares nothing)."""
    rd = run_with(run, tmp_path, "compare cons = consistency(probes, probes=[nota, moreinfo, selfref])",
                  "compare cons = consistency(probes, probes=[nota, moreinfo, selfref])\n"
                  "compare ctr = contrast(main, models=[small, big], metrics=[accuracy])\n"
                  "compare vm = vpr_matrix(main, protocols=[verbal], intervals=false)")
    text = paragraph(rd)
    assert "declares no resampling unit" not in text and "declare no resampling unit" not in text
    assert ("The ctr comparison resamples the items both cells scored, the same resample on both sides "
            "(the paired bootstrap of auditc diff).") in text
    assert "vm" in next(s for s in text.split(". ") if "have no intervals" in s or "has no intervals" in s)
