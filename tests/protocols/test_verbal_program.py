"""verbalized and p_true: layouts (000 / 001 / 003 / 004), provenance, parsing, P(True)."""

from __future__ import annotations

import math

import pytest

from auditlang.core.requests import Result

from protocol_helpers import gen_result, make_ctx, read_item, read_items

L = math.log
DECIMAL_01 = ("Now state your confidence in your answer above as a decimal probability between 0.0 and 1.0. "
              "Reply with only the number, e.g. 0.8.")


def arc_ctx(chat: bool = True, **kw):
    return make_ctx(read_item("arc_challenge", 0), "s000/reasoning/surface_paraphrase", chat=chat, **kw)


def trivia_ctx(index: int = 0, chat: bool = True, **kw):
    return make_ctx(read_item("triviaqa", index), "s001/bare_query", task="open_qa", chat=chat, **kw)


def test_000_followup_embeds_the_models_own_answer(sb):
    sb.template("dec", file="stdlib:s000/confidence/decimal_01")
    prog = sb.program("v", "verbalized", phrasing="dec")
    ctx = arc_ctx()
    assert prog.stage1(ctx) == {} and prog.roles2(ctx) == {"verbal": "generate"}
    req = prog.stage2(ctx, {"answer": gen_result(" C. Planetary days")}, "C")["verbal"]
    assert req.kind == "generate" and req.p == {"max_tokens": 8, "temperature": 0.0, "top_logprobs": 0}
    msgs = req.prompt.messages
    assert [m.role for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0].content == ctx.user_text and msgs[1].content == " C. Planetary days"
    assert msgs[2].content == DECIMAL_01
    base = prog.stage2(arc_ctx(False), {"answer": gen_result(" C")}, "C")["verbal"]
    assert base.prompt.text == arc_ctx(False).user_text + " C\n\n" + DECIMAL_01 + "\n"


@pytest.mark.parametrize("text, conf", [("0.8", 0.8), (" .75", 0.75), ("75%", 0.75)])
def test_decimal_parse(sb, text, conf):
    sb.template("dec", file="stdlib:s000/confidence/decimal_01")
    out = sb.program("v", "verbalized", phrasing="dec").read(arc_ctx(), {"verbal": gen_result(text)}, "C", "C")
    assert out.confidence == pytest.approx(conf) and out.parsed and out.kind == "verbalized"


@pytest.mark.parametrize("text", ["I am fairly sure", "0.7-0.8", "85", ""])
def test_parse_failure_is_nan(sb, text):
    sb.template("dec", file="stdlib:s000/confidence/decimal_01")
    out = sb.program("v", "verbalized", phrasing="dec").read(arc_ctx(), {"verbal": gen_result(text)}, "C", "C")
    assert math.isnan(out.confidence) and out.parsed is False and out.extras["text"] == text


def test_missing_or_failed_result_is_nan(sb):
    sb.template("dec", file="stdlib:s000/confidence/decimal_01")
    prog = sb.program("v", "verbalized", phrasing="dec")
    failed = Result("x", "generate", error="CUDA out of memory")
    for res in ({}, {"verbal": failed}):
        out = prog.read(arc_ctx(), res, "C", "C")
        assert math.isnan(out.confidence) and not out.parsed


def test_003_single_prompt_with_full_response_and_boxed_scale(sb):
    sb.template("v3", file="stdlib:s003/confidence/verbalized")
    prog = sb.program("v", "verbalized", phrasing="v3", scale="boxed_0_100", max_tokens=64,
                      temperature=1.0, top_p=1.0)
    ctx = arc_ctx()
    full = "Faster rotation means shorter days.\n\\boxed{C}"
    req = prog.stage2(ctx, {"answer": gen_result(full)}, "C")["verbal"]
    assert req.p == {"max_tokens": 64, "temperature": 1.0, "top_p": 1.0, "top_logprobs": 0}
    (msg,) = req.prompt.messages
    assert f"Proposed Answer: {full}\nHow confident are you that the proposed answer is correct?" in msg.content
    assert "Confidence: \\boxed{Your confidence score from 0-100.}" in msg.content
    assert "A. Planetary density will decrease." in msg.content
    out = prog.read(ctx, {"verbal": gen_result("Confidence: \\boxed{85}")}, "C", full)
    assert out.confidence == pytest.approx(0.85)


def test_001_joint_parses_guess_and_probability_from_the_answer(sb):
    prog = sb.program("j", "verbalized", mode="joint")
    ctx = trivia_ctx()
    assert prog.stage1(ctx) == {} and prog.roles2(ctx) == {}
    out = prog.read(ctx, {}, "Antelope", "Guess: Antelope\nProbability: 0.9\n")
    assert out.confidence == pytest.approx(0.9) and out.extras["guess"] == "Antelope"
    # the year in the guess does not make the probability multi-valued
    assert prog.read(ctx, {}, "1947", "Guess: 1947\nProbability: 0.6").confidence == pytest.approx(0.6)
    out = prog.read(ctx, {}, "Antelope", "Guess: Antelope")
    assert math.isnan(out.confidence) and out.extras["rule"] == "no_probability_marker"


def test_001_joint_with_its_own_call(sb):
    sb.template("verb", file="stdlib:s001/verbalized")
    prog = sb.program("j", "verbalized", mode="joint", phrasing="verb", max_tokens=32)
    ctx = trivia_ctx()
    req = prog.stage1(ctx)["verbal"]
    assert set(prog.stage1_roles()) == {"verbal"}
    assert req.prompt.messages[0].content.endswith("The question is: What type of animal is a dik-dik?")
    out = prog.read(ctx, {"verbal": gen_result("Guess: antelope\nProbability: 0.85")}, "Antelope", "Antelope")
    assert out.confidence == pytest.approx(0.85) and out.extras["guess"] == "antelope"


def test_001_supplied_gold_in_the_guess_slot(sb):
    sb.template("verb", file="stdlib:s001/verbalized")
    sb.template("pre", file="stdlib:s001/supplied_prefill")
    prog = sb.program("g", "verbalized", phrasing="verb", prefill="pre", provenance="gold")
    ctx = trivia_ctx()
    assert prog.stage1_roles() == {"verbal": "generate"} and prog.roles2(ctx) == {}
    req = prog.stage1(ctx)["verbal"]
    msgs = req.prompt.messages
    assert msgs[-1].role == "assistant" and msgs[-1].content == "Guess: Antelope\nProbability:"
    assert prog.stage2(ctx, {}, "Zebra") == {}
    out = prog.read(ctx, {"verbal": gen_result(" 0.75\nGuess: x\nProbability: 0.1")}, "Zebra", "Zebra")
    assert out.confidence == pytest.approx(0.75) and out.extras["supplied"] == "Antelope"
    base = prog.stage1(trivia_ctx(chat=False))["verbal"]
    assert base.prompt.text.endswith("dik-dik?\nGuess: Antelope\nProbability:")


def test_off_type_and_plausible_wrong_answers(sb):
    pool = read_items("triviaqa", 30)
    sb.template("verb", file="stdlib:s001/verbalized")
    sb.template("pre", file="stdlib:s001/supplied_prefill")
    off = sb.program("o", "verbalized", phrasing="verb", prefill="pre", provenance="off_type")
    ctx = trivia_ctx(extras={"pool": pool})
    ans, used = off.supplied(ctx)
    assert used == "off_type" and ans in {p["answer"] for p in pool[1:]} and ans != "Antelope"
    assert off.supplied(trivia_ctx(extras={"pool": pool})) == (ans, used)  # seeded
    assert f"Guess: {ans}\nProbability:" == off.stage1(ctx)["verbal"].prompt.messages[-1].content
    wrong = sb.program("w", "verbalized", phrasing="verb", prefill="pre", provenance="plausible_wrong")
    # TruthfulQA: one of the item's incorrect answers
    tq = make_ctx(read_item("truthfulqa", 0), "s001/bare_query", task="open_qa")
    ans, used = wrong.supplied(tq)
    assert used == "plausible_wrong" and ans in read_item("truthfulqa", 0)["incorrect_answers"]
    # TriviaQA has none: off-type fallback
    assert wrong.supplied(ctx)[1] == "off_type"
    # multiple choice: a wrong letter
    sb.template("dec", file="stdlib:s000/confidence/decimal_01")
    mc = sb.program("m", "verbalized", phrasing="dec", provenance="plausible_wrong")
    letter, used = mc.supplied(arc_ctx())
    assert used == "plausible_wrong" and letter in {"A", "B", "D"}
    req = mc.stage1(arc_ctx())["verbal"]
    assert req.prompt.messages[1].content == letter


def test_construction_errors(sb):
    """Program-side invariants (the resolver reports these as E159: tests/language/test_check_finds_plan_errors.py)."""
    sb.template("dec", file="stdlib:s000/confidence/decimal_01")
    with pytest.raises(ValueError, match="wrong_from"):  # pydantic: a list is expected
        sb.program("w", "verbalized", phrasing="dec", provenance="plausible_wrong", wrong_from="other")
    with pytest.raises(AssertionError, match="wrong_from"):
        sb.program("w2", "verbalized", phrasing="dec", wrong_from=["other"])
    with pytest.raises(AssertionError, match="needs phrasing"):
        sb.program("f", "verbalized")
    with pytest.raises(AssertionError, match="mode=joint"):
        sb.program("j", "verbalized", mode="joint", provenance="gold")
    with pytest.raises(AssertionError, match="needs template"):
        sb.program("p", "p_true")


def test_p_true_003_reads_raw_probability_of_A(sb):
    sb.template("bv", file="stdlib:s003/confidence/binary_verification")
    raw = sb.program("pt", "p_true", template="bv")
    norm = sb.program("pn", "p_true", template="bv", normalise=True)
    ctx = trivia_ctx()
    assert raw.stage1(ctx) == {} and raw.roles2(ctx) == {"p_true": "choice_logprobs"}
    req = raw.stage2(ctx, {"answer": gen_result("<answer>Antelope</answer>")}, "Antelope")["p_true"]
    assert req.kind == "choice_logprobs" and req.p == {"choices": ("A", "B"), "top_logprobs": 20}
    text = req.prompt.messages[0].content
    assert "Proposed Answer: <answer>Antelope</answer>\nIs the proposed answer:\nA. True\nB. False" in text
    res = {"p_true": Result("x", "choice_logprobs", choice_logprobs={"A": L(0.6), "B": L(0.3)})}
    assert raw.read(ctx, res, "Antelope", "").confidence == pytest.approx(0.6)
    assert norm.read(ctx, res, "Antelope", "").confidence == pytest.approx(0.6 / 0.9)
    base = raw.stage2(trivia_ctx(chat=False), {"answer": gen_result("Antelope")}, "Antelope")["p_true"]
    assert base.p["choices"] == (" A", " B")
    bad = {"p_true": Result("x", "choice_logprobs", choice_logprobs={"A": L(0.6)})}
    assert math.isnan(raw.read(ctx, bad, "Antelope", "").confidence)


def test_p_true_gold_provenance_is_stage_one(sb):
    sb.template("kad", file="stdlib:s002/p_true")
    prog = sb.program("pt", "p_true", template="kad", provenance="gold", answer_form="extracted")
    ctx = trivia_ctx()
    req = prog.stage1(ctx)["p_true"]
    assert "Proposed Answer: Antelope\nIs the proposed answer:" in req.prompt.messages[0].content
    assert prog.stage2(ctx, {}, "x") == {}
