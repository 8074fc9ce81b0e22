"""Evaluators and verbal-confidence parsers in the component registry (auditlang/core/registry.py).

Both kinds are registered here (the registry imports this module on the first lookup of
either). An evaluator's or verbal parser's schema is its class's ``Params`` constructor model, the one
declaration of its parameters. ``EVALUATORS`` and
``VERBAL_PARSERS`` are live read-only views name -> class. ``EVALUATORS[name](**params)`` builds a component; the classes validate their keyword
params (``ValueError`` naming the allowed values). :func:`make_evaluator` /
:func:`make_verbal_parser` add a did-you-mean for unknown names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from auditlang.core.registry import REGISTRY
from auditlang.evaluators.base import Evaluator, VerbalParser, unknown_name
from auditlang.evaluators.boxed import Boxed0100Parser, BoxedLetterEvaluator
from auditlang.evaluators.constrained import ConstrainedEvaluator
from auditlang.evaluators.judge import LLMJudgeEvaluator
from auditlang.evaluators.letters import FirstCharEvaluator
from auditlang.evaluators.linguistic import LinguisticMCParser, LinguisticParser
from auditlang.evaluators.loglik import LoglikArgmaxEvaluator
from auditlang.evaluators.regex_reparse import RegexReparseEvaluator
from auditlang.evaluators.string_match import AliasMatchEvaluator, ExactMatchEvaluator, LenientMatchEvaluator
from auditlang.evaluators.verbal import Decimal01Parser, Integer0100Parser, Percent0100Parser, Scale010Parser

# meta reads: "labels" (option letters: multiple choice and classification only) or "text";
# followup: (role, request kind) of the evaluator's own model request, planned per item
# (loglik_argmax's is planned by plan/planner.py: its kind depends on target=).
for _cls, _meta in (
    (FirstCharEvaluator, {"reads": "labels"}),
    (RegexReparseEvaluator, {"reads": "labels"}),
    (ConstrainedEvaluator, {"reads": "labels", "followup": ("constrained", "constrained_choice")}),
    (ExactMatchEvaluator, {"reads": "text"}),
    (LenientMatchEvaluator, {"reads": "text"}),
    (AliasMatchEvaluator, {"reads": "text"}),
    (LLMJudgeEvaluator, {"reads": "text", "followup": ("judge", "generate")}),
    (BoxedLetterEvaluator, {"reads": "labels"}),
    (LoglikArgmaxEvaluator, {"reads": "labels"}),
):
    REGISTRY.register("evaluator", _cls.name, impl=_cls, **_meta)

for _cls in (Decimal01Parser, Percent0100Parser, Integer0100Parser, Scale010Parser, LinguisticParser,
             LinguisticMCParser, Boxed0100Parser):
    REGISTRY.register("verbal_parser", _cls.name, impl=_cls)

EVALUATORS: Mapping[str, Callable[..., Evaluator]] = REGISTRY.view("evaluator")


def offline_evaluators() -> list[str]:
    """Registered evaluators that need no model call (``auditc rescore`` re-scores with them)."""
    return [n for n, cls in EVALUATORS.items() if not getattr(cls, "requires_model", False)]
VERBAL_PARSERS: Mapping[str, Callable[..., VerbalParser]] = REGISTRY.view("verbal_parser")


def make_evaluator(name: str, **params: Any) -> Evaluator:
    """Build the evaluator registered as ``name`` (ValueError with suggestions otherwise)."""
    if name not in EVALUATORS:
        raise unknown_name("evaluator", name, EVALUATORS)
    return EVALUATORS[name](**params)  # checked against the class's Params (ValueError)


def make_verbal_parser(name: str, **params: Any) -> VerbalParser:
    """Build the verbal-confidence parser registered as ``name``."""
    if name not in VERBAL_PARSERS:
        raise unknown_name("verbal parser", name, VERBAL_PARSERS)
    return VERBAL_PARSERS[name](**params)
