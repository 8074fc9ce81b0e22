"""Protocol-sensitivity quantities of Study 001 (arXiv 2605.27752).

Signed calibration gap per measurement configuration X (section 3.2):

    g_X = ECE(c_verb,X, y) - ECE(c_tok,X, y)

Negative g means verbalized confidence has lower ECE. Rows without parseable verbal confidence are
excluded from the verbal side only; token metrics use the full sample (section 3.1).

The A-D grid (section 3.2, Table 2, appendix A Table 7):
    A  bare-query token probability, 10-bin ECE (main protocol)
    B  token probability after the verbalized prompt prefix, 10-bin ECE
    C  bare-query token probability, bin-free estimator mean (KDE-ECE, KS-Cal, smooth ECE)
    D  both changes.
Shifts reported per setting and as macro means over settings (Tables 2-3):
    conditioning context  g_A - g_B
    estimator choice      g_A - g_C
    second-order interaction  g_A - g_B - g_C + g_D
and sign flips between g_A and g_B (Table 3 "flips"). The same helpers serve the targeted
contrasts outside the grid (token readout g_A^T1 - g_A^T2; generated vs gold g_gen, g_gold, Table 5).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from auditlang.metrics._checks import as_binary, as_prob, same_length
from auditlang.metrics.registry import METRICS

GRID: dict[str, str] = {
    "A": "bare-query token probability, 10-bin ECE",
    "B": "verbalized-prefix token probability, 10-bin ECE",
    "C": "bare-query token probability, bin-free estimator mean",
    "D": "verbalized-prefix token probability, bin-free estimator mean",
}

Estimator = Callable[[np.ndarray, np.ndarray], float]


def _estimator(est: str | Estimator) -> Estimator:
    if callable(est):
        return est
    if est not in METRICS or METRICS[est].inputs != "conf+correct":
        known = sorted(k for k, v in METRICS.items() if v.inputs == "conf+correct")
        raise ValueError(f"calibration_gap: estimator {est!r} is not a registered (confidence, correct) metric; "
                         f"known: {known}")
    return METRICS[est].fn


def calibration_gap(verbal, token, correct, estimator: str | Estimator = "ece") -> float:
    """g_X = ECE(c_verb, y) - ECE(c_tok, y) (001 section 3.2).

    ``verbal`` may hold NaN for unparseable rows (dropped from the verbal ECE only). ``estimator``
    is a registered metric name or any (confidence, correct) -> float function: ``"ece"`` (default,
    10 equal-width bins) for configurations A/B, ``"binfree_ece"`` (mean of KDE-ECE, KS-Cal and
    smooth ECE) for C/D, or e.g. ``"brier"`` for 001 appendix L.
    """
    m = "calibration_gap"
    v = as_prob(m, verbal, "verbal confidence", allow_nan=True)
    t = as_prob(m, token, "token confidence")
    y = as_binary(m, correct)
    same_length(m, verbal=v, token=t, correct=y)
    ok = ~np.isnan(v)
    if not ok.any():
        raise ValueError(f"{m}: no parseable verbal confidence; g is undefined")
    est = _estimator(estimator)
    return float(est(v[ok], y[ok]) - est(t, y))


def _vec(metric: str, name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{metric}: {name} must be a non-empty 1-D sequence of per-setting gaps")
    if np.isnan(a).any():
        raise ValueError(f"{metric}: {name} contains NaN")
    return a


def sign_flips(g1: Sequence[float], g2: Sequence[float]) -> int:
    """Number of settings whose gap has strictly opposite sign under two protocols (001 Table 3, 5).

    A zero gap has no sign and is never counted as a flip.
    """
    a, b = _vec("sign_flips", "g1", g1), _vec("sign_flips", "g2", g2)
    same_length("sign_flips", g1=a, g2=b)
    return int(np.sum(np.sign(a) * np.sign(b) < 0))


@dataclass(frozen=True)
class GridSummary:
    settings: list[Hashable]
    macro: dict[str, float]            # macro mean of g_X per configuration
    shifts: dict[str, np.ndarray]      # per-setting shifts, keys "A-B", "A-C", "interaction"
    macro_shifts: dict[str, float]     # macro means of the shifts
    mean_abs_shifts: dict[str, float]  # macro means of |shift| (Table 3)
    flips_ab: int                      # sign flips between g_A and g_B
    flips_ac: int


def grid_summary(gaps: Mapping[Hashable, Mapping[str, float]]) -> GridSummary:
    """Macro summary of the A-D grid over settings (001 Table 2, Table 3, appendix A Table 7).

    ``gaps`` maps each (model, dataset) setting to {"A": g_A, "B": g_B, "C": g_C, "D": g_D}.
    Macro means weight settings equally (they are not pooled over examples, appendix A).
    """
    if not gaps:
        raise ValueError("grid_summary: no settings given")
    settings = list(gaps)
    cols: dict[str, np.ndarray] = {}
    for x in GRID:
        missing = [s for s in settings if x not in gaps[s]]
        if missing:
            raise ValueError(f"grid_summary: configuration {x} missing for setting(s) {missing[:3]}")
        cols[x] = _vec("grid_summary", f"g_{x}", [gaps[s][x] for s in settings])
    a, b, c, d = (cols[x] for x in "ABCD")
    shifts = {"A-B": a - b, "A-C": a - c, "interaction": a - b - c + d}
    return GridSummary(
        settings=settings,
        macro={x: float(v.mean()) for x, v in cols.items()},
        shifts=shifts,
        macro_shifts={k: float(v.mean()) for k, v in shifts.items()},
        mean_abs_shifts={k: float(np.abs(v).mean()) for k, v in shifts.items()},
        flips_ab=sign_flips(a, b),
        flips_ac=sign_flips(a, c),
    )


@dataclass(frozen=True)
class ContrastSummary:
    macro_first: float
    macro_second: float
    macro_shift: float      # mean(first - second)
    mean_abs_shift: float
    flips: int
    n: int


def contrast_summary(first: Sequence[float], second: Sequence[float]) -> ContrastSummary:
    """Macro summary of a targeted two-protocol contrast, e.g. g_gen vs g_gold (001 Table 5)."""
    a, b = _vec("contrast_summary", "first", first), _vec("contrast_summary", "second", second)
    same_length("contrast_summary", first=a, second=b)
    return ContrastSummary(float(a.mean()), float(b.mean()), float((a - b).mean()),
                           float(np.abs(a - b).mean()), sign_flips(a, b), int(a.size))


__all__ = ["GRID", "ContrastSummary", "GridSummary", "calibration_gap", "contrast_summary", "grid_summary",
           "sign_flips"]
