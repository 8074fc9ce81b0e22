"""Study 004 probes (NOTA, MoreInfo, SelfRef, AskCal, TokProb, Embedding) and Platt scaling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from auditlang.metrics.platt import fit_platt
from auditlang.core.requests import Result
from auditlang.prompts.perturb import one_shot
from auditlang.protocols.base import Readout
from auditlang.protocols.probes import parse_true_false, parse_yes_no

from protocol_helpers import gen_result, make_ctx, read_item, tok

L = math.log


def mmlu_ctx(chat: bool = True, oneshot: bool = False):
    item = read_item("mmlu", 3)
    if oneshot:
        item = one_shot(item, 4, bank="mmlu", index=0)
    return make_ctx(item, "s004/mc/tokprob_oneshot" if oneshot else "s004/mc/tokprob", chat=chat)


def answer(text: str = " B") -> dict[str, Result]:
    return {"answer": gen_result(text)}


# ----------------------------------------------------------------------------- NOTA


def test_nota_prompt_appends_the_extra_option(sb):
    prog = sb.program("nota", "nota")
    ctx = mmlu_ctx()
    req = prog.stage1(ctx)["nota"]
    assert set(prog.stage1_roles()) == {"nota"}
    text = req.prompt.messages[0].content
    assert text.startswith("The question is: ")
    assert text.endswith("E: None of the above Choose one answer from the above choices. Guess:")
    assert req.p == {"max_tokens": 16, "temperature": 0.0, "top_logprobs": 0}
    sampled = sb.program("n2", "nota", temperature=0.1, top_p=0.9).stage1(ctx)["nota"]
    assert sampled.p["temperature"] == 0.1 and sampled.p["top_p"] == 0.9
    with pytest.raises(ValueError, match="multiple-choice"):
        prog.stage1(make_ctx(read_item("triviaqa", 0), "s001/bare_query", task="open_qa"))


@pytest.mark.parametrize("reply, abstain, parsed", [(" E", True, True), ("E: None of the above", True, True),
                                                    (" C", False, True), ("hmm", False, False)])
def test_nota_abstains_iff_the_extra_option_is_chosen(sb, reply, abstain, parsed):
    out = sb.program("nota", "nota").read(mmlu_ctx(), {"nota": gen_result(reply)}, "C", " C")
    assert out.abstain is abstain and out.parsed is parsed and math.isnan(out.confidence)
    assert out.extras["nota_label"] == "E"


def test_one_shot_items_use_the_one_shot_template(sb):
    ctx = mmlu_ctx(oneshot=True)
    text = sb.program("nota", "nota").stage1(ctx)["nota"].prompt.messages[0].content
    assert text.count("None of the above") == 2 and text.count("The question is:") == 2
    ask = sb.program("ask", "ask_cal").stage2(ctx, answer(), "B")["ask_cal"].prompt.messages[0].content
    assert "explanation.For example: Probability: <the probability" in ask and "Probability: 1.0\n" in ask


# ----------------------------------------------------------------------------- MoreInfo / SelfRef


def test_moreinfo_is_a_followup_with_the_guess(sb):
    prog = sb.program("mi", "more_info")
    ctx = mmlu_ctx()
    assert prog.stage1(ctx) == {} and prog.roles2(ctx) == {"more_info": "generate"}
    text = prog.stage2(ctx, answer(" B"), "B")["more_info"].prompt.messages[0].content
    assert text.endswith("Guess: B Do you need more information to answer this question? (Yes or No)")
    assert prog.stage2(ctx, answer("   "), None) == {}
    for reply, abstain, parsed in (("Yes", True, True), (" no.", False, True), ("Maybe", False, False)):
        out = prog.read(ctx, {"more_info": gen_result(reply)}, "B", " B")
        assert (out.abstain, out.parsed) == (abstain, parsed)


def test_selfref_prompt_and_decision(sb):
    prog = sb.program("sr", "self_ref")
    ctx = mmlu_ctx()
    text = prog.stage2(ctx, answer(" B"), "B")["self_ref"].prompt.messages[0].content
    assert text.endswith("Guess: B\nThe above answer is: A. True B. False The answer is")
    assert prog.read(ctx, {"self_ref": gen_result(" B. False")}, "B", "B").abstain is True
    assert prog.read(ctx, {"self_ref": gen_result(" A")}, "B", "B").abstain is False
    unread = prog.read(ctx, {"self_ref": gen_result("I cannot tell")}, "B", "B")
    assert unread.abstain is False and unread.parsed is False


@pytest.mark.parametrize("text, want", [("A", "A"), ("(B) False", "B"), (" true", "A"), ("False.", "B"),
                                        ("Answer: B", "B"), ("Answer", None), ("It is A or B", None)])
def test_parse_true_false(text, want):
    assert parse_true_false(text)[0] == want


def test_parse_yes_no():
    assert parse_yes_no("**Yes**, I do")[0] == "yes"
    assert parse_yes_no("Not sure")[0] is None
    assert parse_yes_no("Nope")[0] is None


# ----------------------------------------------------------------------------- thresholded probes


def dev_rows(conf, correct):
    return [{"confidence": c, "correct": z, "extras": {}} for c, z in zip(conf, correct)]


def test_askcal_reads_the_probability_and_thresholds_on_dev(sb):
    prog = sb.program("ask", "ask_cal")
    assert prog.needs_dev
    ctx = mmlu_ctx()
    text = prog.stage2(ctx, answer(" B"), "B")["ask_cal"].prompt.messages[0].content
    assert text.endswith("Guess: B Provide the probability that your guess is correct. Give ONLY the probability, "
                         "no other words or explanation.For example: Probability: <the probability between 0.0 and "
                         "1.0 that your guess is correct, without any extra commentary whatsoever; just the "
                         "probability!> Probability:")
    r = prog.read(ctx, {"ask_cal": gen_result(" 0.7\nThe question is: ...")}, "B", "B")
    assert r.confidence == pytest.approx(0.7) and r.abstain is None
    # NaN confidence and unknown correctness (None, or NaN from an undecided judge) are left out
    fitted = prog.fit(dev_rows([0.2, 0.4, 0.6, 0.8, math.nan, 0.9, 0.95], [0.0, 0.0, 1.0, 1.0, 1.0, None, math.nan]))
    assert fitted["threshold"] == pytest.approx(0.6) and fitted["dev_size"] == 4 and not fitted["corrected"]
    assert prog.apply(fitted, r).abstain is False
    assert prog.apply(fitted, Readout(0.5, True, "ask_cal")).abstain is True
    assert prog.apply(fitted, Readout(math.nan, False, "ask_cal")).abstain is None


def test_threshold_correction_rule(sb):
    rows = dev_rows([0.97, 0.98, 0.99], [False, False, True])
    on = sb.program("a", "ask_cal").fit(rows)
    off = sb.program("b", "ask_cal", correction=False).fit(rows)
    assert on["threshold"] == 0.5 and on["corrected"] and on["fitted"] == pytest.approx(0.99)
    assert off["threshold"] == pytest.approx(0.99)
    # every test readout records the threshold used, the fitted one and whether the 0.5
    # correction fired (004 §5.5), for the checklist
    x = sb.program("a2", "ask_cal").apply(on, Readout(0.7, True, "ask_cal")).extras
    assert x["threshold"] == 0.5 and x["threshold_fitted"] == pytest.approx(0.99) and x["threshold_corrected"] is True
    assert x["threshold_dev_size"] == 3
    with pytest.raises(ValueError, match="nothing to fit"):
        sb.program("c", "ask_cal").fit(dev_rows([math.nan], [True]))


def test_tokprob_probe(sb):
    prog = sb.program("tp", "tok_prob_probe", top_k=20)
    ctx = mmlu_ctx()
    req = prog.stage1(ctx)["first"]
    assert req.kind == "generate" and req.p == {"max_tokens": 1, "top_logprobs": 20, "temperature": 0.0}
    window = {" B": L(0.6), " C": L(0.3)}
    out = prog.read(ctx, {"first": gen_result(" B", [tok(" B", L(0.6), window)])}, "B", " B")
    assert out.confidence == pytest.approx(0.6)  # raw, not normalised
    fitted = prog.fit(dev_rows([0.3, 0.5, 0.7, 0.9], [False, True, True, True]))
    assert fitted["threshold"] == pytest.approx(0.5)
    assert prog.apply(fitted, out).abstain is False


# ----------------------------------------------------------------------------- embedding


def test_embedding_requests(sb):
    ctx = mmlu_ctx()
    prog = sb.program("e", "embedding_probe", layer=-2)
    assert prog.stage1(ctx) == {} and prog.roles2(ctx) == {"hidden": "hidden_states"}
    req = prog.stage2(ctx, answer(" B"), "B")["hidden"]
    assert req.kind == "hidden_states" and req.p == {"layer": -2}
    assert req.prompt.messages[-1].role == "assistant" and req.prompt.messages[-1].content == " B"
    base = prog.stage2(mmlu_ctx(chat=False), answer(" B"), "B")["hidden"]
    assert base.prompt.text.endswith("Guess: B")
    bare = sb.program("e2", "embedding_probe", with_answer=False)
    assert bare.stage1(ctx)["hidden"].prompt == ctx.prompt() and bare.roles2(ctx) == {}


def test_embedding_probe_fit_matches_sklearn(sb):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    y = np.array([1, 0] * 30)
    x = rng.normal(size=(60, 3)) + np.outer(y, [1.5, -1.0, 0.0])
    prog = sb.program("e", "embedding_probe", C=0.5)
    ctx = mmlu_ctx()
    readouts = [prog.read(ctx, {"hidden": Result("h", "hidden_states", hidden_state=list(v))}, "B", "B") for v in x]
    assert all(math.isnan(r.confidence) and r.parsed for r in readouts)
    rows = [{"confidence": r.confidence, "correct": bool(z), "extras": r.extras} for r, z in zip(readouts, y)]
    fitted = prog.fit(rows)
    assert fitted == prog.fit(rows)  # deterministic
    z = (x - x.mean(0)) / x.std(0)
    ref = LogisticRegression(C=0.5, tol=1e-10, max_iter=10_000).fit(z, y)
    np.testing.assert_allclose(fitted["coef"], ref.coef_[0], atol=1e-4)
    assert fitted["intercept"] == pytest.approx(ref.intercept_[0], abs=1e-4)
    applied = [prog.apply(fitted, r) for r in readouts]
    p_ref = ref.predict_proba(z)[:, 1]
    np.testing.assert_allclose([a.confidence for a in applied], p_ref, atol=1e-4)
    assert [a.abstain for a in applied] == list(p_ref < 0.5)
    assert "hidden" not in applied[0].extras
    # the fit's size is in every applied record: the checklist reads it (issue 23: "not computable" for cells that fitted)
    assert all(a.extras["n_train"] == 60 and a.extras["converged"] is True for a in applied)
    with pytest.raises(ValueError, match="both outcomes"):
        prog.fit([{**row, "correct": True} for row in rows])


# ----------------------------------------------------------------------------- Platt


def test_platt_wraps_the_base_protocol(sb):
    sb.add("tok", "protocol", "token_prob", top_k=20)
    prog = sb.program("ps", "platt", base="tok")
    ctx = mmlu_ctx()
    assert prog.needs_dev and prog.stage1(ctx) == {"first": prog.base.stage1(ctx)["first"]}
    window = {" B": L(0.6), " C": L(0.2)}
    r = prog.read(ctx, {"first": gen_result(" B", [tok(" B", L(0.6), window)])}, "B", " B")
    assert r.kind == "platt" and r.confidence == pytest.approx(0.75)
    conf = [0.2, 0.3, 0.5, 0.6, 0.7, 0.9, 0.95, 0.4]
    corr = [False, False, True, False, True, True, True, False]
    fitted = prog.fit(dev_rows(conf, corr))
    ref = fit_platt(conf, corr)
    assert fitted["a"] == pytest.approx(ref.a) and fitted["b"] == pytest.approx(ref.b)
    out = prog.apply(fitted, r)
    assert out.confidence == pytest.approx(float(ref.apply([0.75])[0]))
    assert out.extras["base_confidence"] == pytest.approx(0.75)


def test_platt_rejects_fitted_bases(sb):
    """Program-side invariants (the resolver reports these as E159: tests/language/test_check_finds_plan_errors.py)."""
    sb.add("emb", "protocol", "embedding_probe")
    with pytest.raises(AssertionError, match="itself fitted"):
        sb.program("ps", "platt", base="emb")
