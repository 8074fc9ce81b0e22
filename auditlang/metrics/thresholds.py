"""Abstention thresholds fitted on a dev split, with the 0.5 correction rule (Study 004).

004 section 2 ("Calibration"): calibration-based probes (TokProb, AskCal) "optimize a threshold to
minimize misclassifications between correct and incorrect examples" on the development split
(section 4: 1,000 dev items); a test item is accepted when its confidence is at or above the
threshold and rejected (knowledge gap -> abstain) below it (section 5.5).

Correction rule (section 5.5, Table 3): "when an unreasonable threshold is detected, we override it
and set the threshold to 0.5". The paper gives 0.98 ("reject nearly all") and 0.01 ("accepting
everything") as unreasonable examples but no cut-off; this module calls a fitted threshold
unreasonable when it lies outside ``bounds`` (default [0.05, 0.95], which flags both examples)
and replaces it with ``fallback`` (0.5). Both are parameters so a spec can state its own rule.

Fitting: candidates are the distinct dev confidences (plus 1.0 when the largest confidence is
below 1, so that "reject everything" is available) or a caller-given grid. Misclassifications =
#(accepted and wrong) + #(rejected and correct). Ties go to the candidate closest to 0.5, then to
the smaller one, so the fit is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from auditlang.metrics._checks import as_binary, as_prob, same_length

DEFAULT_BOUNDS = (0.05, 0.95)
FALLBACK_THRESHOLD = 0.5


@dataclass(frozen=True)
class ThresholdFit:
    threshold: float        # the threshold to use (after correction)
    fitted: float           # the misclassification-minimising threshold before correction
    corrected: bool         # True when the correction rule replaced ``fitted``
    dev_errors: int         # misclassifications of ``fitted`` on the dev split
    dev_size: int


def misclassifications(confidence, correct, threshold: float) -> int:
    """#(c >= t and wrong) + #(c < t and correct)."""
    c = as_prob("misclassifications", confidence)
    z = as_binary("misclassifications", correct)
    same_length("misclassifications", confidence=c, correct=z)
    acc = c >= threshold
    return int(np.sum(acc & (z == 0)) + np.sum(~acc & (z == 1)))


def fit_threshold(dev_confidence, dev_correct, *, candidates: Sequence[float] | None = None,
                  bounds: tuple[float, float] | None = DEFAULT_BOUNDS,
                  fallback: float = FALLBACK_THRESHOLD) -> ThresholdFit:
    """Fit the accept/reject threshold on the dev split, then apply the correction rule.

    ``bounds=None`` disables the correction (004 Table 3, "w/o threshold correction").
    """
    m = "fit_threshold"
    c = as_prob(m, dev_confidence, "dev_confidence")
    z = as_binary(m, dev_correct, "dev_correct")
    same_length(m, dev_confidence=c, dev_correct=z)
    if candidates is None:
        cand = np.unique(c)
        if cand[-1] < 1.0:
            cand = np.append(cand, 1.0)
    else:
        cand = np.unique(as_prob(m, candidates, "candidates"))
    if bounds is not None:
        lo, hi = bounds
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"{m}: bounds must satisfy 0 <= low <= high <= 1, got {bounds!r}")
    if not 0.0 <= fallback <= 1.0:
        raise ValueError(f"{m}: fallback threshold must lie in [0, 1], got {fallback!r}")
    # errors for every candidate at once: accepted-wrong + rejected-correct, via sorted counts
    wrong, right = np.sort(c[z == 0]), np.sort(c[z == 1])
    accepted_wrong = wrong.size - np.searchsorted(wrong, cand, side="left")
    rejected_right = np.searchsorted(right, cand, side="left")
    errors = accepted_wrong + rejected_right
    best = np.flatnonzero(errors == errors.min())
    pick = min(best, key=lambda k: (round(abs(float(cand[k]) - 0.5), 12), cand[k]))
    t = float(cand[pick])
    corrected = bounds is not None and not (bounds[0] <= t <= bounds[1])
    return ThresholdFit(float(fallback) if corrected else t, t, bool(corrected), int(errors[pick]), int(c.size))


def apply_threshold(confidence, threshold: float) -> np.ndarray:
    """Accept (1.0) when confidence >= threshold, reject (0.0) below, NaN where confidence is NaN."""
    c = as_prob("apply_threshold", confidence, allow_nan=True)
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"apply_threshold: threshold must lie in [0, 1], got {threshold!r}")
    out = (c >= threshold).astype(float)
    out[np.isnan(c)] = np.nan
    return out


__all__ = ["DEFAULT_BOUNDS", "FALLBACK_THRESHOLD", "ThresholdFit", "apply_threshold", "fit_threshold",
           "misclassifications"]
