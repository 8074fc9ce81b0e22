"""Cell-by-cell differences between two runs' records, with paired bootstrap intervals.

Cells are matched by cell id. For one cell and metric the items both runs scored are paired by
item id (an item counts when the metric's inputs are known on both sides: correctness for
accuracy-type metrics, confidence and correctness for the others); both runs' statistic is
computed on those items (ordered by item index, then id), and :func:`~auditlang.metrics.bootstrap.paired_bootstrap_diff`
resamples the same items on both sides (``default_rng(seed).integers(0, n, (B, n))``) for the
percentile interval of B - A. A difference is called significant when that interval excludes 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from auditlang.metrics.bootstrap import paired_bootstrap_diff
from auditlang.metrics.registry import METRICS, validate_params


@dataclass(frozen=True)
class DiffMetric:
    """A metric to compare: ``label`` as shown, the registered ``name`` and its parameters."""

    label: str
    name: str
    params: tuple[tuple[str, Any], ...] = ()


@dataclass
class CellDiff:
    cell_id: str
    metric: str
    n_a: int  # items with the metric's inputs known in A
    n_b: int
    n_paired: int  # of those, the items known in both (the ones compared)
    a: float  # A's statistic on the paired items
    b: float
    diff: float  # b - a
    low: float
    high: float
    B: int
    seed: int
    level: float
    n_nan: int = 0  # bootstrap replicates where the difference was undefined (excluded)
    significant: bool | None = None  # None when no interval could be computed
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunDiff:
    rows: list[CellDiff]
    only_a: list[str] = field(default_factory=list)  # cell ids only RUN_A holds
    only_b: list[str] = field(default_factory=list)


def _paired_arrays(a: pd.DataFrame, b: pd.DataFrame, inputs: str):
    """(A arrays, B arrays, n_a, n_b) on the items both cells scored, ordered by (item_index, item_id)."""
    cols = ["correct"] if inputs == "correct" else ["confidence", "correct"]

    def known(df: pd.DataFrame) -> pd.DataFrame:
        d = df.drop_duplicates("item_id").sort_values(["item_index", "item_id"], kind="stable")
        ok = np.ones(len(d), dtype=bool)
        for c in cols:
            ok &= ~np.isnan(d[c].to_numpy(dtype=float))
        return d[ok].set_index("item_id")

    ka, kb = known(a), known(b)
    items = [i for i in ka.index if i in kb.index]
    arr_a = tuple(ka.loc[items, c].to_numpy(dtype=float) for c in cols)
    arr_b = tuple(kb.loc[items, c].to_numpy(dtype=float) for c in cols)
    return arr_a, arr_b, len(ka), len(kb)


def paired_cell_diff(cell_id: str, a: pd.DataFrame, b: pd.DataFrame, metric: DiffMetric, B: int = 1000,
                     seed: int = 42, level: float = 0.95) -> CellDiff:
    """B - A of ``metric`` for one cell's records in two runs, with its paired bootstrap interval."""
    spec = METRICS[metric.name]
    kwargs = validate_params(metric.name, dict(metric.params))
    arr_a, arr_b, n_a, n_b = _paired_arrays(a, b, spec.inputs)
    n = len(arr_a[0])
    nan = math.nan
    row = CellDiff(cell_id, metric.label, n_a, n_b, n, nan, nan, nan, nan, nan, B, seed, level)
    if n == 0:
        missing = [side for side, k in (("A", n_a), ("B", n_b)) if k == 0]
        row.note = (f"no usable item in {' and '.join(missing)} ({'correctness' if spec.inputs == 'correct' else 'confidence'} "
                    "unknown)" if missing else "no item scored by both runs")
        return row
    fn = spec.fn
    try:
        row.a, row.b = float(fn(*arr_a, **kwargs)), float(fn(*arr_b, **kwargs))
    except (ValueError, ZeroDivisionError, FloatingPointError) as e:
        row.note = f"undefined on the paired items ({e})"
        return row
    row.diff = row.b - row.a
    if math.isnan(row.diff):
        row.note = "undefined on the paired items"
        return row
    with np.errstate(invalid="ignore", divide="ignore"):
        ci = paired_bootstrap_diff(metric.name, arr_b, arr_a, B=B, seed=seed, level=level, **kwargs)
    row.low, row.high, row.n_nan = ci.low, ci.high, ci.n_nan
    if math.isnan(ci.low):
        row.note = "no bootstrap replicate defined"
        return row
    row.significant = ci.excludes(0.0)
    return row


def diff_runs(records_a: pd.DataFrame, records_b: pd.DataFrame, metrics: dict[str, list[DiffMetric]],
              settings: dict[str, tuple[int, int, float]] | None = None) -> RunDiff:
    """Compare two records tables cell by cell. ``metrics``: cell id -> metrics to compare (cells
    absent from it are compared on none); ``settings``: cell id -> (B, seed, level), default
    (1000, 42, 0.95)."""
    cells_a = list(dict.fromkeys(records_a["cell_id"])) if len(records_a) else []
    cells_b = list(dict.fromkeys(records_b["cell_id"])) if len(records_b) else []
    in_b = set(cells_b)
    shared = [c for c in cells_a if c in in_b]
    by_a = dict(tuple(records_a.groupby("cell_id", sort=False))) if shared else {}
    by_b = dict(tuple(records_b.groupby("cell_id", sort=False))) if shared else {}
    rows = []
    for cid in shared:
        B, seed, level = (settings or {}).get(cid, (1000, 42, 0.95))
        for m in metrics.get(cid, []):
            rows.append(paired_cell_diff(cid, by_a[cid], by_b[cid], m, B=B, seed=seed, level=level))
    return RunDiff(rows, [c for c in cells_a if c not in in_b], [c for c in cells_b if c not in set(cells_a)])


def significance(row: CellDiff) -> str:
    """One statement per difference."""
    if row.significant is None:
        return row.note or "no interval"
    pct = f"{row.level * 100:g} %"
    if row.significant:
        return f"B {'higher' if row.diff > 0 else 'lower'}: interval excludes 0 at {pct}"
    return f"no significant difference at {pct} (interval includes 0)"


SMALL_N = 30  # fewer paired items than this: a percentile bootstrap interval under-covers


def cautions(rows: list[CellDiff]) -> list[str]:
    """What a reader must weigh before calling a difference real: significant differences on few
    paired items, and the number of intervals computed without a multiple-comparison correction."""
    out: list[str] = []
    sig = [r for r in rows if r.significant]
    small = [r for r in sig if r.n_paired < SMALL_N]
    if small:
        out.append(f"caution: {len(small)} of the {len(sig)} significant difference(s) rest on fewer than {SMALL_N} "
                   f"paired items (smallest n = {min(r.n_paired for r in small)}); a percentile bootstrap on so few "
                   "items gives intervals that are too narrow: treat them as exploratory")
    tested = [r for r in rows if r.significant is not None]
    if len(tested) > 1:
        alpha = 1 - tested[0].level
        out.append(f"caution: {len(tested)} intervals were computed and none is corrected for multiple comparisons; "
                   f"with no real difference about {len(tested) * alpha:.1f} of them would exclude 0 by chance at "
                   f"{tested[0].level * 100:g} % (Bonferroni: level 1 - {alpha:g}/{len(tested)} per interval)")
    return out



CELL_AXES = ("model", "dataset", "variant", "protocol", "evaluator")  # cell id components after the audit


@dataclass
class Matched:
    """B's records with their cell ids renamed to the A cells they are compared with (``--match``)."""

    records_a: pd.DataFrame
    records_b: pd.DataFrame
    original_b: dict[str, str]  # renamed B cell id -> B's own cell id
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (A cell id, B cell id) matched


def match_cells(records_a: pd.DataFrame, records_b: pd.DataFrame, keys: list[str]) -> Matched:
    """Pair cells that differ only by a name. Each key is an axis (``model``, ``dataset``,
    ``variant``, ``protocol``, ``evaluator``: cells equal on every other component, one cell on
    each side) or a mapping ``A_NAME=B_NAME`` (A's cells naming A_NAME with B's cells naming
    B_NAME in the same place, everything else equal). Raises ValueError with the reason."""
    ids_a = list(dict.fromkeys(records_a["cell_id"])) if len(records_a) else []
    ids_b = list(dict.fromkeys(records_b["cell_id"])) if len(records_b) else []
    split_a = {c: c.split("/") for c in ids_a}
    split_b = {c: c.split("/") for c in ids_b}
    maps = [k.split("=", 1) for k in keys if "=" in k]
    axes = [k for k in keys if "=" not in k]
    for k in axes:
        if k not in CELL_AXES:
            raise ValueError(f"--match {k!r}: expected a cell axis ({', '.join(CELL_AXES)}) or A_NAME=B_NAME")
    positions = [1 + CELL_AXES.index(k) for k in axes]

    def key(parts: list[str]) -> tuple:
        out = list(parts)
        for p in positions:
            if p < len(out):
                out[p] = "*"
        for x, y in maps:
            out = [x if (i > 0 and v == y) else v for i, v in enumerate(out)]
        return tuple(out)

    if maps:  # only the cells that name a mapped name take part
        names_a, names_b = {x for x, _ in maps}, {y for _, y in maps}
        for x, y in maps:
            if not any(x in p[1:] for p in split_a.values()):
                raise ValueError(f"--match {x}={y}: no cell of RUN_A names {x!r}")
            if not any(y in p[1:] for p in split_b.values()):
                raise ValueError(f"--match {x}={y}: no cell of RUN_B names {y!r}")
        split_a = {c: p for c, p in split_a.items() if names_a & set(p[1:])}
        split_b = {c: p for c, p in split_b.items() if names_b & set(p[1:])}
    by_key_a: dict[tuple, list[str]] = {}
    for c, p in split_a.items():
        by_key_a.setdefault(key(p), []).append(c)
    by_key_b: dict[tuple, list[str]] = {}
    for c, p in split_b.items():
        by_key_b.setdefault(key(p), []).append(c)
    rename: dict[str, str] = {}
    pairs = []
    for k, cb in by_key_b.items():
        ca = by_key_a.get(k, [])
        if not ca:
            continue
        if len(ca) > 1 or len(cb) > 1:
            raise ValueError(f"--match {' '.join(keys)}: {len(ca)} cell(s) of RUN_A and {len(cb)} of RUN_B differ only "
                             f"there (e.g. {ca[0]} and {cb[0]}), so they cannot be paired one to one")
        rename[cb[0]] = ca[0]
        pairs.append((ca[0], cb[0]))
    keep_a = records_a[records_a["cell_id"].isin(set(split_a))] if maps else records_a
    b = records_b[records_b["cell_id"].isin(set(rename))].copy()
    b["cell_id"] = b["cell_id"].map(rename)
    unmatched_b = records_b[~records_b["cell_id"].isin(set(rename)) & records_b["cell_id"].isin(set(split_b))]
    b = pd.concat([b, unmatched_b]) if len(unmatched_b) and not maps else b
    return Matched(keep_a, b, {v: k for k, v in rename.items()}, pairs)
