"""Base classes for evaluators and verbal-confidence parsers, with keyword-parameter validation.

Every component is built by a factory (its class) from keyword params; the resolved params
(defaults filled in) are exposed as ``.params`` for the plan and the disclosure report, and
``describe()`` states the exact rule in one or two sentences for the reporting checklist.
An evaluator declares its parameters once, as its ``Params`` constructor model (the same model
the spec is checked against, the docs table and the language server show); a verbal parser as
its ``PARAMS`` tuple.
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from auditlang.evaluators.outcome import ParseOutcome
from auditlang.resolve.schema import Obj, build_params

_REQUIRED = object()


@dataclass(frozen=True)
class Param:
    """One keyword parameter of a factory.

    ``kind``: "choice" (value must be one of ``choices``), "bool", "int" (>= ``min``), "str"
    (non-empty unless ``allow_empty``).
    """

    name: str
    kind: str
    default: Any = _REQUIRED
    choices: tuple[Any, ...] = ()
    min: int | None = None
    allow_empty: bool = False
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def check(self, owner: str, value: Any) -> Any:
        where = f"{owner}: parameter {self.name}={value!r}"
        if self.kind == "choice":
            if value not in self.choices:
                allowed = ", ".join(repr(c) for c in self.choices)
                raise ValueError(f"{where} is not allowed. Allowed values: {allowed}")
        elif self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{where} must be true or false")
        elif self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{where} must be an integer")
            if self.min is not None and value < self.min:
                raise ValueError(f"{where} must be >= {self.min}")
        elif self.kind == "str":
            if not isinstance(value, str) or (not value and not self.allow_empty):
                raise ValueError(f"{where} must be a non-empty string")
        else:  # pragma: no cover - programming error in a Param table
            raise AssertionError(f"unknown Param kind {self.kind!r}")
        return value


def resolve_params(owner: str, specs: tuple[Param, ...], given: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``given`` against ``specs``; return every param with defaults filled in."""
    known = {p.name: p for p in specs}
    for key in given:
        if key not in known:
            hint = difflib.get_close_matches(key, list(known), n=1)
            dym = f" Did you mean: {hint[0]}?" if hint else ""
            allowed = ", ".join(known) if known else "(none)"
            raise ValueError(f"{owner}: unknown parameter {key!r}.{dym} Allowed parameters: {allowed}")
    out: dict[str, Any] = {}
    for p in specs:
        if p.name in given:
            out[p.name] = p.check(owner, given[p.name])
        elif p.required:
            raise ValueError(f"{owner}: parameter {p.name!r} is required ({p.doc or p.kind})")
        else:
            out[p.name] = p.default
    return out


def unknown_name(kind: str, name: object, available: Mapping[str, Any]) -> ValueError:
    """``Unknown evaluator 'x'. Did you mean: y? Available: ...``"""
    names = sorted(available)
    hint = difflib.get_close_matches(str(name), names, n=1)
    dym = f" Did you mean: {hint[0]}?" if hint else ""
    return ValueError(f"Unknown {kind} {name!r}.{dym} Available: {', '.join(names)}")


class _Component(ABC):
    """Shared machinery: ``name``, ``source`` (paper section), ``PARAMS`` and ``params``."""

    name: ClassVar[str]
    source: ClassVar[str]
    PARAMS: ClassVar[tuple[Param, ...]] = ()
    _kind: ClassVar[str] = "component"

    def __init__(self, **params: Any) -> None:
        self._params = resolve_params(f"{self._kind} {self.name!r}", self.PARAMS, params)

    @property
    def params(self) -> dict[str, Any]:
        """Resolved parameters (defaults included), for the plan and the disclosure report."""
        return dict(self._params)

    @abstractmethod
    def describe(self) -> str:
        """The exact rule in one or two sentences (used verbatim by the reporting checklist)."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"{type(self).__name__}({args})"


class Evaluator(_Component):
    """Turns model text into a label/answer and decides correctness against a dataset item.

    ``item`` follows /work/shared/data's schema: question, choices (list or None), answer,
    answer_index, aliases (list or None). MC labels are the letters A, B, C, ... in choice order.
    ``requires_model``: the evaluator needs a second model request (constrained, llm_judge).
    """

    _kind = "evaluator"
    requires_model: ClassVar[bool] = False
    PROSE: ClassVar[str] = ""  # the rule in a few words, as a methods section names it (empty: not declared)

    class Params(Obj):
        """No parameters (a subclass declares its own ``Params``)."""

    def __init__(self, **params: Any) -> None:
        self._params = build_params(f"evaluator {self.name!r}", self.Params, params)

    @abstractmethod
    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        """Extract the prediction from ``text``; never raises on any text."""

    @abstractmethod
    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        """True/False; None when the item has no gold this evaluator can use (or, for
        llm_judge, when correctness needs the judge's reply)."""


class VerbalParser(_Component):
    """Reads a verbal confidence in [0, 1] from model text; ``value`` None on failure."""

    _kind = "verbal parser"

    @abstractmethod
    def parse(self, text: str) -> ParseOutcome:
        """Never raises on any text; failures are outcomes with ``ok=False``."""
