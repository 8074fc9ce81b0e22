"""Shared input preparation for the core metrics: validation plus the ``missing=`` policy.

Missing confidences (NaN, e.g. an unparseable verbal confidence) are never turned into zeros.
``missing="error"`` (the default) rejects them; ``missing="drop"`` excludes those rows and
:func:`drop_missing` tells how many were excluded.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from auditlang.metrics._checks import as_binary, as_prob, same_length

MISSING_POLICIES = ("error", "drop")


def check_missing_policy(metric: str, missing: str) -> None:
    if missing not in MISSING_POLICIES:
        raise ValueError(f"{metric}: missing must be one of {MISSING_POLICIES}, got {missing!r}")


def drop_missing(conf: ArrayLike, correct: ArrayLike,
                 metric: str = "drop_missing") -> tuple[np.ndarray, np.ndarray, int]:
    """Remove rows whose confidence is NaN; return ``(conf, correct, n_missing)``.

    Correctness may not be missing (ValueError). Raises ValueError when every confidence is missing.
    """
    c = as_prob(metric, conf, allow_nan=True)
    y = as_binary(metric, correct)
    same_length(metric, conf=c, correct=y)
    keep = ~np.isnan(c)
    n_missing = int(c.size - keep.sum())
    if n_missing == c.size:
        raise ValueError(f"{metric}: all {c.size} confidences are missing (NaN); nothing to score")
    return c[keep], y[keep], n_missing


def prepare(metric: str, conf, correct, missing: str = "error") -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(conf, correct)`` float arrays with the ``missing`` policy applied."""
    check_missing_policy(metric, missing)
    if missing == "drop":
        c, y, _ = drop_missing(conf, correct, metric)
        return c, y
    c = as_prob(metric, conf)
    y = as_binary(metric, correct)
    same_length(metric, conf=c, correct=y)
    return c, y


def check_int(metric: str, name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{metric}: {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{metric}: {name} must be >= {minimum}, got {value}")
    return int(value)


def check_choice(metric: str, name: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{metric}: {name} must be one of {choices}, got {value!r}")
    return value


def tie_groups(values: np.ndarray, descending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Stable sort order of ``values`` and the start offsets of runs of equal values in that order."""
    order = np.argsort(-values if descending else values, kind="stable")
    s = values[order]
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    return order, starts


def group_sum(M: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Column sums of ``M`` (already in sorted order) over the tie groups beginning at ``starts``."""
    if starts.size == M.shape[1]:  # no ties: every group is one column
        return M
    return np.add.reduceat(M, starts, axis=1)
