"""Study 001's disclosure table (§4.3 checklist C1-C4) as the stdlib s001 protocols produce it: a
row for the conditioning context (C4, the largest axis, §4.1) although the verbal-prefix protocol
also sets its prefix template and answer slot, and no logprob window for T1/T2 protocols, which
score the answer span over the full vocabulary."""

from __future__ import annotations

import pytest

from auditlang.report.disclosure import disclosure_table
from auditlang.report.rundata import load_run
from auditlang.resolve import compile_spec
from auditlang.store.records import write_records

from report_fixtures import DATA, make_plan

SPEC = """
import "stdlib/s001"
import "stdlib/metrics"
settings s { seed = 42, data_root = "DATA" }
dataset triviaqa = jsonl("triviaqa.jsonl", task=open_qa, sample=4, seed=42)
model m = hf("org/m-1b", size=1.0, dtype=bf16)
audit main {
  models = [m]
  datasets = [triviaqa]
  variants = [s001.bare]
  protocols = [s001.verbal_self, s001.tok_bare, s001.tok_prefix, s001.tok_bare_t2, s001.tok_bare_gold]
  evaluators = [s001.lenient]
}
compare grid = protocol_grid(main, verbal=s001.verbal_self, configs=[s001.tok_bare, s001.tok_prefix], estimators=[metrics.ece10, metrics.binfree])
"""


@pytest.fixture
def table(tmp_path):
    if not (DATA / "triviaqa.jsonl").exists():
        pytest.skip("../shared/data is not available")
    p = tmp_path / "s001.audit"
    p.write_text(SPEC.replace("DATA", str(DATA)), encoding="utf-8")
    spec = compile_spec(p)
    plan = make_plan(spec, DATA)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_records(run_dir / "records.parquet", [])
    return disclosure_table(load_run(spec, plan, run_dir), "main")


def test_conditioning_context_has_its_own_row(table):
    rows = {r["Axis"]: r for r in table.records()}
    assert "Conditioning context (C4)" in rows, list(rows)
    c4 = rows["Conditioning context (C4)"]
    assert c4["Main setting"] == "context=bare (s001.tok_bare)"
    assert c4["Alternative"].startswith("context=verbal_prefix (prefix=s001.verbalized_prompt, slot=s001.guess_prefix)")
    assert c4["Contrast"] == "g_A vs g_B (grid)"
    assert {"Token readout (C3)", "Token-prob. scored answer (C2)"} <= set(rows)


def test_no_logprob_window_for_span_readouts(table):
    for r in table.records():
        if r["Axis"].startswith(("Token", "Conditioning")):
            assert "top_k=" not in r["Held fixed"] and "window=" not in r["Held fixed"], r
            assert "normalise=" not in r["Held fixed"], r
    # the bare protocols use no verbal prefix: no prefix/prefill held fixed either
    c3 = next(r for r in table.records() if r["Axis"] == "Token readout (C3)")
    assert "prefix=" not in c3["Held fixed"] and "context=bare" in c3["Held fixed"]
