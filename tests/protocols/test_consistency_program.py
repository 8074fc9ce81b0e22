"""self_consistency: k runs and agreement with run 1, the scored answer (study 003 App. D.3).

003 App. D.3: "we generate 10 independent responses for each question ... The confidence of an
example is defined as the fraction of runs whose extracted answer matches the extracted answer
from the first run", c_i = sum_{k=1..10} 1[a_k = a_1] / 10. Run 1 is the scored answer (one
accuracy per model for all three methods, Tables 10-14), so the protocol samples 9 more."""

from __future__ import annotations

import hashlib
import math

import pytest

from protocol_helpers import make_ctx, read_item, samples_result

from auditlang.protocols.base import supplied_result


def arc_ctx():
    return make_ctx(read_item("arc_challenge", 0), "s003/answer/multiple_choice")


def trivia_ctx():
    return make_ctx(read_item("triviaqa", 0), "s003/answer/open_ended", task="open_qa")


def test_samples_request(sb):
    prog = sb.program("sc", "self_consistency", k=10, temperature=1.0, top_p=1.0, seed=7)
    ctx = arc_ctx()
    reqs = prog.stage1(ctx)
    assert set(reqs) == set(prog.stage1_roles()) == {"samples"}
    r = reqs["samples"]
    # the seed is per item and purpose (SHA-256 of base seed, item id, "request:self_consistency")
    item_id = ctx.item["id"]
    assert r.kind == "generate" and r.seed == expected_seed(7, item_id, "self_consistency") and r.prompt == ctx.prompt()
    # 003 App. D.3: 10 responses in all = the scored answer (run 1) + 9 samples, never 11
    assert r.p == {"n": 9, "temperature": 1.0, "top_p": 1.0, "max_tokens": 32, "top_logprobs": 0}
    assert prog.sample_count() == 9
    ref = sb.program("sa", "self_consistency", k=10, reference="answer")
    assert ref.stage1(ctx)["samples"].p["n"] == 10 and ref.sample_count() == 10
    assert "Provide your final answer in the following format: \\boxed{A}" in r.prompt.messages[0].content
    # the model seed is the base by default
    assert sb.program("d", "self_consistency").stage1(ctx)["samples"].seed == expected_seed(42, item_id, "self_consistency")
    # a sampled scored answer (003's T=1 variant) has another seed: sample 1 is not a copy of it
    ctx.extras.update(temperature=1.0, top_p=1.0)
    answer = ctx.answer_request()
    assert answer.seed == expected_seed(42, item_id, "answer") != r.seed
    assert make_ctx(read_item("arc_challenge", 1), "s003/answer/multiple_choice").item["id"] != item_id
    other = prog.stage1(make_ctx(read_item("arc_challenge", 1), "s003/answer/multiple_choice"))["samples"]
    assert other.seed != r.seed  # and no two items share a random stream


def expected_seed(base: int, item_id: str, purpose: str) -> int:
    digest = hashlib.sha256(f"{base}\x1f{item_id}\x1frequest:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 2**63


def runs(answer: str, samples: list[str]) -> dict:
    """Stage-1 results: the scored answer (run 1) and the protocol's samples (runs 2..k)."""
    return {"answer": supplied_result(answer), "samples": samples_result(samples)}


def test_agreement_with_first_run_mc(sb):
    # run 1 = the scored answer "B"; runs 2..10: 5 B, 3 C, 1 unparsed -> (1 + 5) / 10
    prog = sb.program("sc", "self_consistency")
    texts = ["B"] * 5 + ["C"] * 3 + ["Let me think"]
    out = prog.read(arc_ctx(), runs("B", texts), "B", "B")
    assert out.confidence == pytest.approx(0.6) and out.parsed and out.extras["reference"] == "B"
    assert out.extras["answers"][0] == "B" and out.extras["k"] == 10
    # run 1 counts itself: all 9 samples disagree -> 1/10, not 0
    assert prog.read(arc_ctx(), runs("D", texts), "D", "D").confidence == pytest.approx(0.1)
    ref = sb.program("sa", "self_consistency", reference="answer")
    texts10 = ["B"] * 6 + ["C"] * 3 + ["Let me think"]
    assert ref.read(arc_ctx(), runs("C", texts10), "C", "C").confidence == pytest.approx(0.3)


def test_first_run_not_attempted_skips_the_item(sb):
    # 003: "If an example is marked as is_attempted=False in the first run, we skip it."
    prog = sb.program("sc", "self_consistency", k=3)
    out = prog.read(arc_ctx(), runs("", ["B", "B"]), None, "")
    assert math.isnan(out.confidence) and out.parsed is False
    out = prog.read(arc_ctx(), {"samples": samples_result(["B", "B"])}, "B", "B")  # no scored answer
    assert math.isnan(out.confidence) and out.parsed is False


def test_missing_samples_stay_in_the_denominator(sb):
    # 003: "If the answer is missing in later runs, the denominator remains 10."
    prog = sb.program("sc", "self_consistency", k=4)
    out = prog.read(arc_ctx(), runs("A", ["A"]), "A", "A")  # 2 of 4 runs returned
    assert out.confidence == pytest.approx(0.5) and out.extras["samples_returned"] == 1
    out = prog.read(arc_ctx(), runs("A", ["A", "", "A"]), "A", "A")
    assert out.confidence == pytest.approx(0.75)


def test_candidate_is_compared_with_all_k_runs(sb):
    # CA view: another model's candidate against the model's own 10 runs (answer + 9 samples)
    prog = sb.program("sc", "self_consistency")
    out = prog.read_candidate(arc_ctx(), runs("C", ["C"] * 4 + ["B"] * 5), "C", "C")
    assert out.confidence == pytest.approx(0.5)


def test_open_qa_normalised_equality_and_custom_extraction(sb):
    prog = sb.program("sc", "self_consistency", k=5)
    texts = ["antelope.", "ANTELOPE!", "An antelope", "Gazelle"]
    ctx = trivia_ctx()
    assert prog.read(ctx, runs("Antelope", texts), "Antelope", "Antelope").confidence == pytest.approx(0.6)
    lenient = prog.read(ctx, runs("Antelope", texts), "Antelope", "Antelope",
                        extract=lambda t: t.strip().lower(), same=lambda a, b: b in a or a in b)
    assert lenient.confidence == pytest.approx(0.8)
    assert prog.accepts_extract
