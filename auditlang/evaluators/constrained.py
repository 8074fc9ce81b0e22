"""Repair path 2 of study 000: constrained re-prompt.

Study 000 (arXiv 2605.02038), appendix C.1 "Repair Path 2 - constrained-decoding pass": the CoT
generation is concatenated with the literal string ``"\\n\\nFinal answer:"``, fed back to the
model under ``guided_choice = A/B/C/D`` and exactly one letter is generated (max_new_tokens=4,
greedy). Here that is a ``constrained_choice`` request (auditlang.core.requests), whose
``Result.choice`` is the forced label. It is never a confidence source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field

from auditlang.core.requests import Message, Prompt, Request, Result
from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.letters import item_labels, letter_correct
from auditlang.evaluators.outcome import EMPTY, NOT_TEXT, ParseOutcome, coerce_text, failure
from auditlang.resolve.schema import Obj

FINAL_ANSWER_SUFFIX = "\n\nFinal answer:"

PromptLike = str | Prompt | Sequence[Message] | Sequence[Mapping[str, str]]


def _messages(prompt: PromptLike) -> tuple[Message, ...] | None:
    if isinstance(prompt, Prompt):
        return prompt.messages
    if isinstance(prompt, str):
        return None
    out = []
    for m in prompt:
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping) and {"role", "content"} <= set(m):
            out.append(Message(m["role"], m["content"]))
        else:
            raise ValueError(
                f"constrained_followup: cannot read {m!r} as a chat message. "
                "Hint: pass a str, a Prompt, Message objects or {'role': ..., 'content': ...} dicts"
            )
    if not out:
        raise ValueError("constrained_followup: the message list is empty")
    return tuple(out)


def constrained_followup(
    prompt: PromptLike, generation: str, labels: Sequence[str], suffix: str = FINAL_ANSWER_SUFFIX
) -> tuple[Prompt, tuple[str, ...]]:
    """The follow-up prompt and the forced label set of study 000 C.1 path 2.

    Text prompt: ``prompt + generation + suffix``. Chat prompt: the generation becomes (or, when
    the original prompt ended with an assistant prefill, extends) the final assistant message,
    followed by ``suffix``; the engine continues that message (``Prompt.continue_final``).
    """
    if not isinstance(generation, str):
        raise ValueError(f"constrained_followup: generation must be a str, got {type(generation).__name__}")
    choices = tuple(labels)
    if not choices or not all(isinstance(c, str) and c for c in choices):
        raise ValueError(f"constrained_followup: labels must be non-empty strings, got {labels!r}")
    msgs = _messages(prompt)
    if msgs is None:
        text = prompt.text if isinstance(prompt, Prompt) else prompt
        assert isinstance(text, str)
        return Prompt(text=text + generation + suffix), choices
    if msgs[-1].role == "assistant":
        head, prefix = msgs[:-1], msgs[-1].content
    else:
        head, prefix = msgs, ""
    return Prompt(messages=head + (Message("assistant", prefix + generation + suffix),)), choices


def constrained_request(
    model: str, prompt: PromptLike, generation: str, labels: Sequence[str], seed: int = 0,
    suffix: str = FINAL_ANSWER_SUFFIX,
) -> Request:
    """A ``constrained_choice`` Request for :func:`constrained_followup`."""
    p, choices = constrained_followup(prompt, generation, labels, suffix)
    return Request.make(model, "constrained_choice", p, seed=seed, choices=list(choices))


def label_from_constrained(result: Result) -> str | None:
    """The forced label of a ``constrained_choice`` Result; None when the engine reported an
    error or returned no choice."""
    if not isinstance(result, Result):
        raise ValueError(f"label_from_constrained: expected a Result, got {type(result).__name__}")
    if result.kind != "constrained_choice":
        raise ValueError(f"label_from_constrained: expected a 'constrained_choice' result, got kind {result.kind!r}")
    if result.error is not None or not isinstance(result.choice, str):
        return None
    return result.choice.strip() or None


class ConstrainedEvaluator(Evaluator):
    """``constrained``: study 000 C.1 path 2. ``label`` reads the forced label text
    (``Result.choice``); ``request`` builds the follow-up request from the original prompt and
    the generation."""

    PROSE = "a constrained re-generation of the label"  # the rule in a few words (report/methods.py)

    name = "constrained"
    source = "study 000 (arXiv 2605.02038), appendix C.1 'Repair Path 2 - constrained-decoding pass'"
    requires_model = True

    class Params(Obj):
        DOC: ClassVar[str] = 'Study 000 C.1 repair path 2: generation + "\\n\\nFinal answer:" then one forced label.'
        OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("suffix",)
        max_tokens: int = Field(4, ge=1, description="token budget of the forced label (the paper: 4)")
        suffix: str = Field(FINAL_ANSWER_SUFFIX, min_length=1, description="appended to the generation before the forced label")

    def describe(self) -> str:
        return (
            f"Constrained re-prompt (study 000, C.1): the generation is followed by {self.params['suffix']!r} and "
            "the model is forced to emit exactly one of the valid choice letters (constrained decoding, greedy); "
            "the forced letter is the prediction."
        )

    def request(self, model: str, prompt: PromptLike, generation: str, item: Mapping[str, Any], seed: int = 0) -> Request:
        return constrained_request(model, prompt, generation, item_labels(item, self.name), seed, self.params["suffix"])

    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        labels = item_labels(item, self.name)
        s = coerce_text(text)
        if s is None:
            return failure(NOT_TEXT)
        v = s.strip()
        if not v:
            return failure(EMPTY)
        if v not in labels:
            return failure("not_a_label", v)
        start = s.index(v)
        return ParseOutcome(v, True, "constrained_choice", (start, start + len(v)))

    def label_result(self, result: Result, item: Mapping[str, Any]) -> ParseOutcome:
        """``label`` applied to a constrained_choice Result (engine error -> failure 'engine_error')."""
        v = label_from_constrained(result)
        return failure("engine_error") if v is None else self.label(v, item)

    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        return letter_correct(pred, item)
