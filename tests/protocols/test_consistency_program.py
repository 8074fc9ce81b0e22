"""self_consistency: k samples and agreement with the reference answer (study 003 App. D.3)."""

from __future__ import annotations

import math

import pytest

from protocol_helpers import make_ctx, read_item, samples_result


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
    assert r.kind == "generate" and r.seed == 7 and r.prompt == ctx.prompt()
    assert r.p == {"n": 10, "temperature": 1.0, "top_p": 1.0, "max_tokens": 32, "top_logprobs": 0}
    assert "Provide your final answer in the following format: \\boxed{A}" in r.prompt.messages[0].content
    assert sb.program("d", "self_consistency").stage1(ctx)["samples"].seed == 42  # model seed by default


def test_agreement_with_first_sample_mc(sb):
    prog = sb.program("sc", "self_consistency")
    texts = ["B"] * 6 + ["C"] * 3 + ["Let me think"]
    out = prog.read(arc_ctx(), {"samples": samples_result(texts)}, "C", "C")
    assert out.confidence == pytest.approx(0.6) and out.parsed and out.extras["reference"] == "B"
    ref = sb.program("sa", "self_consistency", reference="answer")
    assert ref.read(arc_ctx(), {"samples": samples_result(texts)}, "C", "C").confidence == pytest.approx(0.3)


def test_first_sample_not_attempted_skips_the_item(sb):
    prog = sb.program("sc", "self_consistency", k=3)
    out = prog.read(arc_ctx(), {"samples": samples_result(["", "B", "B"])}, "B", "B")
    assert math.isnan(out.confidence) and out.parsed is False


def test_missing_samples_stay_in_the_denominator(sb):
    prog = sb.program("sc", "self_consistency", k=4)
    out = prog.read(arc_ctx(), {"samples": samples_result(["A", "A"])}, "A", "A")
    assert out.confidence == pytest.approx(0.5)


def test_open_qa_normalised_equality_and_custom_extraction(sb):
    prog = sb.program("sc", "self_consistency", k=5)
    texts = ["Antelope", "antelope.", "ANTELOPE!", "An antelope", "Gazelle"]
    ctx = trivia_ctx()
    assert prog.read(ctx, {"samples": samples_result(texts)}, "Antelope", "").confidence == pytest.approx(0.6)
    lenient = prog.read(ctx, {"samples": samples_result(texts)}, "Antelope", "",
                        extract=lambda t: t.strip().lower(), same=lambda a, b: b in a or a in b)
    assert lenient.confidence == pytest.approx(0.8)
    assert prog.accepts_extract
