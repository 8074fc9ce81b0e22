"""Evaluators and verbal-confidence parsers in the component registry (auditlang/core/registry.py).

Evaluators are language constructors: their entries (name, constructor model, implementation)
are registered by ``resolve/schema.py`` (loaded by the registry on the first evaluator lookup); the verbal parsers are registered here (schema: the
class's ``PARAMS``). ``EVALUATORS`` and ``VERBAL_PARSERS`` are live read-only views name ->
class. ``EVALUATORS[name](**params)`` builds a component; the classes validate their keyword
params (``ValueError`` naming the allowed values). :func:`make_evaluator` /
:func:`make_verbal_parser` add a did-you-mean for unknown names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from auditlang.core.registry import REGISTRY
from auditlang.evaluators.base import Evaluator, VerbalParser, unknown_name
from auditlang.evaluators.boxed import Boxed0100Parser
from auditlang.evaluators.linguistic import LinguisticMCParser, LinguisticParser
from auditlang.evaluators.verbal import Decimal01Parser, Integer0100Parser, Percent0100Parser, Scale010Parser

for _cls in (Decimal01Parser, Percent0100Parser, Integer0100Parser, Scale010Parser, LinguisticParser,
             LinguisticMCParser, Boxed0100Parser):
    REGISTRY.register("verbal_parser", _cls.name, schema=_cls.PARAMS, impl=_cls)

EVALUATORS: Mapping[str, Callable[..., Evaluator]] = REGISTRY.view("evaluator")
VERBAL_PARSERS: Mapping[str, Callable[..., VerbalParser]] = REGISTRY.view("verbal_parser")


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
