"""Rank and linear correlation with p-values (wrapping scipy), e.g. study 000's size–spread Spearman."""

from __future__ import annotations

import warnings
from statistics import NormalDist
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from auditlang.metrics._inputs import check_missing_policy

MIN_N = 3


@dataclass(frozen=True)
class Correlation:
    """Coefficient ``r``, two-sided p-value ``p`` and the number of pairs ``n`` used."""

    r: float
    p: float
    n: int
    n_dropped: int = 0


def _pairs(metric: str, x: ArrayLike, y: ArrayLike, missing: str) -> tuple[np.ndarray, np.ndarray, int]:
    check_missing_policy(metric, missing)
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    for name, v in (("x", a), ("y", b)):
        if v.ndim != 1:
            raise ValueError(f"{metric}: {name} must be 1-D, got shape {v.shape}")
        if np.isinf(v).any():
            raise ValueError(f"{metric}: {name} contains infinite values")
    if a.size != b.size:
        raise ValueError(f"{metric}: inputs have mismatched lengths (x={a.size}, y={b.size})")
    if a.size == 0:
        raise ValueError(f"{metric}: inputs are empty")
    nan = np.isnan(a) | np.isnan(b)
    if nan.any():
        if missing == "error":
            raise ValueError(f"{metric}: {int(nan.sum())} pair(s) contain NaN; pass missing='drop' to exclude them")
        a, b = a[~nan], b[~nan]
    return a, b, int(nan.sum())


def _run(metric: str, fn: Callable[..., Any], x: ArrayLike, y: ArrayLike, missing: str) -> Correlation:
    a, b, dropped = _pairs(metric, x, y, missing)
    n = int(a.size)
    if n < MIN_N or np.all(a == a[0]) or np.all(b == b[0]):
        return Correlation(float("nan"), float("nan"), n, dropped)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fn(a, b)
    return Correlation(float(res.statistic), float(res.pvalue), n, dropped)


def spearman(x: ArrayLike, y: ArrayLike, missing: str = "error") -> Correlation:
    """Spearman rank correlation (average ranks for ties) with scipy's two-sided p-value
    (t-distribution approximation), as ``scipy.stats.spearmanr``.

    Rule for undefined cases: fewer than 3 pairs, or a constant input, gives ``r = p = NaN``.
    NaN pairs: ``missing="error"`` raises, ``"drop"`` removes the pair (counted in ``n_dropped``).
    """
    from scipy import stats  # lazy: scipy.stats costs ~0.3 s at start-up

    return _run("spearman", stats.spearmanr, x, y, missing)


def pearson(x: ArrayLike, y: ArrayLike, missing: str = "error") -> Correlation:
    """Pearson correlation with scipy's exact two-sided p-value, as ``scipy.stats.pearsonr``.

    Same undefined-case rule as :func:`spearman` (``n < 3`` or constant input -> NaN).
    """
    from scipy import stats  # lazy: scipy costs ~0.3 s at start-up; only these estimators need it

    return _run("pearson", stats.pearsonr, x, y, missing)


def fisher_interval(r: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """(low, high) of a correlation's interval by Fisher's z transform: tanh(atanh(r) -+ z_q / sqrt(n - 3)).

    Study 003 Figure 1's "rho = -0.670, n = 40, 95% CI [-0.81, -0.45]" is this interval. NaN for
    n <= 3 or an undefined r; |r| = 1 gives (r, r).
    """
    if n <= 3 or not np.isfinite(r):
        return float("nan"), float("nan")
    if abs(r) >= 1.0:
        return float(r), float(r)
    q = NormalDist().inv_cdf(0.5 + level / 2.0)
    z, se = float(np.arctanh(r)), 1.0 / float(np.sqrt(n - 3))
    return float(np.tanh(z - q * se)), float(np.tanh(z + q * se))
