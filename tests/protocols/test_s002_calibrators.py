"""Study 002's Calib1 (auxiliary classifier with focal loss), random baseline BL and GPT-4o's
Prob. from the generated output's own logprobs (002 §5 "Evaluated Methods", App. A.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from protocol_helpers import gen_result, make_ctx, read_item, tok

from auditlang.metrics.aux_classifier import _objective, fit_aux_classifier, focal_loss, text_features


def trivia_ctx(variant: str = "v"):
    ctx = make_ctx(read_item("triviaqa", 0), "s002/answer/A1", task="open_qa")
    ctx.variant = variant
    return ctx


# ----------------------------------------------------------------------------- BL


def test_random_baseline_is_uniform_seeded_and_model_free(sb):
    # 002 §5: "a random baseline (BL) that predicts uniform random confidence"; Table 6 gives the
    # same BL P-RB (0.728) for all nine models: the draw does not depend on the model
    prog = sb.program("bl", "random_baseline", seed=42)
    ctx = trivia_ctx()
    a = prog.read(ctx, {}, "Paris", "Paris")
    assert 0 <= a.confidence < 1 and a.parsed and a.kind == "random_baseline"
    assert prog.read(ctx, {}, "Paris", "Paris").confidence == a.confidence  # reproducible
    ctx.model = type(ctx.model)("other", True, 32, 7)
    assert prog.read(ctx, {}, "Paris", "Paris").confidence == a.confidence  # model-free
    # a new draw under another prompt (P-RB < 1) and for another answer (A-STB < 1)
    assert prog.read(trivia_ctx("v2"), {}, "Paris", "Paris").confidence != a.confidence
    assert prog.read_candidate(ctx, {}, "Lyon", "Lyon").confidence != a.confidence
    assert sb.program("bl7", "random_baseline", seed=7).read(ctx, {}, "Paris", "Paris").confidence != a.confidence
    assert prog.answer_conditioned() and not prog.needs_dev


def test_random_baseline_draws_are_uniform(sb):
    from auditlang.protocols.calibrators import uniform_draw

    x = np.array([uniform_draw(42, "d", "v", str(i), "a") for i in range(4000)])
    # Kolmogorov-Smirnov against U(0,1) (scipy as the independent reference)
    from scipy import stats

    assert stats.kstest(x, "uniform").pvalue > 0.01
    assert abs(x.mean() - 0.5) < 0.02


# ----------------------------------------------------------------------------- Calib1


def test_focal_loss_hand_computed():
    # FL = -(1 - p_t)^gamma log p_t (Mukhoti et al. 2020)
    p, y = np.array([0.9, 0.2]), np.array([1, 1])
    want = np.mean([-(0.1 ** 2) * math.log(0.9), -(0.8 ** 2) * math.log(0.2)])
    assert focal_loss(p, y, 2.0) == pytest.approx(want, abs=1e-12)
    assert focal_loss(np.array([0.3]), np.array([0]), 0.0) == pytest.approx(-math.log(0.7), abs=1e-12)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0])
def test_focal_objective_gradient_matches_finite_differences(gamma):
    from scipy.optimize import check_grad

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 6)), (rng.random(40) < 0.4).astype(float)
    f = lambda t: _objective(t, x, y, gamma, 1e-2)[0]  # noqa: E731
    g = lambda t: _objective(t, x, y, gamma, 1e-2)[1]  # noqa: E731
    assert check_grad(f, g, rng.normal(size=7) * 0.3) < 1e-5


def test_gamma_zero_is_sklearn_logistic_regression():
    # gamma = 0 is the log loss: mean logloss + l2/2 |w|^2 == sklearn's C = 1 / (n l2), bias unpenalised
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    words = ["paris", "london", "rome", "berlin", "madrid", "oslo", "unknown", "maybe"]
    texts = [" ".join(rng.choice(words, size=4)) for _ in range(120)]
    y = np.array([int("paris" in t or "rome" in t) for t in texts])
    l2, dims = 1e-2, 64
    clf = fit_aux_classifier(texts, y, dims=dims, gamma=0.0, l2=l2)
    ref = LogisticRegression(C=1 / (len(y) * l2), tol=1e-10, max_iter=10_000).fit(text_features(texts, dims), y)
    assert np.allclose(clf.predict(texts), ref.predict_proba(text_features(texts, dims))[:, 1], atol=1e-4)


def test_calib1_fits_on_dev_and_scores_prompt_and_answer(sb):
    prog = sb.program("c1", "aux_classifier", gamma=2.0, dims=256)
    assert prog.needs_dev and prog.answer_conditioned()
    ctx = trivia_ctx()
    ro = prog.read(ctx, {}, "Paris", "Paris")
    assert math.isnan(ro.confidence) and ro.extras["text"] == ctx.user_text + " [SEP] Paris"
    dev = [{"confidence": math.nan, "correct": float(i % 3 != 0), "extras": {"text": ("good answer" if i % 3 else "bad guess")}}
           for i in range(60)]
    dev.append({"confidence": math.nan, "correct": None, "extras": {"text": "unlabelled"}})  # skipped
    fitted = prog.fit(dev)
    assert fitted["n_train"] == 60 and fitted["gamma"] == 2.0
    good = prog.apply(fitted, prog.read(ctx, {}, None, "good answer"))
    bad = prog.apply(fitted, prog.read(ctx, {}, None, "bad guess"))
    assert good.parsed and 0 < bad.confidence < 0.5 < good.confidence < 1 and "text" not in good.extras
    with pytest.raises(ValueError, match="both outcomes"):
        prog.fit([{"confidence": 0.5, "correct": 1.0, "extras": {"text": "x"}}] * 3)


# ----------------------------------------------------------------------------- GPT-4o Prob.


def test_prob_from_the_generation_own_logprobs(sb):
    # App. A.3: GPT-4o serves no input logprobs, so Prob. is "based on the generated output
    # sequences": the geometric mean of the generated tokens' probabilities, no request
    prog = sb.program("pg", "token_prob", readout="T1", normalise="raw", scored="generated", context="bare",
                      source="generation")
    ctx = trivia_ctx()
    assert prog.stage1(ctx) == {} and prog.roles2(ctx) == {} and prog.stage2(ctx, {}, "Paris") == {}
    ans = gen_result(" Paris, France", [tok(" ", -0.01), tok(" Paris", -0.2), tok(",", -0.5), tok(" France", -0.3)])
    ro = prog.read(ctx, {"answer": ans}, "Paris", ans.samples[0].text)
    assert ro.confidence == pytest.approx(math.exp((-0.2 - 0.5 - 0.3) / 3), abs=1e-12)
    assert ro.extras["source"] == "generation" and ro.extras["n_tokens"] == 3
    assert math.isnan(prog.read(ctx, {"answer": gen_result("Paris")}, "Paris", "Paris").confidence)


def test_source_generation_needs_a_generated_span_readout(tmp_path, capsys):
    from auditlang.cli import main

    for decl in ('token_prob(readout=first_token, source=generation)',
                 'token_prob(readout=T1, scored=gold, source=generation)'):
        spec = tmp_path / "s.audit"
        spec.write_text(f"protocol bad = {decl}\n", encoding="utf-8")
        assert main(["check", str(spec)]) == 1
        err = capsys.readouterr().err
        assert "error[E159]" in err and "source=generation" in err and "s.audit:1:" in err


def test_prob_from_generation_scores_own_samples_only(sb):
    # A-STB / A-SST samples of GPT-4o: Prob. from each sample's own output logprobs (App. A.3);
    # another model's or another prompt's answer carries no logprobs of this model: NaN
    from auditlang.protocols.base import OWN_GENERATION

    prog = sb.program("pg", "token_prob", readout="T1", normalise="raw", scored="generated", context="bare",
                      source="generation")
    assert prog.answer_conditioned()
    ctx = trivia_ctx()
    sample = gen_result(" Lyon", [tok(" Ly", -0.4), tok("on", -0.2)])
    ro = prog.read_candidate(ctx, {"answer": gen_result("Paris", [tok("Paris", -0.1)]), OWN_GENERATION: sample},
                             "Lyon", "Lyon")
    assert ro.confidence == pytest.approx(math.exp(-0.3), abs=1e-12)
    other = prog.read_candidate(ctx, {"answer": gen_result("Paris", [tok("Paris", -0.1)])}, "Lyon", "Lyon")
    assert math.isnan(other.confidence) and "own sampled answers" in other.extras["reason"]
    # Platt over it passes the sample through
    ps = sb.program("ps", "platt", base="pg")
    assert ps.read_candidate(ctx, {OWN_GENERATION: sample}, "Lyon", "Lyon").confidence == pytest.approx(math.exp(-0.3))
