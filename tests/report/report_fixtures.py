"""A synthetic run directory for the report tests (imported by conftest.py and the tests).

The spec is compiled from inline .audit text and planned by the real planner (data from
/work/shared/data).
Records are hand-made ExampleRecords with known structure: correctness depends on (model,
dataset, variant, evaluator) only, so protocols of one cell share their answers; the verbal cells
of LOW_VPR_CELL are pushed below the VPR threshold; the probes audit records abstain decisions.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from auditlang.plan.model import Plan
from auditlang.resolve import compile_spec
from auditlang.store.journal import Journal
from auditlang.store.records import ExampleRecord, write_records

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

SPEC = """
settings s { seed = 42, data_root = "DATA" }

dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=40, seed=42)
dataset mmlu = jsonl("mmlu.jsonl", task=multiple_choice, sample=40, seed=7)
dataset obqa = jsonl("openbookqa.jsonl", task=multiple_choice, sample=30)

model small = hf("org/small-1b", size=1.0, revision="rev-small", dtype=bf16)
model mid = hf("org/mid-3b", size=3.0, dtype=bf16)
model big = hf("org/big-7b", size=7.0)

template t_plain = template("Answer the following multiple-choice question. {{ question }} Answer:")
template t_reorder = template("Choose the correct answer. Question: {{ question }} Correct answer letter:")
template t_cot = template("Answer the following question. Think step by step. {{ question }} Reasoning and answer:")
template t_framing = template("{{ question }} The answer is:")
template conf_dec = template("Now state your confidence in your answer above as a decimal probability between 0.0 and 1.0.")

variant plain = variant(t_plain)
variant reorder = variant(t_reorder)
variant cot = variant(t_cot, max_tokens=256)
variant framing = variant(t_framing)
variant shuffled = variant(t_plain, perturb=[option_shuffle(seed=4)])
variant typod = variant(t_plain, perturb=[typo()])

protocol tok_norm = token_prob(readout=first_token, normalise=label_set, window=top_k, top_k=200)
protocol tok_raw = tok_norm with (normalise=raw)
protocol verbal = verbalized(scale=decimal_01, phrasing=conf_dec, provenance=self, mode=followup)
protocol tok_bare = token_prob(readout=T1, scored=generated, context=bare)
protocol tok_prefix = tok_bare with (context=verbal_prefix)
protocol nota = nota()
protocol moreinfo = more_info()
protocol selfref = self_ref()

evaluator fc = first_char()
evaluator rx = regex_reparse(tail=150)

metric ece10 = ece(bins=10, binning=equal_width)
metric binfree = binfree_ece()

audit main {
  models = [small, mid, big]
  datasets = [arc, mmlu]
  variants = [plain, reorder, cot, framing]
  protocols = [tok_norm, tok_raw, verbal, tok_bare, tok_prefix]
  evaluators = [fc, rx]
  metrics = [accuracy, ece10, brier, auroc]
  bootstrap = bootstrap(resamples=200, seed=42)
  vpr_threshold = 0.8
}

audit probes {
  models = [small]
  datasets = [obqa]
  variants = [plain, shuffled, typod]
  protocols = [nota, moreinfo, selfref]
}

compare sp = spread(main, variants=[plain, reorder, framing])
compare sz = size_spread(main, variants=[plain, reorder, framing])
compare gap = ece_gap(main, verbal=verbal, token=tok_norm)
compare ns = norm_shift(main, raw=tok_raw, norm=tok_norm)
compare rep = evaluator_repair(main, base=fc, repairs=[rx], reference_variant=plain, variant=cot)
compare rep3 = evaluator_repair(main, base=fc, repairs=[rx], reference_variants=[plain, reorder, framing], variant=cot)
compare gap_mmlu = ece_gap(main, verbal=verbal, token=tok_norm, datasets=[mmlu])
compare gap_valid = ece_gap(main, verbal=verbal, token=tok_norm, datasets=[mmlu], variants=[plain, reorder, framing])
compare grid = protocol_grid(main, verbal=verbal, configs=[tok_bare, tok_prefix], estimators=[ece10, binfree])
compare rob = robustness(main, variants=[plain, reorder, framing], answer=own)
compare al = aligned(main, pairs=[[small, mid], [mid, big]])
compare cons = consistency(probes, probes=[nota, moreinfo, selfref])
"""

BASE_ACC = {"small": 0.45, "mid": 0.7, "big": 0.85}
LOW_VPR_CELL = ("mid", "mmlu", "reorder")  # verbal parse rate pushed to 0.5 here


def _seed(*parts: str) -> int:
    return int(hashlib.sha256("/".join(parts).encode()).hexdigest()[:8], 16)


def make_plan(spec, data_root: Path) -> Plan:
    from auditlang.plan.planner import build_plan

    return build_plan(spec, str(data_root))


def _correct(m: str, d: str, v: str, e: str, items: list[int]) -> np.ndarray:
    rng = np.random.default_rng(_seed("correct", m, d, v, e))
    p = BASE_ACC[m] * (0.8 if v == "reorder" else 1.0) * (1.1 if d == "arc" else 1.0)
    if v == "cot":
        p = 0.1 if e == "fc" else p * 0.95
    return (rng.random(len(items)) < min(p, 0.98)).astype(float)


def make_records(spec, plan: Plan) -> list[ExampleRecord]:
    recs = []
    for c in plan.cells:
        idx = plan.datasets[c.dataset]["indices"]
        eval_key = c.evaluator if c.evaluator != "<default>" else "fc"
        z = _correct(c.model, c.dataset, c.variant, eval_key, idx)
        rng = np.random.default_rng(_seed("conf", c.id))
        ctor = spec.get(c.protocol).ctor
        for k, (item, corr) in enumerate(zip(idx, z)):
            extras: dict = {}
            parsed_conf = True
            if ctor == "token_prob":
                norm = float(np.clip(0.55 + 0.35 * corr + rng.normal(0, 0.15), 0.01, 1.0))
                raw = norm * float(rng.uniform(0.3, 1.0))
                conf = norm if spec.get(c.protocol).value.normalise == "label_set" else raw
                if spec.get(c.protocol).value.readout != "first_token":
                    shift = 0.15 if spec.get(c.protocol).value.context == "verbal_prefix" else 0.0
                    conf = float(np.clip(0.5 + 0.3 * corr + shift + rng.normal(0, 0.1), 0.0, 1.0))
                extras = {"p_raw": raw, "p_norm": norm, "full_coverage": bool(k % 7 != 0 or c.dataset == "arc")}
            elif ctor == "verbalized":
                rate = 0.5 if (c.model, c.dataset, c.variant) == LOW_VPR_CELL else 0.95
                parsed_conf = bool(rng.random() < rate)
                conf = float(np.clip(0.8 + 0.1 * corr + rng.normal(0, 0.05), 0, 1)) if parsed_conf else math.nan
            else:  # abstention probes: abstain more often on wrong answers
                extras = {"abstain": bool(rng.random() < (0.2 if corr else 0.7))}
                conf = math.nan
                parsed_conf = False
            letter = "ABCD"[(item + int(corr)) % 4]
            recs.append(ExampleRecord(
                cell_id=c.id, model=c.model, dataset=c.dataset, variant=c.variant, protocol=c.protocol,
                evaluator=c.evaluator, item_id=f"{c.dataset}-{item}", item_index=int(item), gold="A", pred=letter,
                parsed=True, parse_rule="first_letter", correct=float(corr), confidence=conf,
                confidence_parsed=parsed_conf and not math.isnan(conf), confidence_kind=ctor, extras=extras,
                request_ids={"answer": f"req-{c.id}-{item}"}, generation=f"{letter}. answer text {item}",
            ))
    return recs


@dataclass
class Run:
    spec: object
    plan: Plan
    run_dir: Path
    report: Path


def build_run(tmp: Path, spec_text: str = SPEC, journal: bool = True) -> tuple[object, Plan, Path]:
    from auditlang.score.cellmetrics import write_cell_metrics

    spec_path = tmp / "audit_test.audit"
    spec_path.write_text(spec_text.replace("DATA", str(DATA)), encoding="utf-8")
    spec = compile_spec(spec_path)
    plan = make_plan(spec, DATA)
    run_dir = tmp / "run"
    run_dir.mkdir()
    records = make_records(spec, plan)
    write_records(run_dir / "records.parquet", records)
    write_cell_metrics(spec, plan, run_dir, records)
    fps = {}
    if journal:
        with Journal(run_dir) as j:
            for m in ("small", "mid"):
                fps[m] = j.register_engine({"engine": "hf", "transformers": "5.19.0", "torch": "2.13.0",
                                            "model": f"org/{m}", "revision": "rev-small" if m == "small" else None,
                                            "dtype": "bfloat16", "device": "cpu", "weights_sha256": "ab" * 32}, m)
    (run_dir / "run.json").write_text(json.dumps({"fingerprints": fps, "spec": str(spec_path), "plan_hash": "testplan"}),
                                      encoding="utf-8")
    (run_dir / "plan.json").write_text(json.dumps(plan.to_dict(include_requests=False)), encoding="utf-8")
    return spec, plan, run_dir
