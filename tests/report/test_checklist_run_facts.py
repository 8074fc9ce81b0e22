"""Checklist lines that state facts of the run (issue 10 item 11): the spread's variant set
(study 000 §3: the four non-format_change variants), no VPR exclusion where a spec declares no
threshold (study 001 has none; 000 App. D.1's 0.80 is 000's rule), study 004's fitted thresholds
and whether the §5.5 0.5 correction fired, ``--limit`` and a sample that covers every row."""

from __future__ import annotations

import pytest

from auditlang.plan.planner import Planner
from auditlang.report.checklist import build_checklist
from auditlang.report.comparisons import compute_all
from auditlang.report.rundata import load_run
from auditlang.resolve import compile_spec
from auditlang.store.records import ExampleRecord, write_records

from report_fixtures import DATA, SPEC, build_run


@pytest.fixture(scope="module")
def md(run) -> str:
    return (run.report / "checklist.md").read_text(encoding="utf-8")


def entry(cl, group_prefix: str, key: str):
    g = next(g for g in cl.groups if g.title.startswith(group_prefix))
    return next(e for e in g.entries if e.key == key)


def test_spread_is_over_the_spread_comparisons_variants(md):
    # the fixture's `sp = spread(main, variants=[plain, reorder, framing])`: 3 of the audit's 4 variants
    assert "spread = max - min accuracy over the 3 variants of comparison sp (plain, reorder, framing); " \
           "not in the spread: cot" in md
    assert "accuracy spread (max - min over 3 variants)" in md
    assert "over all 4 variants" not in md


def test_sampled_request_seeds_are_stated_from_plan_json(md, run):
    # issue 23: each sampled request has a seed of its own item and purpose; the checklist states
    # the rule plan.json records (not only "generation seed 42")
    import json

    from auditlang.report.safe_text import md_safe

    # as Markdown writes it: a `<seed ...>` placeholder would be an HTML tag a viewer hides (issue 40 item 7)
    rule = md_safe(json.loads((run.run_dir / "plan.json").read_text(encoding="utf-8"))["sampling_seeds"])
    assert f"sampled requests: a seed per item and purpose, derived from the generation seed (or a protocol's seed): {rule}" in md


@pytest.fixture(scope="module")
def no_threshold(tmp_path_factory):
    """The report fixture's run without any vpr_threshold (as study 001 declares none)."""
    text = SPEC.replace("  vpr_threshold = 0.8\n", "")
    assert text != SPEC
    spec, plan, run_dir = build_run(tmp_path_factory.mktemp("novpr"), text)
    rd = load_run(spec, plan, run_dir)
    return rd, compute_all(rd)


def test_no_vpr_exclusion_without_a_declared_threshold(no_threshold):
    rd, comps = no_threshold
    cl = build_checklist(rd, comps)
    vpr = entry(cl, "Audit main: shared", "vpr")
    text = "\n".join(vpr.lines + [": ".join(r) for r in vpr.table[1]])
    assert "Inclusion threshold: none" in text and "no cell excluded (48 cells)" in text
    assert ": excluded" not in text and ": included" not in text
    # the fixture's low-VPR cell (mid / mmlu / reorder, VPR about 0.5) stays in
    assert "mid / mmlu / reorder / verbal / fc: 0.5" in text and ": no threshold" in text
    gap = next(c for c in comps if c.name == "gap")
    rows = gap.tables[0].records()
    assert all(r["included"] for r in rows)
    assert any("No inclusion threshold declared" in n for n in gap.tables[0].notes)


DEV_SPEC = """
settings s { seed = 42, data_root = "DATA" }
dataset obqa = jsonl("openbookqa.jsonl", task=multiple_choice, sample=3, seed=42, dev_sample=5)
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=100000)
model m = hf("org/m-1b", size=1.0, dtype=bf16)
template t = template("{{ question }} Answer:")
variant v = variant(t)
protocol ask = ask_cal()
evaluator fc = first_char()
audit probes { models = [m]  datasets = [obqa]  variants = [v]  protocols = [ask]  evaluators = [fc] }
audit full { models = [m]  datasets = [arc]  variants = [v]  protocols = [ask]  evaluators = [fc] }
"""


@pytest.fixture(scope="module")
def dev_run(tmp_path_factory):
    if not (DATA / "openbookqa.jsonl").exists():
        pytest.skip("../shared/data is not available")
    tmp = tmp_path_factory.mktemp("dev")
    p = tmp / "dev.audit"
    p.write_text(DEV_SPEC.replace("DATA", str(DATA)), encoding="utf-8")
    spec = compile_spec(p)
    plan = Planner(spec, str(DATA), load_data=True, limit=2).build()  # `auditc run --limit 2`
    recs = []
    for c in plan.cells:
        for k, item in enumerate(plan.datasets[c.dataset]["indices"]):
            corrected = c.dataset == "obqa"
            extras = {"threshold": 0.5 if corrected else 0.31, "threshold_fitted": 0.98 if corrected else 0.31,
                      "threshold_corrected": corrected, "threshold_dev_size": 5, "abstain": False}
            recs.append(ExampleRecord(
                cell_id=c.id, model=c.model, dataset=c.dataset, variant=c.variant, protocol=c.protocol,
                evaluator=c.evaluator, item_id=f"{c.dataset}-{item}", item_index=int(item), gold="A", pred="A",
                parsed=True, parse_rule="first", correct=1.0, confidence=0.7, confidence_parsed=True,
                confidence_kind="ask_cal", extras=extras, request_ids={"answer": f"r-{c.id}-{k}"}, generation="A"))
    run_dir = tmp / "run"
    run_dir.mkdir()
    write_records(run_dir / "records.parquet", recs)
    return build_checklist(load_run(spec, plan, run_dir), []), plan


def test_fitted_thresholds_and_the_correction_are_reported(dev_run):
    cl, _ = dev_run
    fit = entry(cl, "Audit probes, cells of protocol ask", "fit")
    text = "\n".join(fit.lines + [": ".join(r) for r in (fit.table[1] if fit.table else [])])
    # 004 §5.5: "when an unreasonable threshold is detected, we override it and set the threshold to 0.5"
    assert "m / obqa / v / fc: threshold 0.5000 (fitted 0.9800 on 5 dev items; 0.5 correction fired)" in text
    assert "0.5 threshold correction (study 004 §5.5) fired in 1 of 1 cells" in text
    fe = entry(cl, "Audit full, cells of protocol ask", "fit")
    full = "\n".join(fe.lines + [": ".join(r) for r in (fe.table[1] if fe.table else [])])
    assert "threshold 0.3100 (fitted 0.3100 on 5 dev items; 0.5 correction not fired)" in full


def test_limit_and_full_row_samples_are_disclosed(dev_run):
    cl, plan = dev_run
    seeds = entry(cl, "Run", "seeds")
    text = "\n".join(seeds.lines)
    assert "dataset obqa: run with --limit 2: only the first 2 of the 3 sampled items were planned and scored" in text
    assert any("--limit 2" in f and "obqa" in f for f in seeds.flags)
    # arc declares sample=100000 > its rows: every row in file order, not a random draw
    n = plan.datasets["arc"]["n_items"]
    assert "dataset arc: file" in text and f"all {n} rows in file order (the declared sample of 100000 covers every row: " \
           "no random draw)" in text
    assert "obqa" in text and "sample 3 drawn with random.Random(42).sample over row indices" in text


SC_SPEC = """
settings s { seed = 42, data_root = "DATA" }
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=3, seed=42)
model m = hf("org/m-1b", size=1.0, dtype=bf16)
template t = template("{{ question }} Answer:")
variant greedy = variant(t)
variant sampled = variant(t, temperature=1.0, top_p=1.0)
protocol sc = self_consistency(k=10, temperature=1.0, top_p=1.0, seed=42, reference=first_sample)
evaluator fc = first_char()
audit a { models = [m]  datasets = [arc]  variants = [greedy, sampled]  protocols = [sc]  evaluators = [fc] }
"""


def test_self_consistency_run_one_must_decode_like_the_samples(tmp_path):
    # 003 App. D.3: "10 independent responses ... using the same answer-generation prompt and
    # decoding setup"; run 1 is the scored answer, so a greedy variant breaks the design
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    p = tmp_path / "sc.audit"
    p.write_text(SC_SPEC.replace("DATA", str(DATA)), encoding="utf-8")
    spec = compile_spec(p)
    plan = Planner(spec, str(DATA)).build()
    (tmp_path / "run").mkdir()
    write_records(tmp_path / "run" / "records.parquet", [])
    cl = build_checklist(load_run(spec, plan, tmp_path / "run"), [])
    e = entry(cl, "Audit a, cells of protocol sc", "sampling")
    assert "k=10 runs per item: the scored answer (run 1) and k-1=9 samples, seed 42" in "\n".join(e.lines)
    flags = "\n".join(e.flags)
    assert "scores the answer of variant 'greedy' as run 1" in flags
    assert "variant 'sampled'" not in flags


def test_fitted_probe_cells_say_they_fitted(tmp_path):
    """Study 004's Embedding probe: a cell whose records carry the fit size says so; records of an
    older run without it but with fitted confidences say the cell fitted (not "not computable")."""
    p = tmp_path / "emb.audit"
    p.write_text(DEV_SPEC.replace("DATA", str(DATA)).replace("protocol ask = ask_cal()", "protocol ask = embedding_probe()"),
                 encoding="utf-8")
    spec = compile_spec(p)
    plan = Planner(spec, str(DATA), load_data=True, limit=2).build()
    recs = []
    for c in plan.cells:
        for k, item in enumerate(plan.datasets[c.dataset]["indices"]):
            extras = {"n_train": 5, "converged": True} if c.dataset == "obqa" else {}
            recs.append(ExampleRecord(
                cell_id=c.id, model=c.model, dataset=c.dataset, variant=c.variant, protocol=c.protocol,
                evaluator=c.evaluator, item_id=f"{c.dataset}-{item}", item_index=int(item), gold="A", pred="A",
                parsed=True, parse_rule="first", correct=1.0, confidence=0.7, confidence_parsed=True,
                confidence_kind="embedding_probe", extras=extras, request_ids={"answer": f"r-{c.id}-{k}"},
                generation="A"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_records(run_dir / "records.parquet", recs)
    cl = build_checklist(load_run(spec, plan, run_dir), [])
    rows = {r[0]: r[1] for a in ("probes", "full") for r in entry(cl, f"Audit {a}, cells of protocol ask", "fit").table[1]}
    assert rows["m / obqa / v / fc"] == "fitted on the dev split (5 items)"
    assert rows["m / arc / v / fc"].startswith("fitted on the dev split (2 of 2 items have a fitted confidence")
    assert not [v for v in rows.values() if "not computable" in v]

