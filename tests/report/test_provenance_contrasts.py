"""Study 001's supplied-answer analysis (§3.3, App. H Tables 13-15): mean confidence under gold /
plausible-wrong / off-type answers and the paired contrasts, hand-computed on four items."""

from __future__ import annotations

import math

import pytest

from auditlang.report.comparisons import compute_all
from auditlang.report.rundata import load_run
from auditlang.resolve import compile_spec
from auditlang.store.records import ExampleRecord, write_records

from report_fixtures import DATA, make_plan

SPEC = """
import "stdlib/s001"
settings s { seed = 42, data_root = "DATA" }
dataset triviaqa = jsonl("triviaqa.jsonl", task=open_qa, sample=4, seed=42)
model m = hf("org/m-1b", size=1.0, dtype=bf16)
protocol pw = s001.verbal_plausible_wrong with (wrong_from=[m2])
model m2 = hf("org/m2-1b", size=1.0, dtype=bf16)
audit supplied {
  models = [m, m2]
  datasets = [triviaqa]
  variants = [s001.bare]
  protocols = [s001.verbal_self, s001.verbal_gold, pw, s001.verbal_off_type]
  evaluators = [s001.lenient]
  bootstrap = bootstrap(resamples=200, seed=42)
}
compare prov = provenance(supplied, own=s001.verbal_self, gold=s001.verbal_gold, plausible=pw, off_type=s001.verbal_off_type)
"""

# item k: (own answer, correct?, conf self, gold, plausible, off-type); item 3's self confidence did not parse
ROWS = [("GOLD", 1.0, 0.9, 0.8, 0.5, 0.1),     # correct, same string as the gold
        ("other words", 1.0, 0.7, 0.9, 0.6, 0.2),  # correct, a different string
        ("wrong", 0.0, 0.6, 0.7, 0.3, 0.0),     # wrong
        ("wrong", 0.0, math.nan, 0.5, 0.4, 0.1)]


@pytest.fixture
def prov(tmp_path):
    if not (DATA / "triviaqa.jsonl").exists():
        pytest.skip("../shared/data is not available")
    p = tmp_path / "p.audit"
    p.write_text(SPEC.replace("DATA", str(DATA)), encoding="utf-8")
    spec = compile_spec(p)
    plan = make_plan(spec, DATA)
    idx = plan.datasets["triviaqa"]["indices"]
    col = {"s001.verbal_self": 2, "s001.verbal_gold": 3, "pw": 4, "s001.verbal_off_type": 5}
    recs = []
    for c in plan.cells:
        if c.model != "m":
            continue
        for k, item in enumerate(idx):
            own, z = ROWS[k][0], ROWS[k][1]
            conf = ROWS[k][col[c.protocol]]
            recs.append(ExampleRecord(
                cell_id=c.id, model=c.model, dataset=c.dataset, variant=c.variant, protocol=c.protocol,
                evaluator=c.evaluator, item_id=f"t-{item}", item_index=int(item), gold="Gold", pred=own.lower()
                if own == "GOLD" else own, parsed=True, parse_rule="first_line", correct=z, confidence=conf,
                confidence_parsed=not math.isnan(conf), confidence_kind="verbalized", extras={},
                request_ids={"answer": f"r-{k}"}, generation=own))
    (tmp_path / "run").mkdir()
    write_records(tmp_path / "run" / "records.parquet", recs)
    return next(c for c in compute_all(load_run(spec, plan, tmp_path / "run")) if c.name == "prov")


def test_means_and_paired_contrasts_by_hand(prov):
    row = next(r for r in prov.tables[0].records() if r["model"] == "m")
    assert row["self"] == pytest.approx((0.9 + 0.7 + 0.6) / 3)  # parsed rows only
    assert row["gold"] == pytest.approx((0.8 + 0.9 + 0.7 + 0.5) / 4)
    assert row["plaus."] == pytest.approx((0.5 + 0.6 + 0.3 + 0.4) / 4)
    assert row["off-type"] == pytest.approx(0.1)
    # Table 14: gold - plaus. over every item; self - gold on correct answers, split by whether the
    # answer string equals the gold ("gold" == "GOLD" after normalisation); gold - self when wrong
    assert row["gold - plaus."] == pytest.approx(((0.3) + (0.3) + (0.4) + (0.1)) / 4)
    assert row["self - gold, diff. strings"] == pytest.approx(0.7 - 0.9)
    assert row["self - gold, exact match"] == pytest.approx(0.9 - 0.8)
    assert row["gold - self, initially wrong"] == pytest.approx(0.7 - 0.6)  # item 3: self unparsed


def test_pooled_contrasts_have_intervals(prov):
    pooled = {r["contrast"]: r for r in prov.tables[1].records()}
    g = pooled["gold - plaus."]
    assert g["n"] == 4 and g["mean"] == pytest.approx(0.275) and g["lo"] <= g["mean"] <= g["hi"]
    assert pooled["self - gold, diff. strings"]["n"] == 1 and math.isnan(pooled["self - gold, diff. strings"]["lo"])
