"""Binned and bin-free calibration errors, proper scores and accuracy over (confidence, correctness).

Every public function validates its input (ValueError naming the metric and the problem) and
takes ``missing="error"|"drop"`` for NaN confidences (see :func:`drop_missing`).

Each metric also has a *weighted batch* form ``<name>_weighted(W, conf, correct, ...)`` where
``W`` is a ``(B, n)`` matrix of multiplicities (row ``b`` says how many times each example occurs
in bootstrap resample ``b``). The scalar metric is the batch form with ``W = 1``, so bootstrap
replicates and point estimates share one code path. Rows whose weights sum to 0 give NaN.

Bin-edge convention (``ece``/``mce``): equal-width edges are the exact decimals ``k/bins``; by
default bins are left-closed ``[k/bins, (k+1)/bins)`` and the last bin is closed ``[1-1/bins, 1]``
(numpy/sklearn/netcal convention). A confidence within ``1e-9/bins`` of an edge counts as being
on it, so ``0.3`` lands in bin ``[0.3, 0.4)`` even though the float ``0.3*10`` is inexact.
netcal computes edges with ``np.linspace`` and puts 0.3, 0.6 and 0.7 (10 bins) in the lower bin;
on every other input the two agree. ``closed="right"`` gives ``(a, b]`` bins with the first bin
``[0, 1/bins]`` (Guo et al. 2017 style, but keeping confidence 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from auditlang.metrics._checks import as_binary
from auditlang.metrics._inputs import check_choice, check_int, prepare, tie_groups
from auditlang.metrics.kernel_ece import kde_ece, smooth_ece
from auditlang.metrics.registry import BINNINGS, CLOSED

_EDGE_TOL = 1e-9


@dataclass(frozen=True)
class ReliabilityBins:
    """Per-bin data of a binned calibration estimate (for reliability diagrams).

    ``mean_conf`` and ``accuracy`` are NaN for empty bins (``counts == 0``); empty bins add 0 to ECE.
    """

    edges: np.ndarray  # (bins + 1,)
    counts: np.ndarray  # (bins,) int
    mean_conf: np.ndarray  # (bins,)
    accuracy: np.ndarray  # (bins,)
    binning: str
    closed: str
    n: int


def _row_sums(W: np.ndarray) -> np.ndarray:
    n = W.sum(axis=1)
    return np.where(n > 0, n, np.nan)


def _wsum(W: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise ``W @ v`` without BLAS (einsum is much faster than gemv for these shapes)."""
    return np.einsum("ij,j->i", W, v)


def _ones(n: int) -> np.ndarray:
    return np.ones((1, n))


# ---------------------------------------------------------------- accuracy and proper scores


def accuracy(correct: ArrayLike) -> float:
    """Fraction correct: ``mean(z_i)``. 0/1 (or boolean) input; NaN is rejected."""
    return float(as_binary("accuracy", correct).mean())


def accuracy_weighted(W: np.ndarray, correct: np.ndarray) -> np.ndarray:
    return _wsum(W, correct) / _row_sums(W)


def brier(conf: ArrayLike, correct: ArrayLike, missing: str = "error") -> float:
    """Brier score ``BS = (1/N) sum_i (c_i - z_i)^2`` (study 003 §2; study 001 App. L).

    With constant confidence q and accuracy a, ``BS = q^2 + a(1 - 2q)`` (study 003 §2).
    """
    c, y = prepare("brier", conf, correct, missing)
    return float(brier_weighted(_ones(c.size), c, y)[0])


def brier_weighted(W: np.ndarray, conf: np.ndarray, correct: np.ndarray) -> np.ndarray:
    return _wsum(W, (conf - correct) ** 2) / _row_sums(W)


def nll(conf: ArrayLike, correct: ArrayLike, eps: float = 1e-6, missing: str = "error") -> float:
    """Clipped negative log-likelihood of correctness (study 001 App. L, ``eps = 1e-6``).

    ``NLL = -(1/N) sum_i [z_i log c'_i + (1 - z_i) log(1 - c'_i)]``, ``c' = clip(c, eps, 1 - eps)``.
    """
    if not (isinstance(eps, (int, float)) and 0 < eps < 0.5):
        raise ValueError(f"nll: eps must be a number in (0, 0.5), got {eps!r}")
    c, y = prepare("nll", conf, correct, missing)
    return float(nll_weighted(_ones(c.size), c, y, eps)[0])


def nll_weighted(W: np.ndarray, conf: np.ndarray, correct: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    cc = np.clip(conf, eps, 1 - eps)
    loss = -(correct * np.log(cc) + (1 - correct) * np.log1p(-cc))
    return _wsum(W, loss) / _row_sums(W)


# ---------------------------------------------------------------- binned ECE / MCE


def _equal_width_index(conf: np.ndarray, bins: int, closed: str) -> np.ndarray:
    x = conf * bins
    r = np.rint(x)
    on_edge = np.abs(x - r) <= _EDGE_TOL
    if closed == "left":
        idx = np.where(on_edge, r, np.floor(x))
    else:
        idx = np.where(on_edge, r - 1, np.ceil(x) - 1)
    return np.clip(idx, 0, bins - 1).astype(np.intp)


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    # numpy's quantile interpolation (numpy/lib/_function_base_impl.py::_lerp), bit for bit
    d = b - a
    out = a + d * t
    return np.where(t >= 0.5, b - d * (1 - t), out)


def _rowwise_searchsorted(keys: np.ndarray, queries: np.ndarray, side: str) -> np.ndarray:
    """``searchsorted(keys[b], queries[b])`` for every row ``b`` of non-decreasing, non-negative ``keys``.

    Rows are made one sorted vector by adding ``b * span`` (exact for the integer-valued inputs used
    here), so a single ``np.searchsorted`` call does all rows.
    """
    B, k = keys.shape
    if k == 0:
        return np.zeros(queries.shape, dtype=np.intp)
    span = float(max(keys.max(), queries.max())) + 1.0
    off = (np.arange(B) * span)[:, None]
    pos = np.searchsorted((keys + off).ravel(), (queries + off).ravel(), side=side)
    return pos.reshape(queries.shape) - (np.arange(B) * k)[:, None]


def _equal_mass_index(W: np.ndarray, conf: np.ndarray, bins: int, closed: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row bin index ``(B, n)`` and edges ``(B, bins+1)``: edges are
    ``np.quantile(resample, linspace(0, 1, bins+1))`` with the ends forced to 0 and 1 (netcal)."""
    order = np.argsort(conf, kind="stable")
    s = conf[order]
    cum = np.cumsum(W[:, order], axis=1)  # (B, n)
    n = cum[:, -1]
    q = np.linspace(0.0, 1.0, bins + 1)
    pos = q[None, :] * (n[:, None] - 1)
    lo = np.maximum(np.floor(pos), 0.0)
    t = pos - lo
    hi = np.minimum(lo + 1, np.maximum(n[:, None] - 1, 0.0))

    def value_at(j: np.ndarray) -> np.ndarray:  # j-th smallest element (0-based) of each resample
        col = _rowwise_searchsorted(cum, j, side="right")
        return s[np.minimum(col, s.size - 1)]

    edges = _lerp(value_at(lo), value_at(hi), t)
    edges[:, 0] = 0.0
    edges[:, -1] = 1.0
    # compare through ranks among the distinct confidences, so equality with an edge is exact
    uniq, rank = np.unique(conf, return_inverse=True)
    # left-closed: c >= e  <=>  rank >= searchsorted(uniq, e, "left"); right-closed uses "right"
    edge_rank = np.searchsorted(uniq, edges[:, 1:-1], side="left" if closed == "left" else "right")
    idx = np.zeros(W.shape, dtype=np.intp)
    for k in range(bins - 1):  # bin index = number of inner edges at or below the value
        idx += rank[None, :] >= edge_rank[:, k : k + 1]
    return idx, edges


def _bin_stats(W: np.ndarray, conf: np.ndarray, correct: np.ndarray, bins: int, binning: str,
               closed: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(counts, conf_sums, correct_sums, edges) per row and bin, each ``(B, bins)``."""
    B = W.shape[0]
    if binning == "equal_width":
        idx = np.broadcast_to(_equal_width_index(conf, bins, closed), W.shape)
        edges = np.broadcast_to(np.arange(bins + 1) / bins, (B, bins + 1))
    else:
        idx, edges = _equal_mass_index(W, conf, bins, closed)
    flat = (np.arange(B)[:, None] * bins + idx).ravel()

    def binsum(v: np.ndarray) -> np.ndarray:
        return np.bincount(flat, weights=(W * v).ravel(), minlength=B * bins).reshape(B, bins)

    return binsum(np.ones_like(conf)), binsum(conf), binsum(correct), edges


def _check_bin_args(metric: str, bins: object, binning: str, closed: str) -> int:
    bins = check_int(metric, "bins", bins, 1)
    check_choice(metric, "binning", binning, BINNINGS)
    check_choice(metric, "closed", closed, CLOSED)
    return bins


def ece_weighted(W: np.ndarray, conf: np.ndarray, correct: np.ndarray, bins: int = 10,
                 binning: str = "equal_width", closed: str = "left") -> np.ndarray:
    counts, csum, ysum, _ = _bin_stats(W, conf, correct, bins, binning, closed)
    return np.abs(csum - ysum).sum(axis=1) / _row_sums(W)


def mce_weighted(W: np.ndarray, conf: np.ndarray, correct: np.ndarray, bins: int = 10,
                 binning: str = "equal_width", closed: str = "left") -> np.ndarray:
    counts, csum, ysum, _ = _bin_stats(W, conf, correct, bins, binning, closed)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.where(counts > 0, np.abs(csum - ysum) / counts, -np.inf)
    out = gap.max(axis=1)
    return np.where(np.isfinite(out), out, np.nan)


def ece(
    conf: ArrayLike,
    correct: ArrayLike,
    bins: int = 10,
    binning: str = "equal_width",
    closed: str = "left",
    missing: str = "error",
    return_bins: bool = False,
) -> float | tuple[float, ReliabilityBins]:
    """Binned expected calibration error (Naeini et al. 2015; Guo et al. 2017).

    ``ECE = sum_b |S_b|/N * |acc(S_b) - conf(S_b)|`` (study 003 §2; study 000 §3 and 001 §3.1 use
    ``bins=10``, equal width; 001 App. D sweeps ``bins`` in {10, 20, 30, 50}).

    binning: ``"equal_width"`` (edges ``k/bins``) or ``"equal_mass"`` (edges at the
    ``np.quantile(conf, k/bins)`` levels with the outer edges set to 0 and 1, as netcal's
    ``equal_intervals=False``; tied confidences share a bin, so bins can be unequal or empty).
    closed: ``"left"`` ``[a, b)`` with the last bin closed (default), ``"right"`` ``(a, b]`` with
    the first bin closed. Empty bins contribute 0. ``return_bins=True`` returns
    ``(ece, ReliabilityBins)``.
    """
    bins = _check_bin_args("ece", bins, binning, closed)
    c, y = prepare("ece", conf, correct, missing)
    W = _ones(c.size)
    counts, csum, ysum, edges = _bin_stats(W, c, y, bins, binning, closed)
    value = float(np.abs(csum - ysum).sum() / c.size)
    if not return_bins:
        return value
    cnt = counts[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.where(cnt > 0, csum[0] / cnt, np.nan)
        acc = np.where(cnt > 0, ysum[0] / cnt, np.nan)
    rb = ReliabilityBins(
        edges=np.array(edges[0]), counts=cnt.astype(int), mean_conf=mean_conf, accuracy=acc,
        binning=binning, closed=closed, n=int(c.size),
    )
    return value, rb


def ece_terms(conf: ArrayLike, correct: ArrayLike, bins: int = 10, binning: str = "equal_width",
              closed: str = "left", missing: str = "error") -> np.ndarray:
    """Per-item terms ``sign(S_b) (c_i - y_i)`` of :func:`ece` (``S_b`` = the sum of ``c - y`` in item
    ``i``'s bin ``b``): their mean is the ECE exactly, and their variance / N is ECE's plug-in
    (delta-method) variance with the bins' signs taken as known (``auditc plan --precision``)."""
    bins = _check_bin_args("ece", bins, binning, closed)
    c, y = prepare("ece", conf, correct, missing)
    W = _ones(c.size)
    if binning == "equal_width":
        idx = _equal_width_index(c, bins, closed)
    else:
        idx = _equal_mass_index(W, c, bins, closed)[0][0]
    gap = np.bincount(idx, weights=c - y, minlength=bins)
    return np.sign(gap)[idx] * (c - y)


def reliability_bins(conf: ArrayLike, correct: ArrayLike, bins: int = 10, binning: str = "equal_width",
                     closed: str = "left", missing: str = "error") -> ReliabilityBins:
    """Per-bin counts, mean confidence, accuracy and edges; same conventions as :func:`ece`."""
    return ece(conf, correct, bins, binning, closed, missing, return_bins=True)[1]


def mce(conf: ArrayLike, correct: ArrayLike, bins: int = 10, binning: str = "equal_width", closed: str = "left",
        missing: str = "error") -> float:
    """Maximum calibration error ``max_b |acc(S_b) - conf(S_b)|`` over non-empty bins (Naeini et al. 2015).

    Same binning conventions as :func:`ece`.
    """
    bins = _check_bin_args("mce", bins, binning, closed)
    c, y = prepare("mce", conf, correct, missing)
    return float(mce_weighted(_ones(c.size), c, y, bins, binning, closed)[0])


# ---------------------------------------------------------------- KS calibration error


def ks_ce_weighted(W: np.ndarray, conf: np.ndarray, correct: np.ndarray) -> np.ndarray:
    order, starts = tie_groups(conf)
    cum = np.cumsum(W[:, order] * (conf - correct)[order], axis=1)
    ends = np.append(starts[1:] - 1, conf.size - 1)
    return np.abs(cum[:, ends]).max(axis=1) / _row_sums(W)


def ks_ce(conf: ArrayLike, correct: ArrayLike, missing: str = "error") -> float:
    """Kolmogorov–Smirnov calibration error (Gupta & Ramdas 2021, "KS-Cal"; study 001 §3.1).

    ``KS = max_t |(1/N) sum_{i: c_i <= t} (c_i - z_i)|``: the largest gap between the cumulative
    confidence and cumulative accuracy curves over examples sorted by confidence. The maximum is
    taken at the end of each group of tied confidences, so the value does not depend on how ties are
    ordered (the reference code takes every prefix of an argsort; identical when there are no ties).
    """
    c, y = prepare("ks_ce", conf, correct, missing)
    return float(ks_ce_weighted(_ones(c.size), c, y)[0])


def binfree_ece(conf: ArrayLike, correct: ArrayLike, missing: str = "error") -> float:
    """The bin-free estimator mean of study 001 (§3.1 "Calibration estimator", configuration C):
    ``(KDE-ECE + KS-Cal + smooth ECE) / 3`` with :func:`kde_ece`, :func:`ks_ce`, :func:`smooth_ece`.
    """

    c, y = prepare("binfree_ece", conf, correct, missing)
    return float((kde_ece(c, y) + ks_ce(c, y) + smooth_ece(c, y)) / 3.0)
