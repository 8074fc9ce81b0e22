"""Discrimination of correct from incorrect answers by confidence: AUROC."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from auditlang.metrics._inputs import group_sum, prepare, tie_groups


def _group_sums(W: np.ndarray, order: np.ndarray, starts: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``(B, G)`` weighted sums of ``v`` over the tie groups (``starts``) of ``order``."""
    return group_sum(W[:, order] * v[order], starts)


def auroc_weighted(W: np.ndarray, conf: np.ndarray, correct: np.ndarray) -> np.ndarray:
    order, starts = tie_groups(conf)
    P = _group_sums(W, order, starts, correct)
    N = _group_sums(W, order, starts, 1.0 - correct)
    below = np.cumsum(N, axis=1) - N
    num = (P * (below + 0.5 * N)).sum(axis=1)
    den = P.sum(axis=1) * N.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def auroc(conf: ArrayLike, correct: ArrayLike, missing: str = "error") -> float:
    """Area under the ROC curve for predicting correctness from confidence (study 001 App. L).

    ``AUROC = P(c_+ > c_-) + 0.5 P(c_+ = c_-)`` over pairs of a correct (+) and an incorrect (-)
    answer, i.e. the Mann–Whitney U statistic with average ranks for ties — identical to
    ``sklearn.metrics.roc_auc_score(correct, conf)``. If only one class is present (all correct or
    all wrong) AUROC is undefined and **NaN is returned** (no exception), so one degenerate cell does
    not stop a report; bootstrap replicates that are NaN are counted and excluded.
    """
    c, y = prepare("auroc", conf, correct, missing)
    return float(auroc_weighted(np.ones((1, c.size)), c, y)[0])
