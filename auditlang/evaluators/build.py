"""Build evaluator instances (auditlang.evaluators) from the spec's evaluator objects."""

from __future__ import annotations

from typing import Any

from auditlang.resolve.spec import Spec
from auditlang.evaluators import EVALUATORS
from auditlang.resolve.models import model_config

DEFAULT_EVALUATOR = "<default>"


def default_ctor(task: str) -> str:
    """The evaluator used when an audit names none: first_char for labels, lenient_match for open QA.

    The reporting checklist flags it as a default, not a choice the spec made.
    """
    return "lenient_match" if task == "open_qa" else "first_char"


def evaluator_ctor(spec: Spec, eid: str, task: str) -> str:
    return default_ctor(task) if eid == DEFAULT_EVALUATOR else spec.get(eid).ctor


def groups_samples(spec: Spec, eid: str) -> bool:
    """Whether evaluator ``eid`` groups sampled answers by meaning itself (its class declares
    ``GROUPS_SAMPLES``: the plan sends its grouping request, the report says so)."""
    cls = EVALUATORS.get(spec.get(eid).ctor) if eid in spec.objects else None
    return bool(getattr(cls, "GROUPS_SAMPLES", False))


def make_evaluator(spec: Spec, eid: str, task: str, ctor: str | None = None, params: dict[str, Any] | None = None):
    """The evaluator the scorer uses for spec evaluator ``eid`` (or the task's default): its
    class built from the spec object's parameters, which are the class's own ``Params``."""
    if ctor is None:
        ctor = evaluator_ctor(spec, eid, task)
        if eid != DEFAULT_EVALUATOR:
            params = spec.get(eid).value.values()
    params = dict(params or {})
    if ctor == "llm_judge":  # the judge's prompt form follows the judge model's own `chat`
        return EVALUATORS[ctor](chat=model_config(spec, params["judge"]).chat, **params)
    return EVALUATORS[ctor](**params)
