"""Metrics in the component registry (kind ``metric``), so the compiler can check ``ece(bins=10, binning=equal_width)``.

Each entry's schema is its name -> :class:`ParamSpec` mapping, its implementation the function
and ``meta["inputs"]`` what it consumes. Study-specific modules add their own entries with
:func:`register`; ``METRICS`` is a live read-only view of the registry as :class:`MetricSpec`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from auditlang.core.registry import REGISTRY, Entry
from auditlang.metrics import calibration, discrimination, kernel_ece, selective

INPUT_KINDS = ("conf+correct", "correct")
# the level a metric is computed at: "cell" metrics are columns of metrics/cells.csv (an audit's
# ``metrics = [...]``); any other level (a pair of models, a set of variants, ...) is computed by
# the comparison named in ``shown_by`` and cannot be an audit's cell metric (resolver E134)
CELL = "cell"
CELL_INPUTS = ("conf+correct", "correct", "verbal")


@dataclass(frozen=True)
class ParamSpec:
    """One metric parameter: its type (``int``, ``float``, ``str``, ``bool``), default, and limits.

    ``choices`` lists allowed values (for ``str`` parameters); ``minimum``/``maximum`` bound numbers
    (inclusive); ``required`` parameters have no default.
    """

    type: type
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    required: bool = False
    doc: str = ""

    def check(self, metric: str, name: str, value: Any) -> Any:
        """Return ``value`` (ints accepted for floats) or raise ValueError naming the metric and parameter."""
        ok_type = isinstance(value, self.type) and not (self.type is not bool and isinstance(value, bool))
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok_type = float(value), True
        if not ok_type:
            raise ValueError(f"{metric}: parameter {name} must be of type {self.type.__name__}, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{metric}: parameter {name} must be one of {list(self.choices)}, got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{metric}: parameter {name} must be >= {self.minimum}, got {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{metric}: parameter {name} must be <= {self.maximum}, got {value!r}")
        return value


@dataclass(frozen=True)
class MetricSpec:
    name: str
    fn: Callable[..., Any]
    params: Mapping[str, ParamSpec] = field(default_factory=dict)
    inputs: str = "conf+correct"
    doc: str = ""
    level: str = CELL
    shown_by: str | None = None  # the comparison that computes a metric of another level


def _spec(entry: Entry) -> MetricSpec:
    inputs = entry.meta.get("inputs", "conf+correct")
    level = entry.meta.get("level") or (CELL if inputs in CELL_INPUTS else f"not a cell ({inputs})")
    return MetricSpec(entry.name, entry.impl, entry.schema, inputs, entry.doc, level, entry.meta.get("shown_by"))


METRICS: Mapping[str, MetricSpec] = REGISTRY.view("metric", _spec)


def register(name: str, fn: Callable[..., Any], params: Mapping[str, ParamSpec] | None = None,
             inputs: str = "conf+correct", doc: str = "", replace: bool = False, level: str | None = None,
             shown_by: str | None = None) -> MetricSpec:
    """Add a metric under its spec-level ``name``. ``inputs`` says what it consumes (free text for
    study-specific metrics, e.g. ``"conf+correct"``, ``"correct"``, ``"variants"``). ``level`` is
    where it is computed: ``"cell"`` (the default for ``conf+correct``, ``correct`` and ``verbal``
    inputs: a column of cells.csv) or another level (``"pair of models"``, ...) computed by the
    comparison ``shown_by``. Registering a taken name raises ValueError unless ``replace=True``."""
    if not callable(fn):  # a metric is computed in-process: no lazy "module:attr" implementation
        raise ValueError(f"register: fn for {name!r} is not callable")
    return _spec(REGISTRY.register("metric", name, impl=fn, schema=dict(params or {}), doc=doc, replace=replace,
                                   inputs=inputs, level=level, shown_by=shown_by))


def validate_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Check a spec-level call like ``ece(bins=10)`` and return all parameters with defaults filled in.

    Raises ValueError for an unknown metric or parameter, a wrong type or a value out of range.
    """
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))}")
    spec = METRICS[name]
    unknown = set(params) - set(spec.params)
    if unknown:
        allowed = ", ".join(spec.params) or "none"
        raise ValueError(f"{name}: unknown parameter(s) {', '.join(sorted(unknown))}; allowed: {allowed}")
    out: dict[str, Any] = {}
    for pname, ps in spec.params.items():
        if pname in params:
            out[pname] = ps.check(name, pname, params[pname])
        elif ps.required:
            raise ValueError(f"{name}: parameter {pname} is required")
        else:
            out[pname] = ps.default
    return out


def spec_for(fn: Callable[..., Any]) -> MetricSpec | None:
    """The registered descriptor whose function is ``fn`` (first match), else None."""
    for spec in METRICS.values():
        if spec.fn is fn:
            return spec
    return None


_MISSING = ParamSpec(str, "error", choices=("error", "drop"), doc="policy for NaN confidences")
_BINS = ParamSpec(int, 10, minimum=1, doc="number of bins")
_BINNING = ParamSpec(str, "equal_width", choices=calibration.BINNINGS, doc="bin placement")
_CLOSED = ParamSpec(str, "left", choices=calibration.CLOSED, doc="which bin end is closed")
_BINNED = {"bins": _BINS, "binning": _BINNING, "closed": _CLOSED, "missing": _MISSING}

register("accuracy", calibration.accuracy, {}, inputs="correct")
register("ece", calibration.ece, _BINNED)
register("mce", calibration.mce, _BINNED)
register("smooth_ece", kernel_ece.smooth_ece,
         {"sigma": ParamSpec(float, None, minimum=1e-6, maximum=10.0, doc="fixed bandwidth; default: fixed point"),
          "missing": _MISSING})
register("kde_ece", kernel_ece.kde_ece, {"missing": _MISSING})
register("ks_ce", calibration.ks_ce, {"missing": _MISSING})
register("binfree_ece", calibration.binfree_ece, {"missing": _MISSING})
register("brier", calibration.brier, {"missing": _MISSING})
register("nll", calibration.nll,
         {"eps": ParamSpec(float, 1e-6, minimum=1e-15, maximum=0.49, doc="probability clip"), "missing": _MISSING})
register("auroc", discrimination.auroc, {"missing": _MISSING})
register("aurc", selective.aurc, {"missing": _MISSING})
register("selective_accuracy", selective.selective_accuracy,
         {"coverage": ParamSpec(float, required=True, minimum=1e-9, maximum=1.0, doc="fraction answered"),
          "missing": _MISSING})
