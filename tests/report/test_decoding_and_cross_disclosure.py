"""Checklist and disclosure state decoding, chat-template options and cross-scored answers.

Records are written directly (no engine): two models, two prompts (greedy and sampled answers),
a sampled verbal protocol, a self_consistency sample set grouped by a judge. Every count below is
worked out by hand from the records this file writes.
"""

from __future__ import annotations

import re

import pytest

from auditlang.report.checklist import build_checklist
from auditlang.report.disclosure import disclosure_table
from auditlang.report.rundata import load_run
from auditlang.resolve import compile_spec
from auditlang.store.records import ExampleRecord, write_records

from report_fixtures import DATA, make_plan

SPEC = """
settings s { seed = 42, data_root = "DATA" }
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=4, seed=42)
model a = hf("org/a-1b", size=1.0, enable_thinking=false)
model b = hf("org/b-3b", size=3.0)
model j = hf("org/judge-8b")
template t1 = template("Q: {{ question }} A:")
template t2 = template("Question: {{ question }} Answer:")
template conf = template("Probability between 0.0 and 1.0?")
variant v1 = variant(t1)
variant v2 = variant(t2, temperature=0.7, top_p=0.9, sample_top_k=50)
protocol tb = token_prob(readout=T1, scored=generated, context=bare)
protocol vb = verbalized(scale=decimal_01, phrasing=conf, temperature=1.0)
protocol sc = self_consistency(k=3, temperature=0.7, sample_top_k=20, reference=answer)
evaluator fc = first_char()
evaluator judge = llm_judge(j)
audit main { models = [a, b]  datasets = [arc]  variants = [v1, v2]  protocols = [tb, vb]  evaluators = [fc] }
compare al = aligned(main, pairs=[[a, b]], views=[candidate])
compare rob = robustness(main, variants=[v1, v2], answer=fixed, samples=sc, grouping=judge)
compare rob2 = robustness(main, variants=[v1, v2], samples=sc)
"""

GOLD = "ABCD"


def _records(plan) -> list[ExampleRecord]:
    idx = plan.datasets["arc"]["indices"]
    recs = []
    for c in plan.cells:
        other = "b" if c.model == "a" else "a"
        for k, item in enumerate(idx):
            if c.variant == "v1":
                # the other model's answer (item 3: no confidence), three samples; item 2's judge reply failed
                supplied = [{"source": f"model:{other}", "index": 0, "pred": "A",
                             "confidence": None if k == 3 else 0.5, "correct": float(GOLD[k] == "A")}]
                rule = "evaluator_after_judge_failure" if k == 2 else "judge"
                supplied += [{"source": "samples:sc@judge", "index": s, "pred": "AAB"[s], "confidence": 0.4 + 0.1 * s,
                              "correct": None, "group": "AAB"[s], "group_rule": rule} for s in range(3)]
            else:
                supplied = [{"source": "variant:v1", "index": 0, "pred": "A", "confidence": 0.6,
                             "correct": float(GOLD[k] == "A")}]
            recs.append(ExampleRecord(
                cell_id=c.id, model=c.model, dataset=c.dataset, variant=c.variant, protocol=c.protocol,
                evaluator=c.evaluator, item_id=f"arc-{item}", item_index=int(item), gold=GOLD[k], pred="A",
                parsed=True, parse_rule="first", correct=float(GOLD[k] == "A"), confidence=0.7, confidence_parsed=True,
                confidence_kind="seq_prob", extras={"supplied": supplied}, request_ids={"answer": f"r-{c.id}-{k}"},
                generation="A"))
    return recs


@pytest.fixture
def rd(tmp_path):
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    p = tmp_path / "dec.audit"
    p.write_text(SPEC.replace("DATA", str(DATA)), encoding="utf-8")
    spec = compile_spec(p)
    plan = make_plan(spec, DATA)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_records(run_dir / "records.parquet", _records(plan))
    out = load_run(spec, plan, run_dir)
    out.fingerprints = {"a": {"engine": "vllm", "chat_template_kwargs": {"enable_thinking": False}},
                        "b": {"engine": "hf"}}
    return out


def _entry(cl, group_prefix: str, key: str):
    g = next(g for g in cl.groups if g.title.startswith(group_prefix))
    return next(e for e in g.entries if e.key == key)


def test_answer_and_protocol_decoding(rd):
    cl = build_checklist(rd, [])
    e = _entry(cl, "Audit main: shared", "sampling")
    text = "\n".join(e.lines)
    # 2 models x 4 items = 8 unique answer requests per variant
    assert re.search(r"answers under variant v1: greedy \(temperature 0; top_p and sampling top-k do not apply\), "
                     r"at most (\d+) new tokens \(max_tokens=\1\); all 8 unique planned requests decode this way", text)
    assert re.search(r"answers under variant v2: sampled: temperature 0.7, top_p 0.9, sampling top-k 50, "
                     r"at most (\d+) new tokens \(max_tokens=\1\); all 8 unique planned requests decode this way", text)
    assert e.flags == ["UNSPECIFIED: variant 'v1' does not set temperature (answer decoding temperature); "
                       "the default 0.0 was used"]
    vb = _entry(cl, "Audit main, cells of protocol vb", "sampling")
    assert vb.lines == ["verbal-confidence call of vb (verbalized): sampled: temperature 1, top_p 1, sampling top-k off, "
                        "at most 8 new tokens (max_tokens=8)"]
    assert [f.split(";")[0] for f in vb.flags] == [
        "UNSPECIFIED: protocol 'vb' does not set top_p (verbal-confidence call top_p)",
        "UNSPECIFIED: protocol 'vb' does not set sample_top_k (verbal-confidence call sample_top_k)"]
    tb = _entry(cl, "Audit main, cells of protocol tb", "sampling")
    assert tb.lines[0].startswith("not applicable to token_prob") and not tb.flags


def test_chat_template_options(rd):
    e = _entry(build_checklist(rd, []), "Run", "chat")
    assert e.lines == [
        "model a: chat-template options enable_thinking=False (passed to the engine as chat_template_kwargs); "
        "the engine fingerprint records enable_thinking=False",
        "model b: no chat-template options set (enable_thinking, reasoning_effort not passed): the chat template's "
        "own defaults apply"]
    assert not e.flags
    rd.fingerprints["a"] = {"engine": "hf"}  # an engine that did not record (apply) them
    e = _entry(build_checklist(rd, []), "Run", "chat")
    assert e.flags == ["WARNING: model 'a' sets chat-template options (enable_thinking=False) but its engine "
                       "fingerprint ('hf') records none; the engine may not have applied them"]


def test_cross_scored_answers(rd):
    e = _entry(build_checklist(rd, []), "Audit main: shared", "cross")
    text = "\n".join(e.lines)
    # CA: 2 models x 2 protocols x 4 items entries, item 3 without a confidence
    assert "in each pair (a, b) each model scores the other model's answer to the same item" in text
    assert "confidence reads the answer: tb, vb" in text
    assert "records: 16 scored answers of the other model (extras 'supplied', source model:...), 4 without a confidence" in text
    # fixed-answer P-RB
    assert "the answer each model generated under v1 is re-scored by the same model under v2 (fixed answer" in text
    assert "records: 16 scored fixed answers from v1" in text
    # samples: K, decoding, grouping method and shares over 2 models x 4 items x 3 samples distinct samples
    assert ("K=3 answers sampled by sc under v1 (sampled n=3: temperature 0.7, top_p 1, sampling top-k 20, "
            "seed the model seed)") in text
    assert "samples grouped by meaning with judge evaluator judge (llm_judge" in text
    assert ("records: 48 scored samples, 0 without a confidence; grouping of the 24 distinct samples: 18 of 24 (75.0%) "
            "by the judge; 6 of 24 (25.0%) by the evaluator after a judge reply that did not parse") in text
    flags = "\n".join(e.flags)
    assert "WARNING: comparison 'rob': 6 of 24 sampled answers were grouped by the evaluator" in flags
    assert "UNSPECIFIED: protocol 'sc' does not set top_p (sampled answers' top_p)" in flags
    # rob2 leaves answer and grouping unset; rob sets both
    assert "UNSPECIFIED: compare 'rob2' does not set answer (which answer P-RB scores); the default 'fixed' was used" in flags
    assert "UNSPECIFIED: compare 'rob2' does not set grouping" in flags
    assert "compare 'rob' does not set" not in flags


def test_disclosure_notes(rd):
    t = disclosure_table(rd, "main")
    rows = [r for r in t.rows if r[0] == "Answer decoding"]
    assert rows and rows[0][1] == "greedy (temperature 0; top_p and sampling top-k do not apply) (v1)"
    assert rows[0][2] == "sampled: temperature 0.7, top_p 0.9, sampling top-k 50 (v2)"
    notes = "\n".join(t.notes)
    # a default left unset is the checklist's UNSPECIFIED item, not a mark in the paper table (issue 34 item 5)
    assert ("Answer decoding: v1: greedy (temperature 0; top_p and sampling top-k do not apply); "
            "v2: sampled: temperature 0.7, top_p 0.9, sampling top-k 50.") in notes
    assert "Protocol calls: vb: sampled: temperature 1, top_p 1, sampling top-k off." in notes
    assert "UNSPECIFIED" not in notes
    assert "Chat-template options: a: enable_thinking=False; not set for b." in notes
    assert "Cross-scored answers: al: CA pools each model's own answer with its pair model's answer" in notes
    assert ("Cross-scored answers: rob: P-RB scores the answer generated under v1 under every prompt; A-STB/A-SST over "
            "K=3 samples of sc under v1 (sampled n=3: temperature 0.7, top_p 1, sampling top-k 20), grouped by judge, "
            "18 of 24 samples grouped by the judge.") in notes


def test_share_of_items_qualifying_for_stability_and_sensitivity(rd):
    # 002 eq. 4: A-STB averages over items whose largest group holds more than one answer; eqs. 5-7:
    # A-SST over items with two or more groups. Every item's samples here are A, A, B: all qualify.
    from auditlang.report.comparisons import compute_all

    comps = compute_all(rd)
    rob = next(c for c in comps if c.name == "rob")
    rows = rob.tables[0].records()
    assert rows and all(r["A-STB share of items qualifying"] == 1.0 for r in rows)
    assert all(r["A-SST share of items qualifying"] == 1.0 for r in rows)
    text = "\n".join(_entry(build_checklist(rd, comps), "Audit main: shared", "cross").lines)
    assert "comparison rob: A-STB: on average 100.0% of the items qualify" in text
    assert "comparison rob: A-SST: on average 100.0% of the items qualify" in text
