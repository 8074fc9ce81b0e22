"""Registries of evaluators and verbal-confidence parsers by spec-level name.

``EVALUATORS[name](**params)`` and ``VERBAL_PARSERS[name](**params)`` build a component; the
factories validate their keyword params (``ValueError`` naming the allowed values).
:func:`make_evaluator` / :func:`make_verbal_parser` add a did-you-mean for unknown names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from auditlang.evaluators.base import Evaluator, VerbalParser, unknown_name
from auditlang.evaluators.boxed import Boxed0100Parser, BoxedLetterEvaluator
from auditlang.evaluators.constrained import ConstrainedEvaluator
from auditlang.evaluators.judge import LLMJudgeEvaluator
from auditlang.evaluators.letters import FirstCharEvaluator
from auditlang.evaluators.loglik import LoglikArgmaxEvaluator
from auditlang.evaluators.linguistic import LinguisticMCParser, LinguisticParser
from auditlang.evaluators.regex_reparse import RegexReparseEvaluator
from auditlang.evaluators.string_match import AliasMatchEvaluator, ExactMatchEvaluator, LenientMatchEvaluator
from auditlang.evaluators.verbal import Decimal01Parser, Integer0100Parser, Percent0100Parser, Scale010Parser

EVALUATORS: dict[str, Callable[..., Evaluator]] = {
    cls.name: cls
    for cls in (
        FirstCharEvaluator,
        RegexReparseEvaluator,
        ConstrainedEvaluator,
        ExactMatchEvaluator,
        LenientMatchEvaluator,
        AliasMatchEvaluator,
        LLMJudgeEvaluator,
        BoxedLetterEvaluator,
        LoglikArgmaxEvaluator,
    )
}

VERBAL_PARSERS: dict[str, Callable[..., VerbalParser]] = {
    cls.name: cls
    for cls in (
        Decimal01Parser,
        Percent0100Parser,
        Integer0100Parser,
        Scale010Parser,
        LinguisticParser,
        LinguisticMCParser,
        Boxed0100Parser,
    )
}


def make_evaluator(name: str, **params: Any) -> Evaluator:
    """Build the evaluator registered as ``name`` (ValueError with suggestions otherwise)."""
    if name not in EVALUATORS:
        raise unknown_name("evaluator", name, EVALUATORS)
    return EVALUATORS[name](**params)


def make_verbal_parser(name: str, **params: Any) -> VerbalParser:
    """Build the verbal-confidence parser registered as ``name``."""
    if name not in VERBAL_PARSERS:
        raise unknown_name("verbal parser", name, VERBAL_PARSERS)
    return VERBAL_PARSERS[name](**params)
