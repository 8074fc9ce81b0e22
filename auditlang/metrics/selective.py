"""Selective prediction: the risk–coverage curve, AURC and accuracy at a coverage level.

Ties in confidence are handled by expectation over a uniformly random order of tied examples: a
tie group that is partly covered contributes its mean correctness for every covered slot. The
result is independent of input order and equals the usual sorted-order value when there are no ties.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from auditlang.metrics._inputs import group_sum, prepare, tie_groups

_COVERAGE_TOL = 1e-9


def _desc_groups(W: np.ndarray, conf: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order, starts = tie_groups(conf, descending=True)
    Wo = W[:, order]
    m = group_sum(Wo, starts)  # examples per tie group, most confident first
    e = group_sum(Wo * (1.0 - correct[order]), starts)  # errors per group
    return m, e


def _harmonic_steps(m: np.ndarray) -> np.ndarray:
    """``H(K + m) - H(K)`` per tie group, ``K`` = examples in earlier groups, ``H`` the harmonic
    numbers (``digamma(x + 1) + euler_gamma``; a table lookup when the counts are integers)."""
    cum = np.cumsum(m, axis=1)
    cum_i = np.rint(cum)
    if np.array_equal(cum_i, cum):
        table = np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, int(cum_i.max()) + 1))))
        h, h0 = table[cum_i.astype(np.intp)], 0.0
    else:
        from scipy.special import digamma  # lazy: scipy is slow to import

        h, h0 = digamma(cum + 1), float(digamma(1.0))
    return np.diff(h, axis=1, prepend=np.full((h.shape[0], 1), h0))


def aurc_weighted(W: np.ndarray, conf: np.ndarray, correct: np.ndarray) -> np.ndarray:
    m, e = _desc_groups(W, conf, correct)
    k_before = np.cumsum(m, axis=1) - m
    e_before = np.cumsum(e, axis=1) - e
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(m > 0, e / m, 0.0)
    # sum_{j=1..m} (E + j*rate) / (K + j) = m*rate + (E - rate*K) * (H(K+m) - H(K))
    total = (m * rate + (e_before - rate * k_before) * _harmonic_steps(m)).sum(axis=1)
    n = W.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / n, np.nan)


def aurc(conf: ArrayLike, correct: ArrayLike, missing: str = "error") -> float:
    """Area under the risk–coverage curve (Geifman & El-Yaniv 2017; study 001 App. L).

    Sort by confidence, most confident first; ``risk(k)`` is the error rate of the ``k`` most
    confident answers; ``AURC = (1/N) sum_{k=1}^{N} risk(k)`` (lower is better; equals the error
    rate when confidence is constant). Ties: ``risk(k)`` is its expectation over random orders of
    tied examples, computed in closed form with harmonic numbers.
    """
    c, y = prepare("aurc", conf, correct, missing)
    return float(aurc_weighted(np.ones((1, c.size)), c, y)[0])


def risk_coverage_curve(conf: ArrayLike, correct: ArrayLike, missing: str = "error") -> tuple[np.ndarray, np.ndarray]:
    """``(coverage, risk)`` at ``k = 1..N`` covered examples, ties handled as in :func:`aurc`."""
    c, y = prepare("risk_coverage_curve", conf, correct, missing)
    order, starts = tie_groups(c, descending=True)
    ends = np.append(starts[1:], c.size)
    err = 1.0 - y[order]
    expected = np.empty(c.size)
    for s, t in zip(starts, ends):
        expected[s:t] = err[s:t].mean()
    k = np.arange(1, c.size + 1)
    return k / c.size, np.cumsum(expected) / k


def _check_coverage(metric: str, coverage: object) -> float:
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.floating)) or not 0 < coverage <= 1:
        raise ValueError(f"{metric}: coverage must be a number in (0, 1], got {coverage!r}")
    return float(coverage)


def selective_accuracy_weighted(W: np.ndarray, conf: np.ndarray, correct: np.ndarray, coverage: float) -> np.ndarray:
    m, e = _desc_groups(W, conf, correct)
    n = W.sum(axis=1)
    k = np.maximum(np.ceil(coverage * n - _COVERAGE_TOL), 1.0)
    cum_m = np.cumsum(m, axis=1)
    g = np.argmax(cum_m >= k[:, None], axis=1)  # tie group holding the k-th covered example
    rows = np.arange(W.shape[0])
    before = cum_m[rows, g] - m[rows, g]
    correct_before = (cum_m - np.cumsum(e, axis=1))[rows, g] - (m - e)[rows, g]
    with np.errstate(invalid="ignore", divide="ignore"):
        part = (k - before) * (m - e)[rows, g] / m[rows, g]
        return np.where(n > 0, (correct_before + part) / k, np.nan)


def selective_accuracy(conf: ArrayLike, correct: ArrayLike, coverage: float, missing: str = "error") -> float:
    """Accuracy on the ``k = ceil(coverage * N)`` most confident answers (``k >= 1``).

    A tie group straddling the cut contributes its mean correctness per covered slot (expectation
    over random tie order). ``coverage=1`` is plain accuracy.
    """
    coverage = _check_coverage("selective_accuracy", coverage)
    c, y = prepare("selective_accuracy", conf, correct, missing)
    return float(selective_accuracy_weighted(np.ones((1, c.size)), c, y, coverage)[0])
