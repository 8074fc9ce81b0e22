"""Evaluators and parsers: model text -> labels, answers, verdicts and verbal confidences.

Input: generated text (and, for MC evaluators, a dataset item of /work/shared/data's schema).
Output: :class:`ParseOutcome` ``(value, ok, rule, span)``; ``Evaluator.correct`` gives the
correctness label. Pure Python: no model is loaded here; the two evaluators that need a second
model call (``constrained``, ``llm_judge``) build :class:`~auditlang.core.requests.Request`
objects and read :class:`~auditlang.core.requests.Result` objects.

Every rule cites its study section; docs/evaluators.md lists them all.
"""

from auditlang.evaluators.base import Evaluator, VerbalParser
from auditlang.evaluators.constrained import (
    FINAL_ANSWER_SUFFIX,
    constrained_followup,
    constrained_request,
    label_from_constrained,
)
from auditlang.evaluators.judge import (
    correctness_prompt,
    grouping_prompt,
    grouping_request,
    judge_request,
    parse_grouping_reply,
    parse_judge_reply,
)
from auditlang.evaluators.judge_prompts import CORRECTNESS_PROMPT, GROUPING_PROMPT
from auditlang.evaluators.letters import choice_letters, extract_pred_letter, gold_letter
from auditlang.evaluators.linguistic import LINGUISTIC_MAP, LINGUISTIC_OPTIONS
from auditlang.evaluators.outcome import ParseOutcome
from auditlang.evaluators.regex_reparse import regex_reparse
from auditlang.evaluators.registry import EVALUATORS, VERBAL_PARSERS, make_evaluator, make_verbal_parser
from auditlang.evaluators.string_match import extract_answer, normalize_answer

__all__ = [
    "CORRECTNESS_PROMPT",
    "EVALUATORS",
    "FINAL_ANSWER_SUFFIX",
    "GROUPING_PROMPT",
    "LINGUISTIC_MAP",
    "LINGUISTIC_OPTIONS",
    "VERBAL_PARSERS",
    "Evaluator",
    "ParseOutcome",
    "VerbalParser",
    "choice_letters",
    "constrained_followup",
    "constrained_request",
    "correctness_prompt",
    "extract_answer",
    "extract_pred_letter",
    "gold_letter",
    "grouping_prompt",
    "grouping_request",
    "judge_request",
    "label_from_constrained",
    "make_evaluator",
    "make_verbal_parser",
    "normalize_answer",
    "parse_grouping_reply",
    "parse_judge_reply",
    "regex_reparse",
]
