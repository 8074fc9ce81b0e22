"""`auditc plan --precision`: the rows of the precision plan for a spec's plan (formulas in
auditlang/metrics/precision.py).

One row per cell x metric (the half-width of its interval at the cell's declared number of items)
and one per paired contrast x metric: two cells of one audit on the same items, with its
half-width and minimum detectable difference. Contrasts are (a) every pair of cells that differ
in one axis only (model, variant, protocol or evaluator: "model pairs", ...), and (b) the pairs
each ``compare`` statement is built from (``spread``: its variants; ``ece_gap``: verbal vs token;
``norm_shift``: raw vs norm; ``evaluator_repair``: base vs each repair on its variant;
``protocol_grid``: verbal vs each config per estimator; ``provenance``: own vs each supplied
answer, mean confidence; ``contrast``: each pair of its names, its metrics). Comparisons whose statistic is not a difference of two cells
(``size_spread``, ``robustness``, ``aligned``, ``consistency``) get one n/a row saying why.

With a pilot's records every value comes from the pilot (module metrics/precision.py, "pilot");
the declared N is then scaled by the pilot's usable fraction (items whose metric inputs are known:
an unparsed verbal confidence is dropped from confidence metrics at full size too).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from itertools import combinations
from statistics import median
from typing import Any

import numpy as np
import pandas as pd

from auditlang.metrics import precision as prec
from auditlang.metrics.registry import METRICS, validate_params
from auditlang.plan.model import Cell, Plan
from auditlang.resolve.spec import MetricRef, Spec
from auditlang.score.cellmetrics import audit_bootstrap, audit_metrics

AXES = ("model", "variant", "protocol", "evaluator")
ACCURACY = MetricRef("accuracy")
ECE10 = MetricRef("ece", (("bins", 10), ("binning", "equal_width")))
MEANCONF = MetricRef(prec.MEAN_CONFIDENCE)
NO_PAIRS = {
    "size_spread": "a correlation across models: its precision is set by the number of models, not of items",
    "robustness": "P-RB / A-STB / A-SST are computed without intervals (resolve/bootstrap_units.py); no paired cell difference",
    "aligned": "aligned views compare calibration of model pairs on re-aligned items (the raw difference has an interval: plan it with contrast())",
    "consistency": "probe consistency is computed without intervals; no paired cell difference",
}


@dataclass
class Row:
    kind: str  # "cell" | "contrast" | "comparison" (a compare with no paired rows)
    audit: str
    group: str  # contrast: "variant pairs", "compare spread4", ...; cell: ""
    dataset: str
    metric: str
    n: int  # declared items (the plan's cell size; the smaller of a pair's)
    estimated: bool  # n from declared sizes (data not read)
    source: str  # "analytic" | "pilot" | "n/a"
    half_width: float | None = None
    mdd: float | None = None
    sd: float | None = None
    n_used: float | None = None  # n after the pilot's usable fraction
    usable: float | None = None  # the pilot's usable fraction (items with the metric's inputs known)
    n_pilot: int | None = None
    method: str = ""
    note: str = ""
    cell: str = ""  # cell id (a contrast: cell B)
    cell_a: str = ""  # contrast: cell A (the difference is B - A)
    level: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and v != v else v) for k, v in asdict(self).items()}  # NaN -> null


@dataclass
class PrecisionPlan:
    rows: list[Row]
    p: float
    rho: float
    alpha: float
    power: float
    pilot: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"planning_p": self.p, "rho": self.rho, "alpha": self.alpha, "power": self.power, "pilot": self.pilot,
                "mdd_formula": "MDD = (z_{1-alpha/2} + z_{power}) * sd_d / sqrt(n)",
                "mdd_factor": prec.mdd_factor(self.alpha, self.power),
                "rows": [r.to_dict() for r in self.rows], "summary": summarize(self.rows)}


# ------------------------------------------------------------------------------- which rows


def _inline(spec: Spec, metric_id: str) -> bool:
    """True for a metric written inline (``metrics = [accuracy]``, ``metric=ece(bins=10)``): its id is
    a slot of the audit or compare that holds it, not a name the user declared."""
    owner = metric_id.rsplit(".", 1)[0]
    return "[" in metric_id or (owner in spec.objects and spec.get(owner).kind in ("audit", "compare"))


def _name(spec: Spec, metric_id: str) -> str:
    """A metric as the user wrote it: ``s000.ece10`` for a declared metric (or one equal to it), else
    the registry label (``accuracy``, ``ece(bins=10, ...)``)."""
    ref = spec.metrics[metric_id]
    if not _inline(spec, metric_id):
        return metric_id
    named = [k for k, r in spec.metrics.items() if not _inline(spec, k) and r.label == ref.label]
    return named[0] if named else ref.label


def _shown(spec: Spec, audit: str) -> list[tuple[str, MetricRef]]:
    """(shown name, MetricRef) of an audit's metrics (the defaults of score/cellmetrics.py when it names none)."""
    if audit not in spec.objects:
        return []
    ids = spec.get(audit).value.metrics
    if not ids:
        return [(m.label, m) for m in audit_metrics(spec, audit)]
    return [(_name(spec, mid), spec.metrics[mid]) for mid in ids]


def _ref(spec: Spec, metric_id: str | None, default: MetricRef) -> tuple[str, MetricRef]:
    if not metric_id:
        return default.label, default
    return _name(spec, metric_id), spec.metrics[metric_id]


def _key(c: Cell, without: str) -> tuple:
    return tuple(getattr(c, a) for a in ("dataset",) + AXES if a != without)


def axis_pairs(cells: list[Cell]) -> dict[str, list[tuple[Cell, Cell]]]:
    """``"<axis> pairs"`` -> every pair of cells that differ in that axis only (same dataset)."""
    out: dict[str, list[tuple[Cell, Cell]]] = {}
    for axis in AXES:
        groups: dict[tuple, list[Cell]] = defaultdict(list)
        for c in cells:
            groups[_key(c, axis)].append(c)
        pairs = [p for g in groups.values() for p in combinations(g, 2)]
        if pairs:
            out[f"{axis} pairs"] = pairs
    return out


def _pairs_between(cells: list[Cell], axis: str, a_val: str, b_vals: list[str], **fixed) -> list[tuple[Cell, Cell]]:
    """Pairs (cell with ``axis == a_val``, cell with ``axis == b``) for each b, equal elsewhere."""
    keep = [c for c in cells if all(getattr(c, k) in v for k, v in fixed.items())]
    by = {(_key(c, axis), getattr(c, axis)): c for c in keep}
    out = []
    for c in keep:
        if getattr(c, axis) != a_val:
            continue
        for b in b_vals:
            other = by.get((_key(c, axis), b))
            if other is not None and other is not c:
                out.append((c, other))
    return out


def compare_pairs(spec: Spec, cells: list[Cell]) -> list[tuple[str, str, list[tuple[str, MetricRef]], list[tuple[Cell, Cell]], str]]:
    """(compare id, audit, metrics, pairs, n/a reason) for every ``compare`` of the spec."""
    out = []
    for cid, obj in spec.of_kind("compare").items():
        c, ctor = obj.value, obj.ctor
        mine = [x for x in cells if x.audit == c.audit]
        pairs: list[tuple[Cell, Cell]] = []
        metrics: list[tuple[str, MetricRef]] = []
        why = ""
        if ctor == "spread":
            vs = list(c.variants) or list(dict.fromkeys(x.variant for x in mine))
            pairs = [p for p in axis_pairs([x for x in mine if x.variant in vs]).get("variant pairs", [])]
            metrics = [_ref(spec, c.metric, ACCURACY)]
            why = "" if pairs else "fewer than two variants"
        elif ctor in ("ece_gap", "norm_shift"):
            a, b = (c.token, c.verbal) if ctor == "ece_gap" else (c.norm, c.raw)
            fixed = {"dataset": list(c.datasets)} if ctor == "ece_gap" and c.datasets else {}
            if ctor == "ece_gap" and c.variants:
                fixed["variant"] = list(c.variants)
            pairs = _pairs_between(mine, "protocol", a, [b], **fixed)
            metrics = [_ref(spec, c.metric, ECE10)]
        elif ctor == "evaluator_repair":
            pairs = _pairs_between(mine, "evaluator", c.base, list(c.repairs), variant=[c.variant])
            metrics = [_ref(spec, c.metric, ACCURACY)]
        elif ctor == "protocol_grid":
            pairs = _pairs_between(mine, "protocol", c.verbal, [*c.configs, *([c.readout] if c.readout else [])])
            metrics = [_ref(spec, m, ECE10) for m in c.estimators] or [_ref(spec, c.metric, ECE10)]
        elif ctor == "provenance":
            others = [x for x in (c.gold, c.plausible, c.off_type) if x]
            pairs = _pairs_between(mine, "protocol", c.own, others)
            metrics = [("mean confidence", MEANCONF)]
        elif ctor == "contrast":  # delta = first - second: A is the second name, B the first
            fld, names = c.axis()
            names = list(dict.fromkeys(names))
            pairs = [p for i, x in enumerate(names) for y in names[i + 1:] for p in _pairs_between(mine, fld[:-1], y, [x])]
            ids = ([c.metric] if c.metric else []) + list(c.metrics)
            metrics = [_ref(spec, m, ACCURACY) for m in ids] or _shown(spec, c.audit)
        else:
            why = NO_PAIRS.get(ctor, "not a difference of two cells' metrics")
        if not pairs and not why:
            why = "no two cells of the audit match its arguments"
        out.append((cid, c.audit, metrics, pairs, why))
    return out


# ------------------------------------------------------------------------------- pilot arrays


def _inputs(ref: MetricRef) -> str | None:
    if ref.name == prec.MEAN_CONFIDENCE:
        return "conf"
    m = METRICS.get(ref.name)
    return m.inputs if m is not None and m.inputs in ("correct", "conf+correct") else None


def _params(ref: MetricRef) -> dict[str, Any]:
    if ref.name == prec.MEAN_CONFIDENCE:
        return {}
    return validate_params(ref.name, dict(ref.params))


def _known(df: pd.DataFrame, inputs: str) -> pd.DataFrame:
    cols = {"correct": ["correct"], "conf+correct": ["confidence", "correct"], "conf": ["confidence"]}[inputs]
    d = df.drop_duplicates("item_id").sort_values(["item_index", "item_id"], kind="stable")
    ok = np.ones(len(d), dtype=bool)
    for col in cols:
        ok &= ~np.isnan(d[col].to_numpy(dtype=float))
    return d[ok].set_index("item_id")


def _arrays(d: pd.DataFrame, inputs: str, items=None) -> tuple[np.ndarray, ...]:
    d = d if items is None else d.loc[items]
    if inputs == "correct":
        return (d["correct"].to_numpy(dtype=float),)
    if inputs == "conf":
        return (d["confidence"].to_numpy(dtype=float),)
    return (d["confidence"].to_numpy(dtype=float), d["correct"].to_numpy(dtype=float))


# ------------------------------------------------------------------------------- the plan


def precision_plan(spec: Spec, plan: Plan, records: pd.DataFrame | None = None, pilot: str | None = None,
                   p: float = 0.5, rho: float = 0.0, alpha: float = 0.05, power: float = 0.8) -> PrecisionPlan:
    """Every cell x metric and contrast x metric of ``plan`` with its planned half-width (and MDD).

    ``records`` (a pilot run's ``records.parquet``) switches every row to the pilot source.
    """
    by_cell = dict(tuple(records.groupby("cell_id", sort=False))) if records is not None and len(records) else {}
    rows: list[Row] = []
    boot = {a: audit_bootstrap(spec, a) for a in spec.of_kind("audit")}

    def settings(audit: str) -> tuple[int, int, float]:
        return boot.get(audit, (1000, 42, 0.95))

    known: dict[tuple[str, str], pd.DataFrame] = {}
    loo: dict[tuple[str, str, tuple], np.ndarray] = {}  # leave-one-out values, shared by every pair of a cell

    def known_of(cid: str, inputs: str) -> pd.DataFrame:
        if (cid, inputs) not in known:
            known[(cid, inputs)] = _known(by_cell[cid], inputs)
        return known[(cid, inputs)]

    def loo_of(cid: str, ref: MetricRef, inputs: str, items: list) -> np.ndarray | None:
        if not prec.jackknifed(ref.name):
            return None
        key = (cid, ref.label, tuple(items))
        if key not in loo:
            loo[key] = prec.leave_one_out(ref.name, _arrays(known_of(cid, inputs), inputs, items), _params(ref))
        return loo[key]

    for c in plan.cells:
        B, seed, level = settings(c.audit)
        for shown, ref in _shown(spec, c.audit):
            row = Row("cell", c.audit, "", c.dataset, shown, c.n_items, c.estimated, "n/a", cell=c.id, level=level)
            rows.append(row)
            inputs = _inputs(ref)
            if inputs is None:
                row.note = "not computed per cell from (confidence, correctness) records: no interval to plan"
                continue
            if records is None:
                _fill(row, prec.analytic(ref.name, c.n_items, p, level, _params(ref)), "analytic")
                continue
            df = by_cell.get(c.id)
            if df is None:
                row.note = "no pilot records for this cell"
                continue
            d = known_of(c.id, inputs)
            total = df["item_id"].nunique()
            row.n_pilot = len(d)
            if not len(d):
                row.note = f"no pilot item with {'confidence and ' if inputs != 'correct' else ''}correctness known"
                continue
            row.usable = len(d) / total
            row.n_used = max(1.0, c.n_items * row.usable)
            est = prec.pilot(ref.name, _arrays(d, inputs), row.n_used, B, seed, level, _params(ref),
                             loo=loo_of(c.id, ref, inputs, list(d.index)))
            _fill(row, est, "pilot")

    contrasts = [(audit, axis, _shown(spec, audit), pairs, "") for audit in spec.of_kind("audit")
                 for axis, pairs in axis_pairs([c for c in plan.cells if c.audit == audit]).items()]
    contrasts += [(audit, f"compare {cid}", metrics, pairs, why) for cid, audit, metrics, pairs, why in compare_pairs(spec, plan.cells)]
    for audit, group, metrics, pairs, why in contrasts:
        B, seed, level = settings(audit)
        if why:
            rows.append(Row("comparison", audit, group, "", ", ".join(s for s, _ in metrics), 0, False, "n/a",
                            note=why, level=level))
            continue
        for a, b in pairs:
            n = min(a.n_items, b.n_items)
            for shown, ref in metrics:
                row = Row("contrast", audit, group, a.dataset, shown, n, a.estimated or b.estimated, "n/a",
                          cell=b.id, cell_a=a.id, level=level)
                rows.append(row)
                inputs = _inputs(ref)
                if inputs is None:
                    row.note = "not computed per cell from (confidence, correctness) records"
                    continue
                if records is None:
                    _fill(row, prec.analytic_contrast(ref.name, n, p, rho, level, alpha, power, _params(ref)), "analytic")
                    continue
                da, db = by_cell.get(a.id), by_cell.get(b.id)
                if da is None or db is None:
                    row.note = "no pilot records for one or both cells"
                    continue
                ka, kb = known_of(a.id, inputs), known_of(b.id, inputs)
                items = [i for i in ka.index if i in kb.index]
                total = max(da["item_id"].nunique(), db["item_id"].nunique())
                row.n_pilot = len(items)
                if len(items) < 2:
                    row.note = "fewer than 2 pilot items usable in both cells"
                    continue
                row.usable = len(items) / total
                row.n_used = max(1.0, n * row.usable)
                est = prec.pilot_contrast(ref.name, _arrays(ka, inputs, items), _arrays(kb, inputs, items), row.n_used,
                                          B, seed, level, alpha, power, _params(ref),
                                          loo_a=loo_of(a.id, ref, inputs, items), loo_b=loo_of(b.id, ref, inputs, items))
                _fill(row, est, "pilot")
    return PrecisionPlan(rows, p, rho, alpha, power, pilot)


def _fill(row: Row, est: prec.Estimate, source: str) -> None:
    row.half_width, row.mdd, row.sd, row.method = est.half_width, est.mdd, est.sd, est.method
    row.source = source if est.half_width is not None else "n/a"
    row.note = "; ".join(x for x in (row.note, est.note) if x)


# ------------------------------------------------------------------------------- the summary


DEGENERATE = "0 is no planning figure"


def summarize(rows: list[Row]) -> list[dict[str, Any]]:
    """One line per (kind, audit, group, dataset, metric): the rows' count, N range, the pilot's
    usable fraction, the median / min / max of their half-widths and MDDs, and each distinct note
    with the number of rows it applies to. Rows whose pilot showed no variation ("0 is no planning
    figure") are left out of the statistics when the group has other figures."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r.kind, r.audit, r.group, r.dataset, r.metric)].append(r)
    out = []
    for (kind, audit, group, dataset, metric), rs in groups.items():
        real = [r for r in rs if r.half_width is not None and DEGENERATE not in r.note]
        use = real or [r for r in rs if r.half_width is not None]
        notes: dict[str, int] = defaultdict(int)
        for r in rs:
            for n in filter(None, r.note.split("; ")):
                notes[n] += 1
        usable = [r.usable for r in rs if r.usable is not None]
        out.append({
            "kind": kind, "audit": audit, "group": group, "dataset": dataset, "metric": metric, "rows": len(rs),
            "n_min": min(r.n for r in rs), "n_max": max(r.n for r in rs), "estimated": any(r.estimated for r in rs),
            "sources": sorted({r.source for r in rs}), "level": rs[0].level,
            "half_width": _stats([r.half_width for r in use]), "mdd": _stats([r.mdd for r in use if r.mdd is not None]),
            "usable": _stats(usable), "methods": list(dict.fromkeys(r.method for r in rs if r.method)),
            "notes": [{"note": n, "rows": k} for n, k in notes.items()],
            "n_na": sum(1 for r in rs if r.half_width is None),
        })
    return out


def _stats(v: list[float]) -> dict[str, float] | None:
    if not v:
        return None
    return {"median": float(median(v)), "min": float(min(v)), "max": float(max(v))}
