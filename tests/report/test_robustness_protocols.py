"""``robustness(audit, protocols=[...])``: P-RB across confidence prompts (study 002 §5, VC), by hand.

Records are written directly (no engine): one model, one dataset, one answer prompt, three
verbalized protocols that share the model's own answer. Expected values are computed by hand
from the numbers below (population Std, 002 eq. 3-7).
"""

from __future__ import annotations

import math

import pytest

from auditlang.core.diagnostics import CompileError
from auditlang.report.comparisons import compute_one
from auditlang.report.rundata import load_run
from auditlang.resolve import compile_spec
from auditlang.store.records import ExampleRecord, write_records

from report_fixtures import DATA, make_plan

SPEC = """
settings s { seed = 42, data_root = "DATA" }
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=4, seed=42)
model a = hf("org/a-1b", size=1.0)
template t1 = template("Q: {{ question }} A:")
template c1 = template("Probability between 0.0 and 1.0?")
template c2 = template("Confidence between 0% and 100%?")
template c3 = template("Certainty between 0 and 10?")
variant v1 = variant(t1)
variant v2 = variant(t1, max_tokens=8)
protocol p1 = verbalized(scale=decimal_01, phrasing=c1)
protocol p2 = verbalized(scale=percent_0_100, phrasing=c2)
protocol p3 = verbalized(scale=scale_0_10, phrasing=c3)
protocol sc = self_consistency(k=3, temperature=0.7)
evaluator fc = first_char()
audit vc { models = [a]  datasets = [arc]  variants = [v1]  protocols = [p1, p2, p3]  evaluators = [fc] }
compare rob = robustness(vc, protocols=[p1, p2, p3], samples=sc)
"""

PRED, GOLD = "ACCA", "ABCD"  # the own answer, shared by every protocol of the cell
CORRECT = [float(p == g) for p, g in zip(PRED, GOLD)]  # 1, 0, 1, 0
NAN = math.nan
# confidence per protocol and item (NaN = the verbal reply did not parse)
CONF = {"p1": [0.5, 0.2, 0.3, NAN], "p2": [0.5, 0.4, NAN, NAN], "p3": [0.5, 0.6, 0.7, 0.4]}
# three sampled answers per item, each protocol's confidence in them; groups A, A, B
SAMPLES = {"p1": [0.9, 0.7, 0.2], "p2": [0.8, 0.8, 0.1], "p3": [0.6, 0.2, 0.5]}
GROUPS = ["A", "A", "B"]


def _records(plan) -> list[ExampleRecord]:
    idx = plan.datasets["arc"]["indices"]
    recs = []
    for c in plan.cells:
        for k, item in enumerate(idx):
            conf = CONF[c.protocol][k]
            supplied = [{"source": "samples:sc", "index": j, "pred": g, "confidence": SAMPLES[c.protocol][j],
                         "correct": None, "group": g, "group_rule": "evaluator"} for j, g in enumerate(GROUPS)]
            recs.append(ExampleRecord(
                cell_id=c.id, model=c.model, dataset=c.dataset, variant=c.variant, protocol=c.protocol,
                evaluator=c.evaluator, item_id=f"arc-{item}", item_index=int(item), gold=GOLD[k], pred=PRED[k],
                parsed=True, parse_rule="first", correct=CORRECT[k], confidence=conf,
                confidence_parsed=not math.isnan(conf), confidence_kind="verbal", extras={"supplied": supplied},
                request_ids={"answer": f"r-{k}"}, generation=PRED[k]))
    return recs


def _compile(tmp_path, text: str):
    p = tmp_path / "vc.audit"
    p.write_text(text.replace("DATA", str(DATA)), encoding="utf-8")
    return compile_spec(p)


@pytest.fixture
def rd(tmp_path):
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    spec = _compile(tmp_path, SPEC)
    plan = make_plan(spec, DATA)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_records(run_dir / "records.parquet", _records(plan))
    return load_run(spec, plan, run_dir)


def test_prb_across_protocols_by_hand(rd):
    t = compute_one(rd, "rob").tables[0]
    rows = t.records()
    assert len(rows) == 1  # one row per (model, dataset, evaluator), not per protocol
    r = rows[0]
    assert (r["model"], r["dataset"], r["protocol"], r["evaluator"]) == ("a", "arc", "verbalized(3 prompts)", "fc")
    assert r["n_items"] == 4
    # item stds: (0.5, 0.5, 0.5) -> 0; (0.2, 0.4, 0.6) -> sqrt(0.08/3); (0.3, -, 0.7) -> 0.2;
    # (-, -, 0.4) has one finite value: excluded
    assert r["P-RB"] == pytest.approx(1 - (0 + math.sqrt(0.08 / 3) + 0.2) / 3, abs=1e-12)
    assert r["P-RB items excluded"] == 1
    # Brier per protocol over parsed rows: p1 (0.25+0.04+0.49)/3, p2 (0.25+0.16)/2, p3 (0.25+0.36+0.09+0.16)/4
    assert r["Brier (mean over prompts)"] == pytest.approx((0.26 + 0.205 + 0.215) / 3, abs=1e-12)
    # AUROC: p1 1.0, p2 1.0, p3 3 of 4 pairs ordered = 0.75
    assert r["AUROC (mean over prompts)"] == pytest.approx((1 + 1 + 0.75) / 3, abs=1e-12)
    # A-STB per protocol: 1 - std of the A group (0.9, 0.7) = 0.9; (0.8, 0.8) = 1.0; (0.6, 0.2) = 0.8
    assert r["A-STB"] == pytest.approx((0.9 + 1.0 + 0.8) / 3, abs=1e-12)
    # A-SST per protocol: |Delta(max, min) - Delta(max, max)|: |0.6 - 0.1|, |0.7 - 0|, |0.2 - 0.2|
    assert r["A-SST"] == pytest.approx((0.5 + 0.7 + 0.0) / 3, abs=1e-12)
    notes = " ".join(t.notes)
    assert "p1, p2, p3 under the one answer prompt v1" in notes and "averaged over the protocols" in notes


def test_variant_mode_unchanged_without_protocols(rd):
    # without protocols= the same audit has one variant: P-RB is not computable, one row per protocol
    from auditlang.report.comparisons.robustness import robustness

    c = rd.spec.get("rob").value.model_copy(update={"protocols": []})
    t = robustness(rd, "rob", c).tables[0]
    assert [r["protocol"] for r in t.records()] == ["p1", "p2", "p3"]
    assert all(math.isnan(r["P-RB"]) for r in t.records())
    assert any("P-RB needs at least two prompts" in n for n in t.notes)


@pytest.mark.parametrize("compare, code, text", [
    ("robustness(vc2, protocols=[p1, p2])", "E157", "spans 2 variants (v1, v2)"),
    ("robustness(vc2, variants=[v1, v2], protocols=[p1, p2])", "E157", "needs one fixed answer prompt"),
    ("robustness(vc2, protocols=[p1])", "E157", "P-RB needs at least two prompts"),
    ("robustness(vc, protocols=[p1, sc])", "E156", "'sc' is not in audit 'vc' protocols"),
])
def test_protocols_diagnostics(tmp_path, compare, code, text):
    spec = SPEC.replace("compare rob = robustness(vc, protocols=[p1, p2, p3], samples=sc)", "") + (
        "audit vc2 { models = [a]  datasets = [arc]  variants = [v1, v2]  protocols = [p1, p2]  evaluators = [fc] }\n"
        f"compare bad = {compare}\n")
    with pytest.raises(CompileError) as err:
        _compile(tmp_path, spec)
    diags = [d for d in err.value.diagnostics if d.code == code]
    assert diags and any(text in d.message for d in diags), [d.message for d in err.value.diagnostics]


def test_protocols_with_one_variant_compiles(tmp_path):
    spec = _compile(tmp_path, SPEC.replace("protocols=[p1, p2, p3], samples=sc", "variants=[v1], protocols=[p1, p3]"))
    assert spec.get("rob").value.protocols == ["p1", "p3"]


def test_checklist_and_disclosure_state_the_own_answer(rd):
    from auditlang.report.checklist import build_checklist
    from auditlang.report.disclosure import disclosure_table

    g = next(g for g in build_checklist(rd, []).groups if g.title.startswith("Audit vc: shared"))
    text = "\n".join(next(e for e in g.entries if e.key == "cross").lines)
    assert ("comparison rob (robustness, P-RB across confidence protocols p1, p2, p3): each model's own answer under "
            "v1, the same answer under every protocol (no cross stage)") in text
    # 1 model x 3 protocols x 4 items x 3 samples; 4 items x 3 samples distinct, grouped by the evaluator
    assert ("records: 36 scored samples, 0 without a confidence; grouping of the 12 distinct samples: 12 of 12 "
            "(100.0%) by the evaluator (no judge reply)") in text
    notes = "\n".join(disclosure_table(rd, "vc").notes)
    assert "Cross-scored answers: rob: P-RB over protocols p1, p2, p3 on the own answer under v1; A-STB/A-SST" in notes


def test_table_6_averages_and_table_8_not_max(rd):
    """002 Table 6: per method and metric, the model's mean over datasets and AVG over models;
    Table 8: A-SST against every answer outside Y^max (here Y^min is the only other group)."""
    comp = compute_one(rd, "rob")
    r = comp.tables[0].records()[0]
    assert r["A-SST not max"] == pytest.approx(r["A-SST"], abs=1e-12)
    avg = next(t for t in comp.tables if t.name == "rob_avg")
    assert avg.columns == ["protocol", "evaluator", "metric", "a", "AVG", "n_models"]
    by = {x["metric"]: x for x in avg.records()}
    for metric in ("P-RB", "A-STB", "A-SST", "A-SST not max", "Brier (mean over prompts)", "AUROC (mean over prompts)"):
        assert by[metric]["a"] == pytest.approx(r[metric], abs=1e-12)
        assert by[metric]["AVG"] == pytest.approx(r[metric], abs=1e-12) and by[metric]["n_models"] == 1


def test_prompt_and_metric_correlations(rd):
    """002 Figs 7-9: Pearson r of two confidence prompts over the items both scored; Fig 4: r of
    two metrics over the (method, model) points (one point here: undefined)."""
    import numpy as np

    comp = compute_one(rd, "rob")
    corr = {(r["prompt_1"], r["prompt_2"]): r for r in next(t for t in comp.tables if t.name == "rob_prompt_corr").records()}
    # p1 and p3 share items 1-3: (0.5, 0.2, 0.3) vs (0.5, 0.6, 0.7)
    assert corr[("p1", "p3")]["n_items"] == 3
    assert corr[("p1", "p3")]["pearson r"] == pytest.approx(np.corrcoef([0.5, 0.2, 0.3], [0.5, 0.6, 0.7])[0, 1], abs=1e-12)
    assert math.isnan(corr[("p1", "p2")]["pearson r"])  # two shared items only
    mc = next(t for t in comp.tables if t.name == "rob_metric_corr").records()
    assert mc and all(r["n_points"] == 1 and math.isnan(r["pearson r"]) for r in mc)
