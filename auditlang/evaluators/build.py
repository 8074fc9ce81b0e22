"""Build evaluator instances (auditlang.evaluators) from the spec's evaluator objects."""

from __future__ import annotations

from typing import Any

from auditlang.core.registry import REGISTRY
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
    from auditlang.evaluators import EVALUATORS

    if ctor is None:
        ctor = evaluator_ctor(spec, eid, task)
        if eid != DEFAULT_EVALUATOR:
            params = spec.get(eid).params()
    factory = EVALUATORS[ctor]
    params = dict(params or {})
    # spec parameter names -> scorer parameter names
    if ctor == "regex_reparse" and "tail" in params:
        params["window"] = params.pop("tail")
    if ctor == "llm_judge" and "judge" in params:
        from auditlang.resolve.models import model_config

        params["chat"] = model_config(spec, params["judge"]).chat
        params["judge_model"] = params.pop("judge")
    for k in REGISTRY.get("evaluator", ctor).meta.get("request_params", ()):  # the request's, not the rule's
        params.pop(k, None)
    known = {p.name for p in getattr(factory, "PARAMS", ())}
    unknown = set(params) - known
    if unknown:
        raise ValueError(f"internal error: evaluator {ctor} got parameters {sorted(unknown)} the scorer does not know")
    return factory(**params)
