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

