"""Input validation shared by every metric: clear ValueErrors naming the metric and the problem."""

from __future__ import annotations

import numpy as np


def as_prob(metric: str, x, name: str = "confidence", allow_nan: bool = False) -> np.ndarray:
    """1-D float array of probabilities in [0, 1]; NaN rejected unless ``allow_nan``."""
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{metric}: {name} must be 1-D, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{metric}: {name} is empty")
    nan = np.isnan(a)
    if nan.any() and not allow_nan:
        raise ValueError(f"{metric}: {name} contains {int(nan.sum())} NaN value(s); drop or count missing confidences first")
    ok = a[~nan]
    if ok.size and (ok.min() < 0 or ok.max() > 1):
        raise ValueError(f"{metric}: {name} must lie in [0, 1] (got min {ok.min():.4g}, max {ok.max():.4g})")
    return a


def as_binary(metric: str, y, name: str = "correct") -> np.ndarray:
    """1-D float array of 0/1 correctness values."""
    a = np.asarray(y, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{metric}: {name} must be 1-D, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{metric}: {name} is empty")
    if np.isnan(a).any() or not np.isin(a, (0.0, 1.0)).all():
        raise ValueError(f"{metric}: {name} must contain only 0/1 (or booleans)")
    return a


def same_length(metric: str, **arrays: np.ndarray) -> None:
    lens = {k: len(v) for k, v in arrays.items()}
    if len(set(lens.values())) > 1:
        desc = ", ".join(f"{k}={n}" for k, n in lens.items())
        raise ValueError(f"{metric}: inputs have mismatched lengths ({desc})")
