"""LLM-as-judge semantic equivalence (study 002, Xia et al., arXiv 2601.08064).

Section 5 "Evaluation" and appendix A.1: a judge model (GPT-4o in the paper) decides (a) whether
a response is semantically equivalent to the target answer (correctness) and (b) how sampled
responses group into semantically equivalent sets (stability / sensitivity, A.3). The prompts
are :mod:`auditlang.evaluators.judge_prompts`. Decoding: temperature 0 (A.4: "the temperature of all
LLMs is set to 0"). The paper gives no reply parser; auditlang's rules are stated on
:func:`parse_judge_reply` and :func:`parse_grouping_reply`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar

from pydantic import Field

from auditlang.core.requests import Message, Prompt, Request, Result
from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.judge_prompts import CORRECTNESS_PROMPT, GROUPING_PROMPT
from auditlang.evaluators.letters import strip_class
from auditlang.evaluators.outcome import EMPTY, NOT_TEXT, ParseOutcome, coerce_text, failure
from auditlang.evaluators.string_match import EXTRACT_DOC, EXTRACT_PARAM_DOC, Extract, extract_answer
from auditlang.resolve.schema import Obj

_CORRECTNESS_SLOTS = re.compile(r"<question>|<answer>|<target>")
_GROUPING_SLOTS = re.compile(r"<question>|<sampled answers >")


def correctness_prompt(question: str, answer: str, target: str) -> str:
    """A.1 correctness prompt with its three slots filled (one pass: slot-like text inside the
    values is not substituted again)."""
    values = {"<question>": question, "<answer>": answer, "<target>": target}
    for k, v in values.items():
        if not isinstance(v, str):
            raise ValueError(f"correctness_prompt: {k[1:-1]} must be a str, got {type(v).__name__}")
    return _CORRECTNESS_SLOTS.sub(lambda m: values[m.group(0)], CORRECTNESS_PROMPT)


def format_sampled_answers(answers: Sequence[str]) -> str:
    """``{1: "first", 2: "second", ...}``: 1-based keys as in the reply format of A.1, each answer
    JSON-quoted (the paper does not show how the sampled answers are laid out)."""
    return "{" + ", ".join(f"{i}: {json.dumps(a, ensure_ascii=False)}" for i, a in enumerate(answers, 1)) + "}"


def grouping_prompt(question: str, answers: Sequence[str]) -> str:
    """A.1 grouping prompt. The paper groups 10 answers; for another count the number in
    "You are grouping 10 answers" is replaced by that count (the only change to the text)."""
    if not isinstance(question, str):
        raise ValueError(f"grouping_prompt: question must be a str, got {type(question).__name__}")
    answers = list(answers)
    if len(answers) < 2 or not all(isinstance(a, str) for a in answers):
        raise ValueError("grouping_prompt: needs at least two answer strings")
    base = GROUPING_PROMPT
    if len(answers) != 10:
        base = base.replace("You are grouping 10 answers", f"You are grouping {len(answers)} answers", 1)
    values = {"<question>": question, "<sampled answers >": format_sampled_answers(answers)}
    return _GROUPING_SLOTS.sub(lambda m: values[m.group(0)], base)


def _judge_prompt(text: str, chat: bool) -> Prompt:
    return Prompt(messages=(Message("user", text),)) if chat else Prompt(text=text)


def judge_request(
    judge_model: str, question: str, answer: str, target: str, seed: int = 0, max_tokens: int = 8, chat: bool = True
) -> Request:
    """A greedy ``generate`` request asking the named judge model for the correctness verdict."""
    return Request.make(
        judge_model, "generate", _judge_prompt(correctness_prompt(question, answer, target), chat),
        seed=seed, max_tokens=max_tokens, temperature=0.0, n=1,
    )


def grouping_request(
    judge_model: str, question: str, answers: Sequence[str], seed: int = 0, max_tokens: int = 1024, chat: bool = True
) -> Request:
    """A greedy ``generate`` request asking the judge to group sampled answers."""
    return Request.make(
        judge_model, "generate", _judge_prompt(grouping_prompt(question, answers), chat),
        seed=seed, max_tokens=max_tokens, temperature=0.0, n=1,
    )


def reply_text(reply: Result | str) -> str | None:
    """The judge's text: a str as is; a ``generate`` Result's first sample (None on error)."""
    if isinstance(reply, Result):
        if reply.error is not None or not reply.samples:
            return None
        return reply.samples[0].text
    return coerce_text(reply)


@lru_cache(maxsize=1)
def _lead_any() -> re.Pattern[str]:
    """Leading whitespace (newlines included), punctuation and markdown markers."""
    return re.compile(f"[{strip_class()}\\n]*+")


_YES_NO = re.compile(r"(yes|no)(?![A-Za-z0-9])", re.IGNORECASE)


def parse_judge_reply(reply: Result | str) -> ParseOutcome:
    """Correctness verdict. After stripping leading whitespace, punctuation and markdown markers:
    ``1`` -> True and ``0`` -> False when not followed by another digit (rule ``digit``, the format
    the prompt asks for); otherwise a leading word YES / NO, any case (rule ``yes_no``, the format of
    the prompt's examples); anything else is a failure (``unparsed``)."""
    s = reply_text(reply)
    if s is None:
        return failure(NOT_TEXT if not isinstance(reply, Result) else "engine_error")
    i = _lead_any().match(s).end()
    if i >= len(s):
        return failure(EMPTY)
    c, nxt = s[i], s[i + 1 : i + 2]
    if c in "01" and not nxt.isdigit():
        return ParseOutcome(c == "1", True, "digit", (i, i + 1))
    m = _YES_NO.match(s, i)
    if m:
        return ParseOutcome(m.group(1).lower() == "yes", True, "yes_no", m.span(1))
    return failure("unparsed")


_BLOCK = re.compile(r"\{([^{}]*)\}")
_KEY = re.compile(r"(?:^|,)\s{0,8}(\d{1,6})\s{0,8}:")


def parse_grouping_reply(reply: Result | str, n_answers: int) -> ParseOutcome:
    """Groups from the dict-format reply of A.1 (``{1: answer1, 2: ...}`` one dict per group).

    Each ``{...}`` block (no nesting) is one group; its keys are the integers before a colon at
    the start of the block or after a comma. ``value``: tuple of groups of 0-based answer indices,
    in reply order. ok only when the groups partition 1..n exactly; failures: ``no_groups``,
    ``index_out_of_range``, ``duplicate_index``, ``incomplete`` (value keeps what was read).
    """
    if isinstance(n_answers, bool) or not isinstance(n_answers, int) or n_answers < 1:
        raise ValueError(f"parse_grouping_reply: n_answers must be a positive integer, got {n_answers!r}")
    s = reply_text(reply)
    if s is None:
        return failure(NOT_TEXT if not isinstance(reply, Result) else "engine_error")
    groups: list[tuple[int, ...]] = []
    seen: set[int] = set()
    first, last = None, None
    for block in _BLOCK.finditer(s):
        keys = tuple(int(m.group(1)) for m in _KEY.finditer(block.group(1)))
        if not keys:
            continue
        if any(not 1 <= k <= n_answers for k in keys):
            return failure("index_out_of_range", tuple(groups))
        if seen.intersection(keys) or len(set(keys)) != len(keys):
            return failure("duplicate_index", tuple(groups))
        seen.update(keys)
        groups.append(tuple(k - 1 for k in keys))
        first = block.start() if first is None else first
        last = block.end()
        if len(seen) == n_answers:
            break
    if not groups:
        return failure("no_groups")
    if len(seen) != n_answers:
        return failure("incomplete", tuple(groups))
    assert first is not None and last is not None
    return ParseOutcome(tuple(groups), True, "dict_groups", (first, last))


class LLMJudgeEvaluator(Evaluator):
    """``llm_judge``: study 002 A.1 correctness judge.

    ``label`` extracts the answer; ``request`` builds the judge request; ``verdict`` parses the
    judge's reply into the correctness label. ``correct`` returns None: correctness needs the
    judge's reply (use ``verdict``).
    """

    PROSE = "an LLM judge"  # the rule in a few words (report/methods.py)
    GROUPS_SAMPLES = True

    name = "llm_judge"
    source = "study 002 (arXiv 2601.08064), section 5 'Evaluation' and appendix A.1"
    requires_model = True

    class Params(Obj):
        DOC: ClassVar[str] = "An LLM judge (study 002 A.1 semantic-equivalence prompt) with a named judge model."
        POSITIONAL: ClassVar[tuple[str, ...]] = ("judge",)
        REFS: ClassVar[dict[str, str]] = {"judge": "model"}
        OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("extract",)
        judge: str = Field(min_length=1, description="the judge model (a model of the spec)")
        max_tokens: int = Field(8, ge=1, description="judge reply budget")
        extract: Extract = Field("full", description=EXTRACT_PARAM_DOC + ", shown to the judge")

    def __init__(self, chat: bool = True, **params: Any) -> None:
        """``chat``: send the prompt as one user message (the judge model's own ``chat``)."""
        super().__init__(**params)
        self.chat = chat

    def describe(self) -> str:
        p = self.params
        return (
            f"LLM judge (study 002, A.1): judge model {p['judge']!r} receives the A.1 semantic-equivalence "
            f"prompt with the question, the answer ({EXTRACT_DOC[p['extract']]}) and the gold answer as reference, "
            "greedy; reply '1' or a leading YES means correct, '0' or NO wrong, anything else is an unparsed verdict."
        )

    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        return extract_answer(text, self.params["extract"])

    def request(self, pred: str, item: Mapping[str, Any], seed: int = 0) -> Request:
        q, target = item.get("question"), item.get("answer")
        if not isinstance(q, str) or not isinstance(target, str):
            raise ValueError("llm_judge: the item needs string 'question' and 'answer' fields")
        if not isinstance(pred, str):
            raise ValueError("llm_judge: no answer to judge (label() failed); count it as unparsed instead")
        p = self.params
        return judge_request(p["judge"], q, pred, target, seed, p["max_tokens"], self.chat)

    def verdict(self, reply: Result | str) -> ParseOutcome:
        return parse_judge_reply(reply)

    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        return None
