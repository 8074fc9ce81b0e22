"""The parameters of a language constructor: :class:`Obj`, one pydantic model per constructor.

A component (evaluator, perturbation, protocol, comparison, ...) declares its parameters once, as a
subclass of :class:`Obj`; the resolver validates a spec against it, the language server and the docs
tables show it and the component is built from it. It lives in ``core/`` so that every layer that
declares components (``prompts/``'s perturbations, ``resolve/``, ``evaluators/``, plugins) can subclass
it; ``auditlang.resolve.schema`` re-exports it.

This module imports nothing of auditlang.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, ValidationError, model_serializer


class Obj(BaseModel):
    """A constructor's parameters: one pydantic field each (type, default, limits, and its
    documentation as ``Field(description=...)``). This is the one declaration the resolver
    validates, the docs tables and the language server show, and a component is built from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    REFS: ClassVar[dict[str, str]] = {}
    INLINE: ClassVar[dict[str, str]] = {}  # REFS that take only an object written inline: what to write
    POSITIONAL: ClassVar[tuple[str, ...]] = ()
    DOC: ClassVar[str] = ""
    # parameters added after a release: left out of the object's parameters (and so of the cells'
    # content hashes) while they hold their default, so specs written before them keep their hashes
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ()
    # the disclosure table's axes (report/disclosure.py): (parameter, label) on which two objects of
    # one constructor are compared; AXIS_PARTS: axis -> the axis it is disclosed as part of
    AXES: ClassVar[tuple[tuple[str, str], ...]] = ()
    AXIS_PARTS: ClassVar[dict[str, str]] = {}

    @model_serializer(mode="wrap")
    def _omit_new_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        for name in self.OMIT_AT_DEFAULT:
            f = type(self).model_fields[name]
            key = f.alias or name
            if key in out and out[key] == f.default:
                out.pop(key)
        return out

    def axis_applies(self, axis: str) -> bool:
        """Whether ``axis`` is a setting this object actually uses (override where one depends on another)."""
        return True

    def axis_compared(self, other: "Obj", axis: str) -> bool:
        """Whether a difference in ``axis`` between this object and ``other`` is a difference between them."""
        return self.axis_applies(axis) or other.axis_applies(axis)

    def axis_text(self, axis: str) -> str:
        """``axis=value`` as the disclosure table shows it."""
        v = getattr(self, axis, None)
        return f"{axis}={'none' if v is None else v}"

    def values(self) -> dict[str, Any]:
        """Every parameter (defaults included, by its spec name): what a component is built with."""
        return {f.alias or n: getattr(self, n) for n, f in type(self).model_fields.items()}


def build_params(owner: str, schema: type[Obj], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` keyword parameters checked against ``schema`` (strictly: no coercion), with
    defaults filled in; ValueError naming the parameter, the allowed values and the nearest name
    otherwise. The Python API's check; a spec is checked by the resolver, with diagnostics."""
    known = [f.alias or n for n, f in schema.model_fields.items()]
    for key in given:
        if key not in known:
            hint = difflib.get_close_matches(key, known, n=1)
            dym = f" Did you mean: {hint[0]}?" if hint else ""
            raise ValueError(f"{owner}: unknown parameter {key!r}.{dym} Allowed parameters: {', '.join(known) or '(none)'}")
    try:
        return schema.model_validate(dict(given), strict=True).values()
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "parameters"
        if err["type"] == "missing":
            raise ValueError(f"{owner}: parameter {where!r} is required") from None
        value = given.get(where, "")
        raise ValueError(f"{owner}: parameter {where}={value!r}: {err['msg']}") from None
