"""Build evaluator instances (auditlang.score) from the spec's evaluator objects."""

from __future__ import annotations

from typing import Any

from auditlang.resolve.spec import Spec

DEFAULT_EVALUATOR = "<default>"


def default_ctor(task: str) -> str:
    """The evaluator used when an audit names none: first_char for labels, lenient_match for open QA.

    The reporting checklist flags it as a default, not a choice the spec made.
    """
    return "lenient_match" if task == "open_qa" else "first_char"


def evaluator_ctor(spec: Spec, eid: str, task: str) -> str:
    return default_ctor(task) if eid == DEFAULT_EVALUATOR else spec.get(eid).ctor


def make_evaluator(spec: Spec, eid: str, task: str, ctor: str | None = None, params: dict[str, Any] | None = None):
    from auditlang.score import EVALUATORS

    if ctor is None:
        ctor = evaluator_ctor(spec, eid, task)
        if eid != DEFAULT_EVALUATOR:
            params = spec.get(eid).params()
    factory = EVALUATORS[ctor]
    known = {p.name for p in getattr(factory, "PARAMS", ())}
    return factory(**{k: v for k, v in (params or {}).items() if k in known})
