"""The five study specs compile, plan, and have the cell counts their papers state.

Full plans with data take 10-90 s of CPU each on the 2-core CI machine (benchmarks/README.md,
"## Plan"), so counts are checked on plans from declared sample sizes (``load_data=False``) and
each study additionally plans one audit (or one model of it) with the real data.
"""

from __future__ import annotations

import itertools

from collections import Counter, defaultdict
from pathlib import Path

import pytest
from spec_helpers import SPECS, compiled, declared_plan, only_audit

from auditlang.plan.planner import build_plan


def triples(plan, audit: str) -> Counter:
    """(model, dataset, variant) -> number of cells of ``audit``."""
    return Counter((c.model, c.dataset, c.variant) for c in plan.cells if c.audit == audit)


@pytest.mark.parametrize("study", sorted(SPECS))
def test_spec_compiles_and_plans_from_declared_sizes(study: str) -> None:
    spec = compiled(SPECS[study])
    plan = declared_plan(SPECS[study])
    assert plan.cells, f"{study}: no cells"
    assert plan.estimated  # no data read: every count comes from declared sizes
    assert {c.audit for c in plan.cells} == set(spec.of_kind("audit"))
    assert plan.naive_request_count >= len(plan.cells)
    # every cell id names its five axes
    assert all(c.id.count("/") == 5 for c in plan.cells)


@pytest.mark.parametrize("study", sorted(SPECS))
def test_spec_models_name_paper_checkpoints(study: str) -> None:
    """Models are hub ids with a size in billions; base models run without a chat template."""
    spec = compiled(SPECS[study])
    for mid, m in spec.of_kind("model").items():
        v = m.value
        assert m.ctor in ("vllm", "hf", "openai"), f"{study}: model {mid} uses {m.ctor}"
        if m.ctor != "openai":
            assert "/" in v.path, f"{study}: model {mid} path {v.path!r} is not a hub id"
            assert v.size is not None and v.size > 0.5, f"{study}: model {mid} has no size"
            assert v.dtype in ("bf16", "bfloat16"), f"{study}: model {mid} dtype {v.dtype}"
        if v.instruct is False:
            assert v.chat is False, f"{study}: base model {mid} must have chat=off"


# Datasets read from the local copies only, each for a reason its spec states (LANGUAGE GAP).
LOCAL_ONLY = {"s000": {"mnli"}, "s002": {"popqa", "popqa_dev"}}


@pytest.mark.parametrize("study", sorted(SPECS))
def test_spec_datasets_name_hub_ids_with_local_fallbacks(study: str, shared_data: Path) -> None:
    """Every dataset with a local copy names the Hub split the paper used, with that copy (a file
    of ../shared/data) as its fallback; the rest are local only for a stated reason."""
    spec = compiled(SPECS[study])
    text = SPECS[study].read_text(encoding="utf-8")
    fallbacks = set()
    for did, d in spec.of_kind("dataset").items():
        if d.ctor == "hub" and d.value.fallback:
            fb = spec.get(d.value.fallback)
            fallbacks.add(fb.id)
            assert fb.ctor == "jsonl" and (shared_data / fb.value.path).is_file(), f"{study}: {did}"
            assert "/" in d.value.id_ and fb.value.task == d.value.task
    for did, d in spec.of_kind("dataset").items():
        if d.ctor == "jsonl" and did not in fallbacks:
            assert did in LOCAL_ONLY.get(study, set()), f"{study}: dataset {did} names no Hub id"
    assert fallbacks, f"{study}: no Hub dataset with a fallback"
    for did in LOCAL_ONLY.get(study, set()):
        assert spec.get(did).ctor == "jsonl"
    assert text.count("LANGUAGE GAP") >= (1 if study in LOCAL_ONLY else 0)


# ----------------------------------------------------------------------------- study 000


def test_s000_primary_panel_is_125_cells_of_500() -> None:
    # §4.1 / App. C.2: "Across the 125 cells in the primary panel (5 instruct models x 5 datasets
    # x 5 variants)"; §3: "For each (model, dataset, prompt variant) cell, we evaluate 500 examples."
    plan = declared_plan(SPECS["s000"])
    t = triples(plan, "primary")
    assert len(t) == 125
    assert {c.n_items for c in plan.cells if c.audit == "primary"} == {500}
    # Table 4: "n=25 cells per variant"; Table 5: "out of 25 per dataset".
    assert set(Counter(v for _, _, v in t).values()) == {25}
    assert set(Counter(d for _, d, _ in t).values()) == {25}
    # both token definitions (raw, label-set normalised) and both phrasings on every triple
    protos = {c.protocol for c in plan.cells if c.audit == "primary"}
    assert protos == {"s000.token_norm", "s000.token_raw", "s000.verbal_decimal", "s000.verbal_percent"}
    assert set(t.values()) == {4}


def test_s000_full_corpus_and_finding3_panel() -> None:
    plan = declared_plan(SPECS["s000"])
    # Table 10: "n=10 instruct models per row" -> 10 x 5 x 5 = 250 cells, 50 spreads.
    t = triples(plan, "instruct10")
    assert len(t) == 250
    assert len({(m, d) for m, d, _ in t}) == 50
    # App. A.1: 15 models in all (5 primary + 5 supplementary instruct + 5 base).
    models = {c.model for c in plan.cells}
    assert len(models) == 15
    spec = compiled(SPECS["s000"])
    assert sum(1 for m in models if spec.get(m).value.chat is False) == 5
    # all 15 x 5 x 5 = 375 (model, dataset, variant) triples appear somewhere
    assert len({(c.model, c.dataset, c.variant) for c in plan.cells}) == 375


def test_s000_repair_audit_with_data(plan_with_data) -> None:
    # §4.1 Table 1: first-char vs regex re-parse vs constrained re-prompt on ARC-Challenge.
    spec = only_audit(compiled(SPECS["s000"]), "repair")
    plan = plan_with_data(spec)
    assert not plan.estimated
    assert len(plan.cells) == 5 * 1 * 3  # the format_change cells only (Table 1)
    assert {c.n_items for c in plan.cells} == {500}
    # App. A.2: one random.Random(42) index list per dataset, reused by every cell
    assert len({c.hash for c in plan.cells}) == len(plan.cells)
    assert len(plan.datasets["arc"]["indices"]) == 500
    # the constrained re-prompt is a stage-2 call per (model, item) of ARC format_change: 2,500,
    # not 12,500 on all five variants (issue 23)
    constrained = [d for d in plan.deferred if d["kind"] == "constrained_choice"]
    assert sum(d["count"] for d in constrained) == 5 * 500


def test_s000_comparisons_follow_tables_1_and_2() -> None:
    spec = compiled(SPECS["s000"])
    four = ["s000.surface_paraphrase", "s000.instruction_reorder", "s000.fewshot_3", "s000.implicit_framing"]
    # Table 1: gap recovery against the mean of the four non-format_change variants
    # (94.0 % = (0.712 - 0.098) / (0.751 - 0.098) for Llama-3.2-3B)
    rep = spec.get("arc_repair").value
    assert rep.references() == four and rep.reference_variant is None and rep.variant == "s000.format_change"
    # the reference is read from the primary panel (the same generations); the repairs run on
    # format_change only
    assert rep.reference_audit == "primary" and spec.get("repair").value.variants == ["s000.format_change"]
    assert all(v in spec.get("primary").value.variants for v in four)
    # Table 2: MMLU-Pro only, means over the valid variants (Table 6: surface_paraphrase,
    # instruction_reorder, implicit_framing) with VPR >= 0.80 (the audit's threshold): n = 2-3
    valid = ["s000.surface_paraphrase", "s000.instruction_reorder", "s000.implicit_framing"]
    gap = spec.get("verbal_gap").value
    assert gap.datasets == ["mmlu_pro"] and gap.verbal == "s000.verbal_decimal" and gap.variants == valid
    assert spec.get("verbal_gap_pct").value.datasets == ["mmlu_pro"] and spec.get("verbal_gap_pct").value.variants == valid
    assert spec.get(gap.audit).value.vpr_threshold == 0.8
    assert sorted(spec.get("verbal_gap_easier").value.datasets) == ["ag_news", "arc", "mnli", "sst2"]
    # §3 / Table 3: spread over the four non-format_change variants (the primary panel too)
    assert spec.get("spread4").value.variants == four and spec.get("spread4_primary").value.variants == four
    assert spec.get("spread4_primary").value.audit == "primary"
    # C.1 Path 1: the Qwen example ("matches an early repeated letter") implies the first occurrence
    assert spec.get("s000.regex_reparse").value.occurrence == "first"
    # App. B.1: classification format_change changes only the output-format instruction (no CoT)
    fc = spec.get("s000.format_change").value
    assert fc.classification != fc.multiple_choice


def test_s000_classification_format_change_changes_only_the_format_instruction() -> None:
    # App. B.1: "For classification and QA the format_change variant modifies the output-format
    # instruction; for reasoning it appends a chain-of-thought instruction."
    from auditlang.prompts import build_context, compile_stdlib_template

    item = {"id": "x", "question": "a gorgeous film", "choices": ["negative", "positive"], "answer_index": 1}
    ctx = build_context(item)
    base = compile_stdlib_template("s000/classification/surface_paraphrase").render(ctx)
    fc = compile_stdlib_template("s000/classification/format_change").render(ctx)
    instruction = "Answer with only the letter of the correct option."
    assert instruction in base and instruction not in fc
    assert fc.replace("Give the letter of the correct option in parentheses, for example (A).", instruction) == base
    assert "step by step" not in fc.lower()


# ----------------------------------------------------------------------------- study 001


def test_s001_main_grid_is_24_settings() -> None:
    # §3.2, Table 4: "identity axes regroup g_A over 24 settings" = 3 families x {base, Instruct}
    # x 4 datasets; Fig. 1: "9/12 Instruct" -> 12 Instruct + 12 base.
    spec = compiled(SPECS["s001"])
    plan = declared_plan(SPECS["s001"])
    settings = {(c.model, c.dataset) for c in plan.cells if c.audit == "main"}
    assert len(settings) == 24
    base = {(m, d) for m, d in settings if spec.get(m).value.chat is False}
    assert len(base) == 12
    # x 4 configurations (A-D) = 96 gaps: two token contexts x two estimators in the grid compare
    grid = spec.get("grid").value
    assert len(grid.configs) * len(grid.estimators) == 4
    assert len(settings) * len(grid.configs) * len(grid.estimators) == 96


def test_s001_supplied_answer_diagnostic_is_12_cells_n_11916() -> None:
    # §3.3, Table 6: "(3 Instruct models x 4 datasets, n=11,916)" = 3 x (1000 + 1000 + 817 + 1155)
    plan = declared_plan(SPECS["s001"])
    seven = {"llama3_8b_it", "mistral_7b_it", "qwen25_7b_it"}
    cells = [c for c in plan.cells if c.audit == "supplied" and c.protocol == "s001.verbal_gold" and c.model in seven]
    assert len(cells) == 12
    assert sum(c.n_items for c in cells) == 11916
    # App. H Table 15: Qwen2.5-14B-Instruct's supplied-answer results on the same four datasets
    q14 = [c for c in plan.cells if c.audit == "supplied" and c.model == "qwen25_14b_it"]
    assert {c.dataset for c in q14} == {"triviaqa", "sciq", "truthfulqa", "mmlu4"}
    assert {c.protocol for c in q14} == {"s001.verbal_self", "s001.verbal_gold", "verbal_plausible_wrong",
                                         "s001.verbal_off_type"}
    # Tables 6, 13-15: the supplied-answer means and paired contrasts (incl. Table 15's "diff. pref.")
    spec = compiled(SPECS["s001"])
    prov = spec.get("supplied_contrasts")
    assert prov.ctor == "provenance" and prov.value.audit == "supplied"
    assert (prov.value.own, prov.value.gold, prov.value.plausible, prov.value.off_type) == (
        "s001.verbal_self", "s001.verbal_gold", "verbal_plausible_wrong", "s001.verbal_off_type")
    assert {c.protocol for c in plan.cells if c.audit == "supplied"} == {
        "s001.verbal_self", "s001.verbal_gold", "verbal_plausible_wrong", "s001.verbal_off_type"}
    # §3.3: plausible-wrong answers are another model's wrong guesses: built in the cross stage,
    # one request per (model, item)
    spec = compiled(SPECS["s001"])
    assert spec.get("verbal_plausible_wrong").value.wrong_from == ["llama3_8b_it", "mistral_7b_it", "qwen25_7b_it"]
    cross = [d for d in plan.deferred if d["source"] == "cross:verbal_plausible_wrong"]
    assert sum(d["count"] for d in cross) == 11916 + 3972  # + Qwen2.5-14B (Table 15)
    # App. I, Table 16: the integer-scale check has n = 12 Instruct cells
    assert len({(c.model, c.dataset) for c in plan.cells if c.audit == "int_scale"}) == 12


def test_s001_appendix_diagnostics_use_200_resamples() -> None:
    # §3.2: "B=1000 resamples ... Appendix diagnostic tables use B=200 resamples" (Table 9: "B=200")
    spec = compiled(SPECS["s001"])
    appendix = {"grid_t2", "bin_sweep", "multi_metric", "readout_larger", "scored_larger", "grid_72b", "scored_72b",
                "grid_int"}
    grids = {cid: o.value for cid, o in spec.of_kind("compare").items() if o.ctor == "protocol_grid"}
    assert appendix <= set(grids)
    for cid, g in grids.items():
        if cid in appendix:
            assert g.resamples == 200, cid
        else:  # main text (Tables 2, 3, 5): the audit's B = 1000
            boot = spec.get(spec.get(g.audit).value.bootstrap).value
            assert g.resamples is None and boot.resamples == 1000, cid


def test_s001_larger_model_checks() -> None:
    # App. J, K, N: 14B, 32B and 72B Instruct on the same four datasets; the 72B check uses
    # 250-item subsets of TriviaQA, SciQ, TruthfulQA and the full MMLU set (Table 23: n = 1,155).
    spec = compiled(SPECS["s001"])
    plan = declared_plan(SPECS["s001"])
    assert {c.model for c in plan.cells if c.audit == "larger"} == {"qwen25_14b_it", "qwen25_32b_it"}
    q72 = {c.dataset: c.n_items for c in plan.cells if c.audit == "q72"}
    assert q72 == {"triviaqa_250": 250, "sciq_250": 250, "truthfulqa_250": 250, "mmlu4": 1155}
    # App. J / K: the token-readout axis g(T1) - g(T2) for 14B and 32B
    ro = spec.get("readout_larger").value
    assert ro.audit == "larger" and ro.configs == ["s001.tok_bare", "s001.tok_bare_t2"]
    assert spec.get("s001.tok_bare_t2").value.readout == "T2" and spec.get("s001.tok_bare").value.readout == "T1"
    # Table 23: g_A, g_B and g_C (bin-free estimator) for 72B
    g72 = spec.get("grid_72b").value
    assert g72.configs == ["s001.tok_bare", "s001.tok_prefix"]
    assert [spec.metrics[m].name for m in g72.estimators] == ["ece", "binfree_ece"]
    # Table 20: generated vs gold for 14B, 32B and 72B
    assert spec.get("scored_larger").value.configs == spec.get("scored_72b").value.configs == [
        "s001.tok_bare", "s001.tok_bare_gold"]


def test_s001_mmlu_subjects_are_per_subject_counts() -> None:
    # App. M: "high-school physics 151, philosophy 311, high-school government and politics 193,
    # miscellaneous 500; 1,155 total), not a uniform 500 per subject"
    spec = compiled(SPECS["s001"])
    v = spec.get("mmlu4").value
    counts = dict(zip(v.filter_in, v.sample_per))
    assert counts == {"high_school_physics": 151, "philosophy": 311, "high_school_government_and_politics": 193,
                      "miscellaneous": 500}
    assert sum(counts.values()) == 1155


def test_s001_q72_with_data_uses_local_subsets(plan_with_data) -> None:
    plan = plan_with_data(only_audit(compiled(SPECS["s001"]), "q72"))
    assert not plan.estimated
    n = {c.dataset: c.n_items for c in plan.cells}
    # MMLU's four subjects have 18 + 46 + 27 + 119 = 210 rows locally (App. M Table 21: 1,155)
    assert n == {"triviaqa_250": 250, "sciq_250": 250, "truthfulqa_250": 250, "mmlu4": 210}
    assert plan.datasets["mmlu4"]["n_items"] == 210
    # the stratified draw takes each subject's rows (all of them here, fewer than the caps)
    subjects = Counter(ctx.item["subject"] for k, u in plan.units.items() if k[2] == "mmlu4" for ctx in u.contexts)
    assert subjects == {"high_school_physics": 18, "philosophy": 46, "high_school_government_and_politics": 27,
                        "miscellaneous": 119}


# ----------------------------------------------------------------------------- study 002

S002_FAMILY = {"s002.prob": "Prob", "s002.prob_gen": "Prob", "s002.ps": "PS", "s002.ps_gen": "PS",
               "s002.p_true": "P(True)", "s002.calib1": "Calib1", "s002.random_bl": "BL"}


def test_s002_method_cells() -> None:
    # §1 / §5: nine LLMs x four datasets x five CE methods (Prob., PS, VC, P(True), Calib1) = 180
    # method-cells, plus the random baseline BL (36 more; Table 6 reports BL for all nine models)
    plan = declared_plan(SPECS["s002"])
    method_cells = set()
    for c in plan.cells:
        if c.audit in ("answer_prompts", "gpt4o_answer_prompts", "vc"):
            method_cells.add((c.model, c.dataset, S002_FAMILY.get(c.protocol, "VC")))
    assert len({m for m, _, _ in method_cells}) == 9
    assert len({d for _, d, _ in method_cells}) == 4
    assert len({x for x in method_cells if x[2] != "BL"}) == 9 * 4 * 5 == 180
    assert len({x for x in method_cells if x[2] == "BL"}) == 36
    # GPT-4o: all five methods; Prob./PS from the generated output (App. A.3: no input logits)
    assert {f for m, _, f in method_cells if m == "gpt4o"} == {"Prob", "PS", "VC", "P(True)", "Calib1", "BL"}
    spec = compiled(SPECS["s002"])
    assert spec.get("s002.prob_gen").value.source == "generation"
    assert spec.get("s002.ps_gen").value.base == "s002.prob_gen"
    assert spec.get("s002.calib1").ctor == "aux_classifier" and spec.get("s002.random_bl").ctor == "random_baseline"


def test_s002_train_split_is_2000_items() -> None:
    # §5 "Datasets": "2,000 randomly sampled training examples each" train PS and Calib1: from the
    # Hub's train split, or offline a disjoint carve-out of the local copy (its fallback file)
    spec = compiled(SPECS["s002"])
    for d in ("nq", "sciq", "triviaqa"):
        hub = spec.get(d).value
        train = spec.get(hub.dev)
        assert train.ctor == "hub" and train.value.split == "train" and train.value.id_ == hub.id_
        assert train.value.sample == 2000 and hub.split != "train"
        assert spec.get(hub.fallback).value.dev_sample == 2000 and spec.get(hub.fallback).value.dev is None
    assert spec.get("popqa").value.dev == "popqa_dev" and spec.get("popqa_dev").value.sample == 2000


def test_s002_prompt_sets_for_robustness() -> None:
    # §5 and App. Tables 4-5: P-RB over M = 10 answer prompts (Prob./PS/P(True)) or 7 confidence
    # prompts (VC); 1,000 test items per dataset (SciQ: 500 from the local copy, see the spec).
    plan = declared_plan(SPECS["s002"])
    per = defaultdict(set)
    for c in plan.cells:
        if c.audit == "answer_prompts":
            per[(c.model, c.dataset, c.protocol, c.evaluator)].add(c.variant)
    assert per and {len(v) for v in per.values()} == {10}
    vc = defaultdict(set)
    for c in plan.cells:
        if c.audit == "vc":
            vc[(c.model, c.dataset, c.evaluator)].add(c.protocol)
    assert {len(v) for v in vc.values()} == {7}
    assert {c.dataset: c.n_items for c in plan.cells} == {"nq": 1000, "sciq": 1000, "triviaqa": 1000, "popqa": 1000}


def test_s002_vc_prb_across_confidence_prompts() -> None:
    # §5 / Table 6: VC's P-RB is over the 7 confidence prompts of App. Table 5 with the answer prompt
    # fixed (A1); App. A.7 Table 7 contrasts it with the 10 answer prompts (P(1) confidence prompt).
    spec = compiled(SPECS["s002"])
    vc = spec.get("robustness_vc").value
    assert vc.audit == "vc" and vc.protocols == list(spec.get("vc").value.protocols)
    assert len(vc.protocols) == 7 and spec.get("vc").value.variants == ["s002.a1"]
    assert {spec.get(p).ctor for p in vc.protocols} == {"verbalized"}
    assert vc.samples == "s002.samples10" and vc.grouping == "judge"
    ans = spec.get("robustness_vc_answer").value
    assert not ans.protocols and len(ans.variants) == 10 and ans.answer == "own"
    # no cross-variant stage for the VC compare: the own A1 answer is the same under every prompt
    from auditlang.plan.cross import cross_sources

    plan = declared_plan(SPECS["s002"])
    keys = {s.key for t, srcs in cross_sources(spec, plan).items() if t[0] == "vc" for s in srcs}
    assert keys == {"samples:s002.samples10@judge"}
    assert "LANGUAGE GAP: `robustness` computes P-RB across VARIANTS" not in SPECS["s002"].read_text(encoding="utf-8")


def test_s002_one_model_with_data_and_dev_splits(plan_with_data) -> None:
    spec = compiled(SPECS["s002"])
    plan = plan_with_data(only_audit(spec, "answer_prompts", models=["qwen25_14b"]))
    assert not plan.estimated
    info = plan.datasets
    assert {d: info[d]["n_sample"] for d in ("nq", "sciq", "triviaqa", "popqa")} == {
        "nq": 1000, "sciq": 500, "triviaqa": 1000, "popqa": 1000}
    # PS and Calib1 are fit on a disjoint dev split asking for 002's 2,000 train items (§5); the
    # local copies hold fewer beyond the test sample, so each gets all that is left
    assert info["nq"]["n_dev"] == 1000 and info["sciq"]["n_dev"] == 384 and info["popqa"]["n_dev"] == 1000
    test_ids = {ctx.item["id"] for k, u in plan.units.items() if k[2] == "popqa" and k[4] == "test" for ctx in u.contexts}
    dev_ids = {ctx.item["id"] for k, u in plan.units.items() if k[2] == "popqa" and k[4] == "dev" for ctx in u.contexts}
    assert len(test_ids) == len(dev_ids) == 1000 and not test_ids & dev_ids


# ----------------------------------------------------------------------------- study 003


def comparison_cases(spec) -> list[tuple[str, str, str, str]]:
    cases = []
    for comp in spec.of_kind("compare").values():
        if comp.ctor != "aligned":
            continue
        for aid in comp.value.all_audits():
            a = spec.get(aid).value
            for m1, m2 in comp.value.pairs:
                for d in a.datasets:
                    for p in a.protocols:
                        cases.append((f"{m1}|{m2}", d, p, aid))
    return cases


def test_s003_120_comparison_cases() -> None:
    # §6: "across all 120 cases" = 8 model pairs x 5 datasets x 3 confidence methods;
    # App. E.4 / Fig. 1: n = 40 model-pair-dataset cells; Table 8: 5 mode/effort + 3 size pairs.
    spec = compiled(SPECS["s003"])
    cases = comparison_cases(spec)
    assert len(cases) == 120
    assert len({(p, d) for p, d, _, _ in cases}) == 40
    pairs = {p for p, _, _, _ in cases}
    assert len(pairs) == 8
    assert len({d for _, d, _, _ in cases}) == 5
    assert len({m for p in pairs for m in p.split("|")}) == 14  # App. D.1: 14 configurations
    # every pair's models are cells of the audit the comparison reads
    plan = declared_plan(SPECS["s003"])
    cell_keys = {(c.audit, c.model, c.dataset, c.protocol) for c in plan.cells}
    assert len([c for c in spec.of_kind("compare").values() if c.ctor == "aligned"]) == 1  # one pooled analysis
    for p, d, proto, audit in cases:
        for m in p.split("|"):
            assert (audit, m, d, proto) in cell_keys


def test_s003_estimate_uses_declared_sizes() -> None:
    # App. D.2 Table 4: FreshQA 600, TriviaQA 1,500, GPQA Diamond 198, LiveBench 200, MMLU-Pro 2,841.
    plan = declared_plan(SPECS["s003"])
    assert plan.estimated
    assert all(c.estimated for c in plan.cells)
    assert {c.dataset: c.n_items for c in plan.cells} == {
        "freshqa": 600, "triviaqa": 1500, "gpqa": 198, "livebench": 200, "mmlu_pro": 2841}
    assert len(plan.cells) == 14 * 5 * 3


def test_s003_freshqa_is_the_papers_dated_version() -> None:
    # App. D.2: "We use the 2025-10-07 version of FreshQA and evaluate on 600 questions". FreshQA
    # is re-published weekly as dated spreadsheets: the spec reads that export, not whatever a
    # Hub id holds today
    fresh = compiled(SPECS["s003"]).get("freshqa")
    assert fresh.ctor == "csv" and "10072025" in fresh.value.path
    assert fresh.value.sample == 600


def test_s003_local_audit_with_data(plan_with_data) -> None:
    plan = plan_with_data(only_audit(compiled(SPECS["s003"]), "trivia", models=["qwen25_7b", "qwen25_72b"]))
    assert not plan.estimated
    assert {c.n_items for c in plan.cells} == {1500}
    # App. D.3 self-consistency: 10 responses per question, the first of which is the scored
    # answer: one n=9 sampling request per item at temperature 1.0 next to the answer request
    sc = [r for r in plan.requests if r.kind == "generate" and r.p.get("n") == 9]
    assert len(sc) == 2 * 1500 and {r.p["temperature"] for r in sc} == {1.0}
    assert not [r for r in plan.requests if r.kind == "generate" and r.p.get("n") == 10]
    answers = [r for r in plan.requests if r.kind == "generate" and r.p.get("n", 1) == 1 and r.model == sc[0].model
               and r.prompt == sc[0].prompt]
    assert len(answers) == 1 and answers[0].p["temperature"] == 1.0  # run 1: same prompt and decoding


def test_s003_full_plan_with_data_is_an_estimate(shared_data: Path) -> None:
    # FreshQA, GPQA Diamond and LiveBench are absent offline: estimated from their declared
    # App. D.2 sizes; TriviaQA and MMLU-Pro (486 of 2,841 locally) are planned from the files.
    plan = build_plan(compiled(SPECS["s003"]), data_root=str(shared_data))
    assert plan.estimated
    est = {c.dataset: (c.n_items, c.estimated) for c in plan.cells}
    assert est == {"freshqa": (600, True), "gpqa": (198, True), "livebench": (200, True),
                   "triviaqa": (1500, False), "mmlu_pro": (486, False)}
    # the answer call samples at temperature 1.0 / top_p 1.0 (App. D.3)
    answers = [r for r in plan.requests if r.kind == "generate" and r.p.get("n", 1) == 1
               and r.p.get("max_tokens") in (32768, 40960, 131072)]
    assert answers and {(r.p["temperature"], r.p.get("top_p", 1.0)) for r in answers} == {(1.0, 1.0)}


# ----------------------------------------------------------------------------- study 004


def test_s004_fourteen_conditions_per_model_dataset_method() -> None:
    # §3, App. A.2-A.3: Original + (Space, Options, Typo) x seeds {4, 44, 99} + 4 one-shot = 14,
    # matching the rows of Tables 11-14.
    spec = compiled(SPECS["s004"])
    plan = declared_plan(SPECS["s004"])
    conds = defaultdict(set)
    for c in plan.cells:
        conds[(c.model, c.dataset, c.protocol)].add(c.variant)
    assert conds and {len(v) for v in conds.values()} == {14}
    kinds = Counter()
    for v in next(iter(conds.values())):
        perturb = spec.get(v).value.perturb
        kinds[spec.get(perturb[0]).ctor if perturb else "original"] += 1
    assert kinds == {"original": 1, "space_insertion": 3, "option_shuffle": 3, "typo": 3, "one_shot": 4}
    seeds = {spec.get(p).value.seed for v in next(iter(conds.values())) for p in spec.get(v).value.perturb
             if spec.get(p).ctor != "one_shot"}
    assert seeds == {4, 44, 99}
    # Table 1: 6 methods x 4 variant types x 3 models on MMLU
    main = {(c.model, c.protocol) for c in plan.cells if c.audit == "mmlu_main"}
    assert len({m for m, _ in main}) == 3 and len({p for _, p in main}) == 6
    # cross-method: C(6, 2) = 15 method pairs under one prompt condition
    probes = spec.get("consistency_mmlu").value.probes
    assert len(probes) * (len(probes) - 1) // 2 == 15


def test_s004_one_model_with_data_and_disjoint_dev(plan_with_data) -> None:
    # §4 / App. A.1: 1,000 dev items (threshold fitting, probe training) + 1,000 test items.
    plan = plan_with_data(only_audit(compiled(SPECS["s004"]), "mmlu_main", models=["mistral_7b"]))
    assert not plan.estimated
    assert len(plan.cells) == 14 * 6
    assert {c.n_items for c in plan.cells} == {1000}
    assert plan.datasets["mmlu"]["n_dev"] == 1000
    test = {ctx.index for k, u in plan.units.items() if k[4] == "test" for ctx in u.contexts}
    dev = {ctx.index for k, u in plan.units.items() if k[4] == "dev" for ctx in u.contexts}
    assert len(test) == len(dev) == 1000 and not test & dev
    # App. A: sampling at temperature 0.1, top_p 0.9 (the answer and the probes' own calls; the
    # TokProb 1-token read of the next-token distribution is not a sample)
    sampled = {(r.p["temperature"], r.p.get("top_p")) for r in plan.requests
               if r.kind == "generate" and r.p["max_tokens"] > 1}
    assert sampled == {(0.1, 0.9)}
    # App. A.2: the shuffle moves the gold option in every item
    orig = {ctx.index: ctx.item for k, u in plan.units.items() if k[3] == "s004.original" and k[4] == "test"
            for ctx in u.contexts}
    for k, u in plan.units.items():
        if k[3] == "s004.options_4" and k[4] == "test":
            for ctx in u.contexts:
                o = orig[ctx.index]
                assert ctx.item["answer_index"] != o["answer_index"]
                assert ctx.item["choices"][ctx.item["answer_index"]] == o["choices"][o["answer_index"]]


def test_s004_hellaswag_consistency_is_the_six_methods() -> None:
    # Fig. 3c: cross-method consistency of the six methods, 15 pairs; the uncorrected AskCal is
    # Table 3's intra-method check only (with and without the threshold correction)
    spec = compiled(SPECS["s004"])
    six = ["s004.tokprob_probe", "s004.askcal", "s004.embedding", "s004.nota", "s004.moreinfo", "s004.selfref"]
    hs = spec.get("consistency_hellaswag").value
    assert hs.probes == six and len(list(itertools.combinations(hs.probes, 2))) == 15
    assert spec.get("consistency_mmlu").value.probes == six == spec.get("consistency_scaling").value.probes
    table3 = spec.get("askcal_correction_hellaswag").value
    assert table3.audit == "hellaswag_all" and set(table3.probes) == {"s004.askcal", "s004.askcal_nocorr"}
    assert len(table3.variants) == 14


def test_s004_models_per_dataset_follow_the_tables() -> None:
    # MMLU: Table 1 / Table 7 (Mistral-7B, LLaMA-3.1-8B, OLMo-2-7B) and Table 6 (LLaMA 1B, 3B,
    # 8B, 70B). HellaSwag: Table 8 and Tables 11-12 (Mistral-7B, LLaMA-3.1-8B), Table 9 (LLaMA
    # 1B, 3B), Table 10 (LLaMA-3.1-70B, OLMo-2-7B): all six models on both datasets.
    plan = declared_plan(SPECS["s004"])
    per = defaultdict(set)
    for c in plan.cells:
        per[c.dataset].add(c.model)
    six = {"mistral_7b", "llama32_1b", "llama32_3b", "llama31_8b", "llama31_70b", "olmo2_7b"}
    assert per == {"mmlu": six, "hellaswag": six}
    by_audit = defaultdict(set)
    for c in plan.cells:
        by_audit[c.audit].add(c.model)
    assert by_audit["mmlu_main"] == {"mistral_7b", "llama31_8b", "olmo2_7b"}  # Table 1
    assert by_audit["mmlu_scaling"] == {"llama32_1b", "llama32_3b", "llama31_8b", "llama31_70b"}  # Table 6
    assert by_audit["hellaswag_all"] == six  # Tables 8-12
    # Tables 12 and 14: LLaMA-3.1-8B's abstain performance on HellaSwag and MMLU, every condition
    hs8 = {c.variant for c in plan.cells if c.model == "llama31_8b" and c.dataset == "hellaswag"}
    assert len(hs8) == 14
