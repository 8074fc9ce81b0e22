"""Percentile bootstrap intervals with the resampling units of study 000 App. E.2 and study 001 §3.2.

* cell level — :func:`bootstrap_ci`: resample the examples of one cell with replacement;
* paired example level — :func:`paired_bootstrap_diff`: the same resampled indices for two
  protocols/models on the same items, interval on the difference of the two statistics;
* macro over settings — :func:`macro_bootstrap`: resample examples within each setting
  independently, compute the per-setting statistic, average across settings (001 §3.2: "macro
  means with macro-bootstrap intervals");
* many cells × many metrics — :func:`bootstrap_many`, the fast path for a whole audit.

Resampling: ``np.random.default_rng(seed).integers(0, n, size=(B, n))`` — row ``b`` is resample
``b``. Defaults follow 000 App. E.2: ``B=1000``, ``seed=42``, 95% percentile interval
(``np.quantile`` with linear interpolation, as ``scipy.stats.bootstrap(method="percentile")``).
Metrics with a weighted batch form (accuracy, ece, mce, brier, nll, ks_ce, auroc, aurc,
selective_accuracy) are computed for all B resamples at once from the ``(B, n)`` multiplicity
matrix; any other callable is called once per resample. A replicate on which the metric is
undefined (NaN, e.g. AUROC on a one-class resample, or a ValueError such as a resample whose
confidences are all missing) is excluded from the interval and counted in ``CI.n_nan``.
With ``missing="drop"`` rows are resampled first and rows with a missing confidence are dropped
inside each resample (000 App. E.2: "Unparseable rows are dropped ... during ECE computation").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditlang.metrics import calibration, discrimination, selective
from auditlang.metrics.registry import METRICS, spec_for


@dataclass(frozen=True)
class CI:
    """A point estimate with its percentile bootstrap interval.

    ``boot_mean`` is the mean of the valid replicates (some papers report it as the point value,
    e.g. 001 Table 2); ``n_nan`` counts replicates excluded as undefined.
    """

    point: float
    low: float
    high: float
    B: int
    seed: int
    level: float = 0.95
    boot_mean: float = float("nan")
    n_nan: int = 0

    def excludes(self, value: float = 0.0) -> bool:
        """True when ``value`` lies strictly outside ``[low, high]``."""
        return bool(value < self.low or value > self.high)


_CHUNK_ELEMENTS = 50_000

_BATCH: dict[Callable[..., Any], Callable[..., np.ndarray]] = {
    calibration.accuracy: calibration.accuracy_weighted,
    calibration.brier: calibration.brier_weighted,
    calibration.nll: calibration.nll_weighted,
    calibration.ece: calibration.ece_weighted,
    calibration.mce: calibration.mce_weighted,
    calibration.ks_ce: calibration.ks_ce_weighted,
    discrimination.auroc: discrimination.auroc_weighted,
    selective.aurc: selective.aurc_weighted,
    selective.selective_accuracy: selective.selective_accuracy_weighted,
}


def register_batch(fn: Callable[..., Any], weighted: Callable[..., np.ndarray]) -> None:
    """Declare ``weighted(W, *arrays, **kwargs) -> (B,)`` as the batch form of metric ``fn``.

    ``W`` is the ``(B, n)`` multiplicity matrix; ``kwargs`` are ``fn``'s keyword arguments except
    ``missing`` (rows with a missing first array get weight 0 under ``missing="drop"``).
    """
    if not callable(fn) or not callable(weighted):
        raise ValueError("register_batch: fn and weighted must be callable")
    _BATCH[fn] = weighted


def _check_common(B: int, seed: int, level: float) -> None:
    if isinstance(B, bool) or not isinstance(B, (int, np.integer)) or B < 1:
        raise ValueError(f"bootstrap: B must be a positive integer, got {B!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"bootstrap: seed must be a non-negative integer, got {seed!r}")
    if not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"bootstrap: level must be in (0, 1), got {level!r}")


def _resolve(metric: str | Callable[..., Any]) -> Callable[..., Any]:
    if isinstance(metric, str):
        if metric not in METRICS:
            raise ValueError(f"bootstrap: unknown metric {metric!r}; known: {', '.join(sorted(METRICS))}")
        return METRICS[metric].fn
    if not callable(metric):
        raise ValueError(f"bootstrap: metric must be a callable or a registered metric name, got {metric!r}")
    return metric


def _arrays(what: str, arrays: Sequence[Any]) -> list[np.ndarray]:
    if not arrays:
        raise ValueError(f"{what}: no data arrays given")
    out = [np.asarray(a) for a in arrays]
    for a in out:
        if a.ndim != 1:
            raise ValueError(f"{what}: every data array must be 1-D, got shape {a.shape}")
    lens = {len(a) for a in out}
    if len(lens) > 1:
        raise ValueError(f"{what}: data arrays have mismatched lengths {sorted(lens)}")
    if not out[0].size:
        raise ValueError(f"{what}: data arrays are empty")
    return out


def resample_indices(n: int, B: int = 1000, seed: int = 42) -> np.ndarray:
    """The ``(B, n)`` index matrix every function here uses: ``default_rng(seed).integers(0, n, (B, n))``."""
    return np.random.default_rng(seed).integers(0, n, size=(B, n))


def _weights(idx: np.ndarray) -> np.ndarray:
    B, n = idx.shape
    flat = (idx + (np.arange(B) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=B * n).reshape(B, n).astype(float)


def _replicates(fn: Callable[..., Any], arrays: list[np.ndarray], idx: np.ndarray, kwargs: Mapping[str, Any],
                W: np.ndarray | None = None) -> np.ndarray:
    batch = _BATCH.get(fn)
    if batch is not None:
        W = _weights(idx) if W is None else W
        arrs = [a.astype(float) for a in arrays]
        if kwargs.get("missing") == "drop" and np.isnan(arrs[0]).any():
            nan = np.isnan(arrs[0])
            W = W.copy()
            W[:, nan] = 0.0
            arrs[0] = np.where(nan, 0.0, arrs[0])
        kw = {k: v for k, v in kwargs.items() if k != "missing"}
        # row chunks keep the (rows, n) temporaries cache-sized: 2-3x faster than all B rows at once
        step = max(1, _CHUNK_ELEMENTS // W.shape[1])
        parts = [np.asarray(batch(W[i : i + step], *arrs, **kw), dtype=float) for i in range(0, W.shape[0], step)]
        return np.concatenate(parts)
    out = np.empty(idx.shape[0])
    for b, row in enumerate(idx):
        try:
            out[b] = fn(*(a[row] for a in arrays), **kwargs)
        except ValueError:
            out[b] = np.nan
    return out


def _interval(point: float, reps: np.ndarray, B: int, seed: int, level: float) -> CI:
    ok = reps[~np.isnan(reps)]
    n_nan = int(reps.size - ok.size)
    if not ok.size:
        return CI(point, float("nan"), float("nan"), B, seed, level, float("nan"), n_nan)
    alpha = (1 - level) / 2
    low, high = np.quantile(ok, [alpha, 1 - alpha])
    return CI(float(point), float(low), float(high), B, seed, level, float(ok.mean()), n_nan)


def _inputs_for(fn: Callable[..., Any], arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Registered metrics that consume only correctness get the last array of a (conf, correct) pair."""
    spec = spec_for(fn)
    if spec is not None and spec.inputs == "correct" and len(arrays) == 2:
        return arrays[1:]
    return arrays


def bootstrap_ci(metric: str | Callable[..., Any], *arrays: Any, B: int = 1000, seed: int = 42,
                 level: float = 0.95, **kwargs: Any) -> CI:
    """Cell-level percentile bootstrap of ``metric(*arrays, **kwargs)`` (000 App. E.2).

    ``metric`` is a callable or a registered name (``"ece"``); ``arrays`` are aligned per-example
    arrays, resampled together. A statistic of several aligned arrays (e.g. 000's spread
    ``max - min`` of variant accuracies on the same items) is just a callable of those arrays.
    """
    _check_common(B, seed, level)
    fn = _resolve(metric)
    arrs = _arrays("bootstrap_ci", arrays)
    point = fn(*arrs, **kwargs)
    reps = _replicates(fn, arrs, resample_indices(arrs[0].size, B, seed), kwargs)
    return _interval(point, reps, B, seed, level)


def paired_bootstrap_diff(metric: str | Callable[..., Any], a_arrays: Sequence[Any], b_arrays: Sequence[Any],
                          B: int = 1000, seed: int = 42, level: float = 0.95,
                          metric_b: str | Callable[..., Any] | None = None, **kwargs: Any) -> CI:
    """Paired example-level bootstrap of ``metric(*a) - metric_b(*b)`` on the same items (000 App. E.2).

    Both sides are evaluated on the same resampled example indices (e.g. correctness under two
    prompt variants, or ECE of verbal vs token confidence with the same labels). ``kwargs`` go to
    both metrics; ``metric_b`` defaults to ``metric``.
    """
    _check_common(B, seed, level)
    fa = _resolve(metric)
    fb = fa if metric_b is None else _resolve(metric_b)
    a = _arrays("paired_bootstrap_diff", a_arrays)
    b = _arrays("paired_bootstrap_diff", b_arrays)
    if a[0].size != b[0].size:
        raise ValueError(f"paired_bootstrap_diff: sides have different numbers of items ({a[0].size} vs {b[0].size}); "
                         "pairing needs the same items in the same order")
    point = fa(*a, **kwargs) - fb(*b, **kwargs)
    idx = resample_indices(a[0].size, B, seed)
    W = _weights(idx)
    reps = _replicates(fa, a, idx, kwargs, W) - _replicates(fb, b, idx, kwargs, W)
    return _interval(point, reps, B, seed, level)


def macro_bootstrap(metric: str | Callable[..., Any], settings: Sequence[Sequence[Any]], B: int = 1000,
                    seed: int = 42, level: float = 0.95, **kwargs: Any) -> CI:
    """Macro mean over settings with a macro-bootstrap interval (001 §3.2, Table 2).

    ``settings`` is a sequence of per-setting array tuples (each setting may have its own size).
    Replicate ``b`` resamples examples within every setting independently (one generator seeded
    with ``seed``, settings drawn in order), computes ``metric`` per setting and averages over
    settings with equal weight. ``point`` is the mean of the per-setting point values; ``boot_mean``
    is the mean of the macro replicates (001 reports the latter in Table 2, see its Table 10 note).
    A per-setting paired gap is a callable of that setting's arrays.
    """
    _check_common(B, seed, level)
    fn = _resolve(metric)
    if not settings:
        raise ValueError("macro_bootstrap: no settings given")
    rng = np.random.default_rng(seed)
    points, reps = [], []
    for i, s in enumerate(settings):
        arrs = _arrays(f"macro_bootstrap (setting {i})", s)
        points.append(fn(*arrs, **kwargs))
        reps.append(_replicates(fn, arrs, rng.integers(0, arrs[0].size, size=(B, arrs[0].size)), kwargs))
    return _interval(float(np.mean(points)), np.mean(reps, axis=0), B, seed, level)


MetricChoice = str | Callable[..., Any] | tuple[str | Callable[..., Any], Mapping[str, Any]]


def bootstrap_many(cells: Mapping[Hashable, Sequence[Any]], metrics: Mapping[str, MetricChoice], B: int = 1000,
                   seed: int = 42, level: float = 0.95) -> dict[tuple[Hashable, str], CI]:
    """Cell-level intervals for many cells × many metrics, sharing one resample matrix per cell.

    ``cells`` maps a cell key to its ``(conf, correct)`` arrays; ``metrics`` maps an output label to
    a metric name/callable or a ``(metric, kwargs)`` pair, e.g. ``{"ece": "ece",
    "ece_em": ("ece", {"binning": "equal_mass"}), "sel80": ("selective_accuracy", {"coverage": 0.8})}``.
    Every cell is resampled with ``resample_indices(n, B, seed)``, so each result equals
    ``bootstrap_ci(metric, conf, correct, B=B, seed=seed, **kwargs)`` for that cell (and cells of the
    same size on the same items are resampled in a paired way).
    """
    _check_common(B, seed, level)
    resolved: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}
    for label, choice in metrics.items():
        if isinstance(choice, tuple):
            resolved[label] = (_resolve(choice[0]), dict(choice[1]))
        else:
            resolved[label] = (_resolve(choice), {})
    out: dict[tuple[Hashable, str], CI] = {}
    for key, arrays in cells.items():
        arrs = _arrays(f"bootstrap_many (cell {key!r})", arrays)
        idx = resample_indices(arrs[0].size, B, seed)
        W = _weights(idx)
        for label, (fn, kw) in resolved.items():
            use = _inputs_for(fn, arrs)
            point = fn(*use, **kw)
            out[(key, label)] = _interval(point, _replicates(fn, use, idx, kw, W), B, seed, level)
    return out


# ---------------------------------------------------------------- resampling units (bootstrap(unit=...))


def has_batch(metric: str | Callable[..., Any]) -> bool:
    """True when ``metric`` has a weighted batch form (all B replicates at once)."""
    return _resolve(metric) in _BATCH


def percentile_ci(point: float, reps: np.ndarray, B: int, seed: int, level: float = 0.95) -> CI:
    """The percentile interval of replicates ``reps`` (NaN replicates excluded and counted)."""
    _check_common(B, seed, level)
    return _interval(point, np.asarray(reps, dtype=float), B, seed, level)


def masked_replicates(metric: str | Callable[..., Any], arrays: Sequence[Any], idx: np.ndarray,
                      **kwargs: Any) -> np.ndarray:
    """Replicates of ``metric`` over the resamples ``idx`` ``(B, n)`` of aligned ``arrays``, with the
    rows that hold a NaN in any array dropped *inside* each resample.

    This is how a paired resample of items treats a row a cell lacks (an unparsed verbal
    confidence, an item the cell did not score): the item is drawn, then left out of that cell's
    statistic (000 App. E.2: "Unparseable rows are dropped ... during ECE computation"). With no
    NaN it equals the replicates :func:`bootstrap_ci` computes from the same ``idx``.
    """
    fn = _resolve(metric)
    arrs = _arrays("masked_replicates", arrays)
    nan = np.zeros(arrs[0].size, dtype=bool)
    for a in arrs:
        if np.issubdtype(a.dtype, np.floating):
            nan |= np.isnan(a)
    if fn in _BATCH:
        W = _weights(idx)
        W[:, nan] = 0.0
        clean = [np.where(nan, 0.0, a.astype(float)) for a in arrs]
        kw = {k: v for k, v in kwargs.items() if k != "missing"}
        step = max(1, _CHUNK_ELEMENTS // W.shape[1])
        with np.errstate(invalid="ignore", divide="ignore"):
            parts = []
            for i in range(0, W.shape[0], step):
                Wi = W[i : i + step]
                vals = np.asarray(_BATCH[fn](Wi, *clean, **kw), dtype=float)
                parts.append(np.where(Wi.sum(axis=1) > 0, vals, np.nan))  # a resample with no usable row
        return np.concatenate(parts)
    out = np.empty(idx.shape[0])
    for b, row in enumerate(idx):
        keep = row[~nan[row]]
        try:
            out[b] = fn(*(a[keep] for a in arrs), **kwargs) if keep.size else np.nan
        except ValueError:
            out[b] = np.nan
    return out


def masked_point(metric: str | Callable[..., Any], arrays: Sequence[Any], **kwargs: Any) -> float:
    """``metric`` on the rows of ``arrays`` without a NaN (NaN when none is left)."""
    fn = _resolve(metric)
    arrs = _arrays("masked_point", arrays)
    nan = np.zeros(arrs[0].size, dtype=bool)
    for a in arrs:
        if np.issubdtype(a.dtype, np.floating):
            nan |= np.isnan(a)
    if nan.all():
        return float("nan")
    try:
        return float(fn(*(a[~nan] for a in arrs), **kwargs))
    except ValueError:
        return float("nan")


def paired_cells_bootstrap(cells: Mapping[Hashable, Sequence[Any]], metric: str | Callable[..., Any], B: int = 1000,
                           seed: int = 42, level: float = 0.95, **kwargs: Any) -> dict[Hashable, CI]:
    """``bootstrap(unit=paired)`` for per-cell intervals: cells over the same items share one
    resample of the items (000 App. E.2 "paired example-level resampling ... within a (model,
    dataset) cell").

    Every cell's arrays are aligned on the same item order (NaN where the cell has no usable
    value for an item); the items are resampled once with ``resample_indices(n, B, seed)`` and each
    cell's rows with a NaN are dropped inside every resample (:func:`masked_replicates`). The
    replicate ``b`` of two cells then comes from the same items, so their difference is the
    paired bootstrap of the difference.
    """
    _check_common(B, seed, level)
    if not cells:
        raise ValueError("paired_cells_bootstrap: no cells given")
    sizes = {len(_arrays(f"paired_cells_bootstrap (cell {k!r})", a)[0]) for k, a in cells.items()}
    if len(sizes) != 1:
        raise ValueError(f"paired_cells_bootstrap: cells are not aligned on the same items (sizes {sorted(sizes)})")
    idx = resample_indices(sizes.pop(), B, seed)
    return {k: _interval(masked_point(metric, a, **kwargs), masked_replicates(metric, a, idx, **kwargs), B, seed, level)
            for k, a in cells.items()}


def setting_indices(sizes: Sequence[int], B: int = 1000, seed: int = 42) -> list[np.ndarray]:
    """The item resamples of :func:`macro_bootstrap`: one generator seeded with ``seed``, one
    ``(B, n_s)`` matrix per setting, drawn in order (settings are resampled independently)."""
    _check_common(B, seed, 0.95)
    rng = np.random.default_rng(seed)
    return [rng.integers(0, n, size=(B, n)) for n in sizes]


def macro_ci(points: Sequence[float], replicates: Sequence[np.ndarray], B: int, seed: int,
             level: float = 0.95) -> CI:
    """Macro mean over settings with its macro-bootstrap interval (001 §3.2, Table 2).

    ``replicates[s]`` are setting ``s``'s B replicates from its own (independent) item resample
    (:func:`setting_indices`); replicate ``b`` of the macro mean is their equal-weight mean. ``point``
    is the mean of the per-setting points, ``boot_mean`` the mean of the macro replicates (001
    reports the latter in Table 2). Equals :func:`macro_bootstrap` for a metric of each setting.
    """
    if not points or len(points) != len(replicates):
        raise ValueError("macro_ci: need one replicate vector per setting point")
    reps = np.mean(np.vstack([np.asarray(r, dtype=float) for r in replicates]), axis=0)
    return percentile_ci(float(np.mean(points)), reps, B, seed, level)
