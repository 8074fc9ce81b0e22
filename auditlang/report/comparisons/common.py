"""Shared pieces of the comparison modules: the result type, metric lookup, item alignment and the
walk over an audit's cell grid (:func:`cell_groups`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from auditlang.report.rundata import RunData
from auditlang.report.tables import Table
from auditlang.resolve.spec import MetricRef
from auditlang.metrics.registry import METRICS, validate_params
from auditlang.score.cellmetrics import audit_bootstrap


def is_calibration(name: str) -> bool:
    """Whether the metric declares itself a calibration-error estimator (``family``, metrics/registry.py)."""
    return name in METRICS and METRICS[name].family == "calibration"


@dataclass
class Comparison:
    """The outcome of one ``compare`` statement: tables, data for figures and a one-line summary.

    ``ctor`` is the constructor's name, printed only; what a renderer does with the outcome follows
    what the comparison function declares: ``shape``, the layout of its tables and ``data`` (the
    LaTeX table and figure kinds of report/textables.py and figures.py; "" for the generic table), and
    ``cross``, its lines about answers it scores from other units (the checklist's cross item).
    ``cid`` is the spec's compare id (set by ``compute_one``)."""

    name: str
    ctor: str
    audit: str
    tables: list[Table] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    shape: str = ""
    cross: list[str] = field(default_factory=list)
    cid: str = ""


@dataclass(frozen=True)
class MetricChoice:
    """A registered metric with validated parameters, callable on (conf, correct) or (correct,)."""

    label: str
    name: str
    fn: Callable[..., Any]
    kwargs: dict[str, Any]
    inputs: str

    def __call__(self, conf: np.ndarray | None, correct: np.ndarray) -> float:
        if self.inputs == "correct":
            return float(self.fn(correct, **self.kwargs))
        return float(self.fn(conf, correct, **self.kwargs))


def metric_choice(rd: RunData, metric_id: str | None, default: MetricRef) -> MetricChoice:
    """The metric a compare names (an id in ``spec.metrics``), or ``default``."""

    ref = rd.spec.metrics[metric_id] if metric_id else default
    spec_m = METRICS[ref.name]
    return MetricChoice(ref.label, ref.name, spec_m.fn, validate_params(ref.name, dict(ref.params)), spec_m.inputs)


ACCURACY = MetricRef("accuracy")
ECE10 = MetricRef("ece", (("bins", 10), ("binning", "equal_width")))


def ece_bins(rd: RunData, metric_id: str | None) -> tuple[int, str]:
    """(bins, label) of the ECE a comparison uses: its ``metric=`` when that is an equal-width ECE, else 10."""
    if metric_id:
        ref = rd.spec.metrics[metric_id]
        params = dict(ref.params)
        if ref.name == "ece" and params.get("binning", "equal_width") == "equal_width":
            return int(params.get("bins", 10)), ref.label
        raise ValueError(f"metric {ref.label} is not an equal-width ECE; this comparison is defined with equal-width "
                         "binned ECE (pass metric=ece(bins=N) or leave metric out for 10 bins)")
    return 10, ECE10.label


def bootstrap_settings(rd: RunData, aid: str) -> tuple[int, int, float]:

    return audit_bootstrap(rd.spec, aid)


def by_item(df: pd.DataFrame) -> pd.DataFrame:
    """One row per item (the first when a cell repeats an item), indexed by item_id."""
    return df.drop_duplicates("item_id").set_index("item_id")


def known(df: pd.DataFrame, need_conf: bool) -> pd.DataFrame:
    """Rows with known correctness (and a finite confidence when ``need_conf``)."""
    mask = ~df["correct"].isna()
    if need_conf:
        mask &= ~df["confidence"].isna()
    return df[mask]




AXES = ("model", "dataset", "variant", "protocol", "evaluator")  # a cell's axes, in cell-id order


def axis_levels(rd: RunData, aid: str, axis: str) -> list[str]:
    """The audit's names on one cell axis (its evaluators, else the default one)."""
    a = rd.audit(aid)
    return {"model": list(a.models), "dataset": list(a.datasets), "variant": list(a.variants),
            "protocol": list(a.protocols), "evaluator": rd.evaluators(aid)}[axis]


@dataclass(frozen=True)
class CellGroup:
    """One combination of the ``by`` axes of :func:`cell_groups` (``key``, in ``by``'s order) and the
    records of its cells along ``over`` (``rows``: the over axis's name -> records, possibly empty;
    a tuple of names when ``over`` has several axes)."""

    key: tuple[str, ...]
    rows: dict[Any, pd.DataFrame]

    @property
    def where(self) -> str:
        """The key as a note locates a cell: ``model / dataset / ...``."""
        return " / ".join(self.key)


def cell_groups(rd: RunData, aid: str, by: Sequence[str], over: Mapping[str, Sequence[str]] | None = None,
                levels: Mapping[str, Sequence[str]] | None = None, fixed: Mapping[str, str] | None = None,
                skip_empty: bool = False) -> Iterator[CellGroup]:
    """Walk an audit's cell grid: one group per combination of the ``by`` axes (the first outermost;
    on each the audit's names, or ``levels[axis]``), holding the records of the cells along ``over``
    ({axis: names}; their product, the first axis outermost) with ``fixed`` ({axis: name}) set. An
    axis named nowhere is not filtered: its cells' records come pooled (``RunData.rows``).
    ``skip_empty`` leaves out a group whose cells have no records."""
    over, levels, fixed = dict(over or {}), dict(levels or {}), dict(fixed or {})
    inner = list(itertools.product(*over.values()))
    names = [list(levels[x]) if x in levels else axis_levels(rd, aid, x) for x in by]
    for key in itertools.product(*names):
        sel = {**fixed, **dict(zip(by, key))}
        rows = {(vals[0] if len(over) == 1 else vals): rd.rows(aid, **sel, **dict(zip(over, vals))) for vals in inner}
        if skip_empty and all(df.empty for df in rows.values()):
            continue
        yield CellGroup(tuple(key), rows)


def model_size(rd: RunData, mid: str) -> tuple[float | None, str]:
    """(size in billions, where it came from): the model object's ``size``, else the embedded catalogue."""

    v = rd.spec.get(mid).value
    if v.size is not None:
        return float(v.size), "spec"
    if (cat := v.catalogue()) is not None:
        return float(cat["size"]), "embedded catalogue"
    return None, "none"


def model_family(rd: RunData, mid: str) -> str | None:
    """A model's declared family, else its embedded catalogue's."""
    v = rd.spec.get(mid).value
    fam = getattr(v, "family", None)
    return fam if fam or (cat := v.catalogue()) is None else cat.get("family")
