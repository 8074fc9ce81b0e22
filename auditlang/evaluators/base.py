"""Base classes for evaluators and verbal-confidence parsers, with keyword-parameter validation.

Every component is built by a factory (its class) from keyword params; the resolved params
(defaults filled in) are exposed as ``.params`` for the plan and the disclosure report, and
``describe()`` states the exact rule in one or two sentences for the reporting checklist.
An evaluator or verbal parser declares its parameters once, as its ``Params`` constructor model
(the same model the spec is checked against, the docs table and the language server show).
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from auditlang.evaluators.outcome import ParseOutcome
from auditlang.resolve.schema import Obj, build_params


def unknown_name(kind: str, name: object, available: Mapping[str, Any]) -> ValueError:
    """``Unknown evaluator 'x'. Did you mean: y? Available: ...``"""
    names = sorted(available)
    hint = difflib.get_close_matches(str(name), names, n=1)
    dym = f" Did you mean: {hint[0]}?" if hint else ""
    return ValueError(f"Unknown {kind} {name!r}.{dym} Available: {', '.join(names)}")


class _Component(ABC):
    """Shared machinery: ``name``, ``source`` (paper section), ``Params`` and ``params``."""

    name: ClassVar[str]
    source: ClassVar[str]
    _kind: ClassVar[str] = "component"

    class Params(Obj):
        """No parameters (a subclass declares its own ``Params``)."""

    def __init__(self, **params: Any) -> None:
        self._params = build_params(f"{self._kind} {self.name!r}", self.Params, params)

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
    # groups a set of sampled answers by meaning with one request per item (``grouping_request``;
    # robustness(grouping=...), study 002 App. A.1); others group them by their normalised answer
    GROUPS_SAMPLES: ClassVar[bool] = False
    PROSE: ClassVar[str] = ""  # the rule in a few words, as a methods section names it (empty: not declared)

    def prose(self) -> str:
        """The rule in a few words for these parameters (the methods paragraph); ``PROSE`` unless a
        subclass's words depend on its parameters."""
        return self.PROSE

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
