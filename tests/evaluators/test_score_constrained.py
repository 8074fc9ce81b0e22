"""Constrained re-prompt: study 000 appendix C.1 repair path 2."""

from __future__ import annotations

import pytest

from auditlang.core.requests import Message, Prompt, Request, Result
from auditlang.evaluators import EVALUATORS, FINAL_ANSWER_SUFFIX, constrained_followup, constrained_request, label_from_constrained


def test_suffix_is_the_papers_literal() -> None:
    assert FINAL_ANSWER_SUFFIX == "\n\nFinal answer:"


def test_text_prompt() -> None:
    p, choices = constrained_followup("Q: ...\nReasoning and answer:", " The planet is big.", "ABCD")
    assert p == Prompt(text="Q: ...\nReasoning and answer: The planet is big.\n\nFinal answer:")
    assert choices == ("A", "B", "C", "D")


def test_chat_prompt_appends_an_assistant_turn_that_is_continued() -> None:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    p, _ = constrained_followup(msgs, "Let me think. B.", ["A", "B"])
    assert p.messages == (Message("system", "s"), Message("user", "u"), Message("assistant", "Let me think. B.\n\nFinal answer:"))
    assert p.continue_final


def test_chat_prompt_with_prefill_extends_it() -> None:
    prompt = Prompt(messages=(Message("user", "u"), Message("assistant", "Answer:")))
    p, _ = constrained_followup(prompt, " B", ["A", "B"])
    assert p.messages[-1] == Message("assistant", "Answer: B\n\nFinal answer:")
    assert len(p.messages) == 2


def test_request_and_result() -> None:
    r = constrained_request("m1", "Q", " gen", ["A", "B", "C"], seed=7)
    assert isinstance(r, Request) and r.kind == "constrained_choice" and r.seed == 7
    assert r.p["choices"] == ("A", "B", "C")
    assert r.prompt.text == "Q gen\n\nFinal answer:"
    assert label_from_constrained(Result(r.id, "constrained_choice", choice="B")) == "B"
    assert label_from_constrained(Result(r.id, "constrained_choice", choice=" C ")) == "C"
    assert label_from_constrained(Result(r.id, "constrained_choice", error="oom")) is None
    assert label_from_constrained(Result(r.id, "constrained_choice")) is None
    with pytest.raises(ValueError, match="constrained_choice"):
        label_from_constrained(Result(r.id, "generate"))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("Q", None, "AB"), "generation must be a str"),
        (("Q", "g", []), "labels must be non-empty"),
        (([], "g", "AB"), "message list is empty"),
        (([("user", "x")], "g", "AB"), "cannot read"),
    ],
)
def test_bad_arguments(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        constrained_followup(*args)


def test_evaluator(mc4: dict) -> None:
    ev = EVALUATORS["constrained"]()
    assert ev.requires_model
    req = ev.request("m", "Q:", " think", mc4, seed=3)
    assert req.p["choices"] == ("A", "B", "C", "D")
    out = ev.label("B", mc4)
    assert out.ok and out.rule == "constrained_choice" and ev.correct(out.value, mc4)
    assert ev.label("E", mc4).rule == "not_a_label"
    assert ev.label("", mc4).rule == "empty"
    assert ev.label_result(Result(req.id, "constrained_choice", error="x"), mc4).rule == "engine_error"
    assert ev.label_result(Result(req.id, "constrained_choice", choice="A"), mc4).value == "A"
