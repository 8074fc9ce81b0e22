"""``loglik_argmax`` pieces: argmax, ties, length normalisation (lm-eval acc / acc_norm / acc_bytes)."""

from __future__ import annotations

import math

import pytest

from auditlang.core.requests import Prompt, Result, TokenLogprob
from auditlang.evaluators import make_evaluator
from auditlang.evaluators.loglik import argmax_label, loglik_requests, option_scores, separator

ITEM = {"question": "q", "choices": ["cat", "hippopotamus", "ox"], "answer": "ox", "answer_index": 2, "aliases": None}


def _cont(lps):
    return Result(request_id="r", kind="continuation_logprobs",
                  continuation=[TokenLogprob(token=f"t{i}", token_id=i, logprob=v) for i, v in enumerate(lps)])


def test_option_scores_by_normalisation():
    res = {"option:0": _cont([-1.0, -2.0]), "option:1": _cont([-0.5] * 6), "option:2": _cont([-2.5])}
    labels, opts = ["A", "B", "C"], ITEM["choices"]
    assert option_scores(res, labels, opts, "option", "none") == [-3.0, -3.0, -2.5]
    assert option_scores(res, labels, opts, "option", "chars") == pytest.approx([-1.0, -3.0 / 12, -1.25])
    assert option_scores(res, labels, opts, "option", "tokens") == pytest.approx([-1.5, -0.5, -2.5])
    assert option_scores({**res, "option:2": _cont([-2.5])}, labels, ["cät", "hippopotamus", "ox"], "option",
                         "bytes")[0] == pytest.approx(-3.0 / 4)  # "cät" is 4 UTF-8 bytes
    ev = make_evaluator("loglik_argmax", target="option")
    assert ev.label_results(res, ITEM).value == "C"  # acc: -2.5 is the highest sum
    ev = make_evaluator("loglik_argmax", target="option", normalise="chars")
    assert ev.label_results(res, ITEM).value == "B"  # acc_norm: the long option per character


def test_ties_go_to_the_first_option_and_missing_scores_fail():
    assert argmax_label([-1.0, -1.0, -2.0], ["A", "B", "C"]) == "A"
    assert argmax_label([-1.0, math.nan], ["A", "B"]) is None
    ev = make_evaluator("loglik_argmax")
    assert ev.label_results({}, ITEM).rule == "loglik_missing"
    part = {"letters": Result(request_id="r", kind="choice_logprobs", choice_logprobs={" A": -1.0, " B": -0.5})}
    assert ev.label_results(part, ITEM).rule == "loglik_incomplete"  # C has no log-probability
    full = {"letters": Result(request_id="r", kind="choice_logprobs", choice_logprobs={" A": -1.0, " B": -0.5, " C": -3.0})}
    out = ev.label_results(full, ITEM)
    assert (out.value, out.ok, out.rule) == ("B", True, "loglik_letter") and ev.correct("B", ITEM) is False
    assert ev.label("C", ITEM).ok is False  # the text is never read


def test_label_forms_and_requests():
    raw = Prompt(text="Q? Answer:")
    assert (separator("auto", " "), separator("bare", " "), separator("space", "")) == (" ", "", " ")
    reqs = loglik_requests("m", raw, ["A", "B"], ["x", "y"], "letter", "bare", auto_sep=" ")
    assert list(reqs) == ["letters"] and list(reqs["letters"].p["choices"]) == ["A", "B"]
    reqs = loglik_requests("m", raw, ["A", "B"], [" x", "y "], "option", "auto", auto_sep=" ")
    assert [r.p["continuation"] for r in reqs.values()] == [" x", " y"]
    with pytest.raises(ValueError, match="normalise='chars' applies to target='option'"):
        make_evaluator("loglik_argmax", normalise="chars")
    assert "acc_norm" in make_evaluator("loglik_argmax", target="option", normalise="chars").describe()
