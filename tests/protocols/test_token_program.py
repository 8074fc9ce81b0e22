"""token_prob: first-token p_raw / p_norm (study 000 A.3) and teacher-forced T1 / T2 (study 001 §3.1)."""

from __future__ import annotations

import math

import pytest

from auditlang.core.requests import Result
from auditlang.protocols.base import lead_space

from protocol_helpers import gen_result, make_ctx, read_item, tok

L = math.log


def arc_ctx(chat: bool = True):
    return make_ctx(read_item("arc_challenge", 0), "s000/reasoning/surface_paraphrase", chat=chat)


def trivia_ctx(chat: bool = True):
    return make_ctx(read_item("triviaqa", 0), "s001/bare_query", task="open_qa", chat=chat)


def first_token_result(window: dict[str, float], chosen: str) -> dict[str, Result]:
    return {"first": gen_result(chosen, [tok(chosen, window[chosen], window)])}


def test_first_token_request_is_the_dedicated_one_token_call(sb):
    prog = sb.program("tok", "token_prob", top_k=200)
    ctx = arc_ctx()
    reqs = prog.stage1(ctx)
    assert set(reqs) == set(prog.stage1_roles()) == {"first"}
    r = reqs["first"]
    assert r.kind == "generate"
    assert r.p == {"max_tokens": 1, "top_logprobs": 200, "temperature": 0.0}
    assert r.prompt == ctx.prompt()
    text = r.prompt.messages[-1].content
    assert text.startswith("Answer the following multiple-choice question.")
    assert "Answer with only the letter of the correct option. Answer:" in text
    assert prog.roles2(ctx) == {} and prog.stage2(ctx, {}, "C") == {}


def test_p_raw_and_p_norm_with_missing_labels(sb):
    norm = sb.program("n", "token_prob", top_k=200)
    raw = sb.program("r", "token_prob", top_k=200, normalise="raw")
    ctx = arc_ctx()
    window = {" C": L(0.5), " A": L(0.2), "The": L(0.25)}  # B and D fall outside the window
    res = first_token_result(window, " C")
    out = norm.read(ctx, res, "C", " C")
    assert out.confidence == pytest.approx(0.5 / 0.7)
    assert out.parsed and out.kind == "token_prob"
    assert out.extras["p_raw"] == pytest.approx(0.5)
    assert out.extras["labels_present"] == 2 and out.extras["full_coverage"] is False
    assert out.extras["label_source"] == "evaluator"
    assert raw.read(ctx, res, "C", " C").confidence == pytest.approx(0.5)
    # predicted label valid but outside the window: zero mass in both forms
    out_b = norm.read(ctx, res, "B", " B")
    assert out_b.confidence == 0.0 and out_b.extras["p_raw"] == 0.0


def test_invalid_prediction_falls_back_to_window_argmax(sb):
    prog = sb.program("n", "token_prob")
    ctx = arc_ctx()
    window = {"The": L(0.6), " A": L(0.1), "A": L(0.05), " D": L(0.2)}
    out = prog.read(ctx, first_token_result(window, "The"), "T", "The answer is D")
    assert out.extras["label"] == "D" and out.extras["label_source"] == "window_argmax"
    assert out.confidence == pytest.approx(0.2 / 0.35)  # " A" and "A" are summed into label A


def test_no_valid_label_in_window_is_nan(sb):
    prog = sb.program("n", "token_prob")
    out = prog.read(arc_ctx(), first_token_result({"The": L(0.9), "Let": L(0.05)}, "The"), "T", "The")
    assert math.isnan(out.confidence) and out.parsed is False


def test_open_qa_raw_first_token(sb):
    prog = sb.program("r", "token_prob", normalise="raw")
    ctx = trivia_ctx()
    out = prog.read(ctx, first_token_result({"Ant": L(0.4), "A": L(0.3)}, "Ant"), "Antelope", "Antelope")
    assert out.confidence == pytest.approx(0.4)
    out = sb.program("n", "token_prob").read(ctx, first_token_result({"Ant": L(0.4)}, "Ant"), "Antelope", "x")
    assert math.isnan(out.confidence)


def test_full_window_scores_labels_with_the_engine_spacing(sb):
    prog = sb.program("f", "token_prob", window="full")
    chat, base = arc_ctx(True), arc_ctx(False)
    r_chat = prog.stage1(chat)["choice"]
    assert r_chat.kind == "choice_logprobs" and r_chat.p["choices"] == ("A", "B", "C", "D")
    r_base = prog.stage1(base)["choice"]
    assert r_base.prompt.text.endswith("Answer:") and r_base.p["choices"] == (" A", " B", " C", " D")
    res = {"choice": Result("x", "choice_logprobs", choice_logprobs={" A": L(0.1), " B": L(0.1), " C": L(0.4), " D": L(0.2)})}
    out = prog.read(base, res, "C", " C")
    assert out.confidence == pytest.approx(0.4 / 0.8) and out.extras["full_coverage"] is True
    with pytest.raises(ValueError, match="no choices"):
        prog.stage1(trivia_ctx())


def cont(tokens: list[tuple[str, float]]) -> dict[str, Result]:
    return {"score": Result("x", "continuation_logprobs", continuation=[tok(t, lp) for t, lp in tokens])}


def test_t1_t2_of_the_generated_answer(sb):
    t1 = sb.program("t1", "token_prob", readout="T1")
    t2 = sb.program("t2", "token_prob", readout="T2")
    ctx = trivia_ctx()
    assert t1.stage1(ctx) == {} and t1.roles2(ctx) == {"score": "continuation_logprobs"}
    req = t1.stage2(ctx, {"answer": gen_result("Antelope\n")}, "Antelope")["score"]
    assert req.kind == "continuation_logprobs" and req.p == {"continuation": "Antelope"}
    assert req.prompt == ctx.prompt() and req.prompt.messages[-1].content == "What type of animal is a dik-dik?"
    base = trivia_ctx(chat=False)
    assert t1.stage2(base, {}, "Antelope")["score"].p["continuation"] == " Antelope"
    res = cont([("Ant", -0.5), ("elope", -0.1)])
    assert t1.read(ctx, res, "Antelope", "").confidence == pytest.approx(math.exp(-0.3))
    assert t2.read(ctx, res, "Antelope", "").confidence == pytest.approx(math.exp(-0.5))
    # a whitespace-only leading token is not an answer token
    assert t2.read(ctx, cont([(" ", -2.0), ("Ant", -0.5)]), "Antelope", "").confidence == pytest.approx(math.exp(-0.5))
    # nothing extracted: no request, NaN readout
    assert t1.stage2(ctx, {}, "") == {}
    out = t1.read(ctx, {}, "", "")
    assert math.isnan(out.confidence) and out.parsed is False


def test_teacher_forced_gold_is_stage_one(sb):
    prog = sb.program("g", "token_prob", readout="T1", scored="gold")
    ctx = trivia_ctx()
    assert prog.stage1_roles() == {"score": "continuation_logprobs"} and prog.roles2(ctx) == {}
    assert prog.stage1(ctx)["score"].p["continuation"] == "Antelope"
    assert prog.stage2(ctx, {}, "Zebra") == {}
    mc = prog.stage1(arc_ctx())["score"]
    assert mc.p["continuation"] == "C"  # gold letter for multiple choice


def test_verbal_prefix_context_puts_the_answer_in_the_guess_slot(sb):
    sb.template("verb", file="stdlib:s001/verbalized")
    prog = sb.program("b", "token_prob", readout="T1", context="verbal_prefix", prefix="verb")
    chat = trivia_ctx()
    req = prog.stage2(chat, {}, "Antelope")["score"]
    msgs = req.prompt.messages
    assert [m.role for m in msgs] == ["user", "assistant"] and msgs[1].content == "Guess:"
    assert msgs[0].content.startswith("Provide your best guess and the probability that it is correct (0.0 to 1.0)")
    assert msgs[0].content.endswith("The question is: What type of animal is a dik-dik?")
    assert req.p["continuation"] == " Antelope"
    base = prog.stage2(trivia_ctx(chat=False), {}, "Antelope")["score"]
    assert base.prompt.text.endswith("dik-dik?\nGuess:") and base.p["continuation"] == " Antelope"


def test_inconsistent_axes_are_rejected(sb):
    """Program-side invariants (the resolver reports these as E159: tests/language/test_check_finds_plan_errors.py)."""
    with pytest.raises(AssertionError, match="apply to readout=T1 or T2"):
        sb.program("x", "token_prob", scored="gold")
    sb.template("verb", file="stdlib:s001/verbalized")
    with pytest.raises(AssertionError, match="context=verbal_prefix"):
        sb.program("y", "token_prob", readout="T1", prefix="verb")


def test_lead_space_rule(sb):
    ctx = arc_ctx(True)
    assert lead_space(ctx.prompt()) == ""
    assert lead_space(ctx.prefilled("q", "Guess:")) == " "
    assert lead_space(arc_ctx(False).prompt()) == " "
    assert lead_space(arc_ctx(False).followup(" C", "How sure?")) == ""
