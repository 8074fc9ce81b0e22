"""Plain-language descriptions of spec objects for the checklist and the disclosure table.

Nothing here is hand-filled: every statement is derived from a resolved object's parameters;
parameters the spec did not set are reported with their default and flagged UNSPECIFIED.
"""

from __future__ import annotations

from auditlang.report.rundata import DEFAULT_EVALUATOR, RunData
from auditlang.resolve.spec import Resolved, Spec
from auditlang.evaluators.build import default_ctor, make_evaluator
from auditlang.protocols.facts import label_form_text  # noqa: F401  (the one wording; methods imports it from here)

UNSPECIFIED = "UNSPECIFIED"
WARNING = "WARNING"


def explicit(obj: Resolved) -> set[str]:
    """Parameters written in the spec for ``obj`` (including those inherited through ``with``)."""
    return {name for name, _ in obj.param_spans}


def unspecified(obj: Resolved, param: str, what: str | None = None) -> str | None:
    """The UNSPECIFIED flag for ``obj.param`` when the spec left it at its default, else None."""
    if param in explicit(obj):
        return None
    val = getattr(obj.value, param, None)
    about = f" ({what})" if what else ""
    return f"{UNSPECIFIED}: {obj.kind} '{obj.id}' does not set {param}{about}; the default {val!r} was used"


def evaluator_rule(spec: Spec, eid: str, task: str) -> tuple[str, str, list[str]]:
    """(constructor, the exact rule of the evaluator the run builds, flags).

    The evaluator is built exactly as the scorer builds it (``auditlang.evaluators.build.make_evaluator``)
    and its ``describe()`` is quoted. Flags: UNSPECIFIED when the audit names no evaluator.
    """

    flags: list[str] = []
    if eid == DEFAULT_EVALUATOR:
        ctor = default_ctor(task)
        flags.append(f"{UNSPECIFIED}: the audit names no evaluator; {ctor} was used by default for {task} datasets")
    else:
        ctor = spec.get(eid).ctor
    try:
        ev = make_evaluator(spec, eid, task)
    except (ValueError, TypeError, KeyError, ImportError) as err:
        return ctor, f"rule not available: the evaluator cannot be built from the spec ({err})", flags
    # the spec's parameters are the evaluator class's own (its Params), so describe() states
    # exactly the rule that ran.
    return ctor, ev.describe(), flags


def template_ids(rd: RunData, aid: str) -> list[tuple[str, str]]:
    """(template id, where it is used) of every template an audit's variants and protocols reference."""
    spec = rd.spec
    out: list[tuple[str, str]] = []
    a = rd.audit(aid)
    for vid in a.variants:
        v = spec.get(vid).value
        for f in ("template", "multiple_choice", "classification", "open_qa", "system"):
            tid = getattr(v, f)
            if tid:
                out.append((tid, f"variant {vid}.{f}"))
    for pid in a.protocols:
        o = spec.get(pid)
        for f, kind in type(o.value).REFS.items():
            if kind != "template":
                continue
            tid = getattr(o.value, f, None)
            if tid:
                out.append((tid, f"protocol {pid}.{f}"))
    seen: dict[str, list[str]] = {}
    for tid, where in out:
        seen.setdefault(tid, []).append(where)
    return [(tid, "; ".join(ws)) for tid, ws in seen.items()]
