"""Comparisons that read the cross stage's record extras ``supplied``, checked by hand.

Records are written directly (no engine): two models, one dataset, two prompts, one
answer-conditioned protocol. The expected CA, fixed-answer P-RB and A-STB / A-SST values are
computed here from the same numbers with the metric functions' definitions.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from auditlang.metrics.aligned import candidate_aligned
from auditlang.metrics.robustness import answer_sensitivity, answer_stability, prompt_robustness
from auditlang.report.comparisons import compute_one
from auditlang.report.rundata import load_run
from auditlang.resolve import compile_spec
from auditlang.store.records import ExampleRecord, write_records

from report_fixtures import DATA, make_plan

SPEC = """
settings s { seed = 42, data_root = "DATA" }
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=4, seed=42)
model a = hf("org/a-1b", size=1.0)
model b = hf("org/b-3b", size=3.0)
template t1 = template("Q: {{ question }} A:")
template t2 = template("Question: {{ question }} Answer:")
variant v1 = variant(t1)
variant v2 = variant(t2)
protocol tb = token_prob(readout=T1, scored=generated, context=bare)
protocol sc = self_consistency(k=3, temperature=0.7)
evaluator fc = first_char()
audit main { models = [a, b]  datasets = [arc]  variants = [v1, v2]  protocols = [tb]  evaluators = [fc] }
compare al = aligned(main, pairs=[[a, b]], views=[candidate])
compare rob = robustness(main, variants=[v1, v2], answer=fixed, samples=sc)
"""

# own answers (pred), own correctness, own confidence per (model, variant) and item position
PRED = {("a", "v1"): "ABCA", ("b", "v1"): "ABDD", ("a", "v2"): "BBCA", ("b", "v2"): "ABDC"}
GOLD = "ABCD"
CONF = {("a", "v1"): [0.9, 0.8, 0.3, 0.6], ("b", "v1"): [0.7, 0.6, 0.5, 0.4],
        ("a", "v2"): [0.2, 0.7, 0.9, 0.5], ("b", "v2"): [0.8, 0.1, 0.6, 0.3]}
# a's confidence in b's v1 answer and b's in a's v1 answer (items where the answers differ: 2, 3)
CROSS = {("a", 2): 0.25, ("a", 3): 0.65, ("b", 2): 0.15, ("b", 3): 0.55}
# v2's confidence in the v1 answer (fixed answer)
FIXED = {"a": [0.85, 0.75, 0.35, 0.55], "b": [0.65, 0.5, 0.45, 0.45]}
# three samples under v1 per item: (pred, confidence) and the groups follow the preds
SAMPLES = {"a": [("A", 0.9), ("A", 0.7), ("B", 0.2)], "b": [("C", 0.4), ("C", 0.4), ("C", 0.5)]}


def _records(plan) -> list[ExampleRecord]:
    idx = plan.datasets["arc"]["indices"]
    recs = []
    for c in plan.cells:
        m, v = c.model, c.variant
        for k, item in enumerate(idx):
            pred = PRED[(m, v)][k]
            supplied = []
            if v == "v1":
                other = "b" if m == "a" else "a"
                op = PRED[(other, "v1")][k]
                conf = CONF[(m, v)][k] if op == pred else CROSS[(m, k)]
                supplied.append({"source": f"model:{other}", "index": 0, "pred": op, "confidence": conf,
                                 "correct": float(op == GOLD[k])})
                for j, (sp, sc) in enumerate(SAMPLES[m]):
                    supplied.append({"source": "samples:sc", "index": j, "pred": sp, "confidence": sc,
                                     "correct": float(sp == GOLD[k]), "group": sp, "group_rule": "evaluator"})
            else:
                supplied.append({"source": "variant:v1", "index": 0, "pred": PRED[(m, "v1")][k],
                                 "confidence": FIXED[m][k], "correct": float(PRED[(m, "v1")][k] == GOLD[k])})
            recs.append(ExampleRecord(
                cell_id=c.id, model=m, dataset=c.dataset, variant=v, protocol=c.protocol, evaluator=c.evaluator,
                item_id=f"arc-{item}", item_index=int(item), gold=GOLD[k], pred=pred, parsed=True, parse_rule="first",
                correct=float(pred == GOLD[k]), confidence=CONF[(m, v)][k], confidence_parsed=True,
                confidence_kind="seq_prob", extras={"supplied": supplied}, request_ids={"answer": f"r-{c.id}-{k}"},
                generation=pred,
            ))
    return recs


@pytest.fixture
def rd(tmp_path):
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    p = tmp_path / "cross.audit"
    p.write_text(SPEC.replace("DATA", str(DATA)), encoding="utf-8")
    spec = compile_spec(p)
    plan = make_plan(spec, DATA)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_records(run_dir / "records.parquet", _records(plan))
    return load_run(spec, plan, run_dir)


def test_candidate_aligned_pool_from_supplied(rd):
    t = compute_one(rd, "al").tables[0].records()
    got = {(r["metric"], r["view"]): (r["value_1"], r["value_2"]) for r in t if r["variant"] == "v1"}
    for m, col in (("a", 0), ("b", 1)):
        conf, corr = [], []
        for k in range(4):
            conf.append(CONF[(m, "v1")][k])
            corr.append(float(PRED[(m, "v1")][k] == GOLD[k]))
            other = PRED[("b" if m == "a" else "a", "v1")][k]
            if other != PRED[(m, "v1")][k]:  # U_i is a set: an equal answer is one candidate
                conf.append(CROSS[(m, k)])
                corr.append(float(other == GOLD[k]))
        want = candidate_aligned(np.array(conf), np.array(corr), bins=10)
        assert len(conf) == 6
        assert got[("ECE", "CA")][col] == pytest.approx(want.ece, abs=1e-12)
        assert got[("Brier", "CA")][col] == pytest.approx(want.brier, abs=1e-12)


def test_fixed_answer_prb_and_sample_stability(rd):
    rows = {r["model"]: r for r in compute_one(rd, "rob").tables[0].records()}
    for m in ("a", "b"):
        mat = np.column_stack([CONF[(m, "v1")], FIXED[m]])
        assert rows[m]["P-RB"] == pytest.approx(prompt_robustness(mat).value, abs=1e-12)
        confs = [[c for _, c in SAMPLES[m]]] * 4
        groups = [[p for p, _ in SAMPLES[m]]] * 4
        for col, fn in (("A-STB", answer_stability), ("A-SST", answer_sensitivity)):
            try:
                want = fn(confs, groups).value
            except ValueError:
                want = math.nan
            got = rows[m][col]
            assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, abs=1e-12), (m, col)
    # a's samples fall into two groups ({A, A}, {B}): both metrics are defined; b's into one: no A-SST
    assert not math.isnan(rows["a"]["A-STB"]) and not math.isnan(rows["a"]["A-SST"])
    assert math.isnan(rows["b"]["A-SST"])
    # the hand-computed A-STB of a: 1 - std(0.9, 0.7) = 0.9 (population std)
    assert rows["a"]["A-STB"] == pytest.approx(0.9, abs=1e-12)


def test_own_answer_prb_ignores_supplied(rd):
    from auditlang.report.comparisons.robustness import robustness

    c = rd.spec.get("rob").value.model_copy(update={"answer": "own"})
    rows = {r["model"]: r for r in robustness(rd, "rob", c).tables[0].records()}
    for m in ("a", "b"):
        mat = np.column_stack([CONF[(m, "v1")], CONF[(m, "v2")]])
        assert rows[m]["P-RB"] == pytest.approx(prompt_robustness(mat).value, abs=1e-12)


def test_records_roundtrip_keeps_supplied(rd):
    x = json.loads(rd.records.iloc[0]["extras"])
    assert {s["source"] for s in x["supplied"]} <= {"model:a", "model:b", "samples:sc", "variant:v1"}
    assert dataclasses.is_dataclass(ExampleRecord)
