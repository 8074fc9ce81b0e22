"""The annotated heatmap of every heatmap the report draws (the consistency panels, the 004 per-type
panels, the 002 correlation panels): each cell prints its value, or "n/a" where it has none (NaN), so a missing value is never
an unmarked blank; and the probe x probe matrix whose diagonal is 1 only for a probe that has a value."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

NA = "n/a"


def annotated(ax, mat: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str, *,
              vmin: float = 0.0, cmap: str = "viridis", fontsize: float = 5.5, label_size: float = 6,
              title_size: float = 8, rotation: int = 40, aspect: str | None = "auto") -> Any:
    """Draw ``mat`` (values in [vmin, 1], NaN for none) on ``ax`` with every cell annotated; the
    image, for a colour bar. On viridis a value below 0.6 prints white, else black; on a diverging
    map (``vmin < 0``) black; "n/a" prints dim grey."""
    im = ax.imshow(np.ma.masked_invalid(mat), vmin=vmin, vmax=1, cmap=cmap, aspect=aspect)
    ax.set_xticks(range(len(cols)), cols, rotation=rotation, ha="right", fontsize=label_size)
    ax.set_yticks(range(len(rows)), rows, fontsize=label_size)
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            v = mat[i, j]
            na = math.isnan(v)
            colour = "dimgray" if na else "black" if vmin < 0 or v >= 0.6 else "white"
            ax.text(j, i, NA if na else f"{v:.2f}", ha="center", va="center", fontsize=fontsize, color=colour)
    ax.set_title(title, fontsize=title_size)
    return im


def pair_matrix(probes: Sequence[str], value: Callable[[tuple[str, str]], float | None]) -> np.ndarray:
    """The symmetric probe x probe matrix of ``value((p1, p2))`` (looked up both ways round), NaN where
    a pair has none; 1 on the diagonal (a probe agrees with itself) only where the probe has a value
    with another probe, else NaN (it made no decision there, so it cannot agree with itself)."""
    mat = np.full((len(probes), len(probes)), math.nan)
    for i, p1 in enumerate(probes):
        for j, p2 in enumerate(probes):
            if i == j:
                continue
            val = value((p1, p2))
            if val is None:
                val = value((p2, p1))
            if val is not None:
                mat[i, j] = val
        if not np.isnan(mat[i]).all():
            mat[i, i] = 1.0
    return mat
