"""Plain-language descriptions of spec objects for the checklist and the disclosure table.

Nothing here is hand-filled: every statement is derived from a resolved object's parameters;
parameters the spec did not set are reported with their default and flagged UNSPECIFIED.
"""

from __future__ import annotations

from typing import Any

from auditlang.report.rundata import DEFAULT_EVALUATOR, RunData
from auditlang.resolve.spec import Resolved, Spec

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
    return f"{UNSPECIFIED}: {obj.kind} '{obj.id}' does not set {param}{' (' + what + ')' if what else ''}; the default {val!r} was used"


def _evaluator_factories() -> dict[str, Any]:
    try:
        from auditlang.score import EVALUATORS  # type: ignore[attr-defined]

        return dict(EVALUATORS)
    except ImportError:
        import importlib

        from auditlang.score.base import Evaluator

        out: dict[str, Any] = {}
        for mod in ("letters", "regex_reparse", "constrained", "string_match", "judge"):
            try:
                m = importlib.import_module(f"auditlang.score.{mod}")
            except ImportError:
                continue
            for v in vars(m).values():
                if isinstance(v, type) and issubclass(v, Evaluator) and isinstance(getattr(v, "name", None), str):
                    out[v.name] = v
        return out


# spec parameter names that the scorer spells differently
_PARAM_ALIASES = {"tail": "window", "judge": "judge_model"}


def evaluator_rule(spec: Spec, eid: str, task: str) -> tuple[str, str, str | None]:
    """(constructor, exact rule from the evaluator's describe(), UNSPECIFIED flag or None)."""
    from auditlang.run.evaluators import default_ctor

    flag = None
    if eid == DEFAULT_EVALUATOR:
        ctor, params = default_ctor(task), {}
        flag = (f"{UNSPECIFIED}: the audit names no evaluator; {ctor} was used by default for {task} datasets")
    else:
        obj = spec.get(eid)
        ctor, params = obj.ctor, obj.params()
    factory = _evaluator_factories().get(ctor)
    if factory is None:
        return ctor, f"rule not available: no evaluator implementation named {ctor!r} is installed", flag
    known = {p.name for p in getattr(factory, "PARAMS", ())}
    kwargs = {}
    for k, v in params.items():
        k2 = k if k in known else _PARAM_ALIASES.get(k)
        if k2 in known and v is not None:
            kwargs[k2] = v
    try:
        return ctor, factory(**kwargs).describe(), flag
    except (ValueError, TypeError) as err:
        return ctor, f"rule not available: {err}", flag


def fmt_params(obj: Resolved, names: list[str]) -> str:
    return ", ".join(f"{n}={getattr(obj.value, n)!r}" for n in names)


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
