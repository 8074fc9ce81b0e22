"""Accuracy-controlled calibration comparison (ACE) between two models.

Study 003 ("When Calibration Rankings Reverse"), section 4 and appendices B, E.4:
  * Instance-Aligned (IA, section 4.1): score both models only on D_IA = D_both-right U D_both-wrong;
    retention = |D_IA| / |D| (appendix E.4).
  * Distribution-Aligned (DA, section 4.2, appendix B): reweight the more accurate model A to the
    accuracy a_B of model B with importance weights
        w_i = a_B / a_A              if z_i = 1
        w_i = (1 - a_B) / (1 - a_A)  if z_i = 0
    so that sum_i w_i z_i / sum_i w_i = a_B; then
        DA-BS  = (1/W) sum_i w_i (c_i - z_i)^2
        DA-ECE = sum_b (W_b / W) |acc_w(S_b) - conf_w(S_b)|.
    Positivity (appendix B): 0 < a_m < 1 for both models, otherwise a ValueError is raised.
    The less accurate model keeps weight 1 (its DA value equals its raw value).
  * Candidate-Aligned (CA, section 4.3): every model scores every candidate of a shared pool
    U_i; ECE / Brier are computed over all candidate-level (x_i, s) instances.
  * Ranking reversal (section 5.2): the model that is better under the raw metric is worse under
    the aligned one (the signed raw and aligned differences disagree in sign).

ECE here is equal-width binning with ``bins`` bins on [0, 1], with the bin-edge convention of
:mod:`auditlang.metrics.calibration` (left-closed bins, the last one closed).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from auditlang.metrics._checks import as_binary, as_prob, same_length
from auditlang.metrics.calibration import brier_weighted, ece_weighted


def _weights(metric: str, c: np.ndarray, weights) -> np.ndarray:
    w = np.ones_like(c) if weights is None else np.asarray(weights, dtype=float)
    if w.ndim != 1:
        raise ValueError(f"{metric}: weights must be 1-D, got shape {w.shape}")
    same_length(metric, confidence=c, weights=w)
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"{metric}: weights must be finite and non-negative")
    if w.sum() <= 0:
        raise ValueError(f"{metric}: total weight is zero")
    return w


def weighted_ece(confidence, correct, weights=None, *, bins: int = 10) -> float:
    """Weighted equal-width ECE (003 section 4.2): sum_b (W_b/W) |acc_w(S_b) - conf_w(S_b)|.

    With ``weights=None`` (all 1) this is the standard ECE of 003 section 3. Binning is that of
    :func:`auditlang.metrics.calibration.ece` (10 left-closed equal-width bins by default).
    """
    c = as_prob("weighted_ece", confidence)
    z = as_binary("weighted_ece", correct)
    same_length("weighted_ece", confidence=c, correct=z)
    if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or bins < 1:
        raise ValueError(f"weighted_ece: bins must be a positive integer, got {bins!r}")
    w = _weights("weighted_ece", c, weights)
    return float(ece_weighted(w[None, :], c, z, bins=int(bins))[0])


def weighted_brier(confidence, correct, weights=None) -> float:
    """Weighted Brier score (003 section 4.2): (1/W) sum_i w_i (c_i - z_i)^2."""
    c = as_prob("weighted_brier", confidence)
    z = as_binary("weighted_brier", correct)
    same_length("weighted_brier", confidence=c, correct=z)
    w = _weights("weighted_brier", c, weights)
    return float(brier_weighted(w[None, :], c, z)[0])


# ---------------------------------------------------------------- Instance-Aligned (4.1)


@dataclass(frozen=True)
class InstanceAligned:
    retention: float          # |D_IA| / |D|  (appendix E.4)
    n_both_right: int
    n_both_wrong: int
    ece_a: float
    ece_b: float
    brier_a: float
    brier_b: float
    mean_conf_both_right_a: float  # NaN when the subset is empty
    mean_conf_both_right_b: float
    mean_conf_both_wrong_a: float
    mean_conf_both_wrong_b: float
    mask: np.ndarray          # boolean, True for items in D_IA


def instance_aligned(conf_a, correct_a, conf_b, correct_b, *, bins: int = 10) -> InstanceAligned:
    """IA calibration (003 section 4.1) on D_IA = both-right U both-wrong, with its decomposition."""
    m = "instance_aligned"
    ca, cb = as_prob(m, conf_a, "conf_a"), as_prob(m, conf_b, "conf_b")
    za, zb = as_binary(m, correct_a, "correct_a"), as_binary(m, correct_b, "correct_b")
    same_length(m, conf_a=ca, correct_a=za, conf_b=cb, correct_b=zb)
    right = (za == 1) & (zb == 1)
    wrong = (za == 0) & (zb == 0)
    mask = right | wrong
    if not mask.any():
        raise ValueError(f"{m}: the two models never share an outcome (D_IA is empty); IA is undefined")

    def mean(x: np.ndarray, sel: np.ndarray) -> float:
        return float(x[sel].mean()) if sel.any() else float("nan")

    return InstanceAligned(
        retention=float(mask.mean()),
        n_both_right=int(right.sum()),
        n_both_wrong=int(wrong.sum()),
        ece_a=weighted_ece(ca[mask], za[mask], bins=bins),
        ece_b=weighted_ece(cb[mask], zb[mask], bins=bins),
        brier_a=weighted_brier(ca[mask], za[mask]),
        brier_b=weighted_brier(cb[mask], zb[mask]),
        mean_conf_both_right_a=mean(ca, right),
        mean_conf_both_right_b=mean(cb, right),
        mean_conf_both_wrong_a=mean(ca, wrong),
        mean_conf_both_wrong_b=mean(cb, wrong),
        mask=mask,
    )


# ---------------------------------------------------------------- Distribution-Aligned (4.2)


def da_weights(correct, target_accuracy: float) -> np.ndarray:
    """Importance weights moving a model's outcome mix to ``target_accuracy`` (003 section 4.2).

    w = a_T / a_S for correct items and (1 - a_T) / (1 - a_S) for incorrect ones, where a_S is the
    model's own accuracy. Requires 0 < a_S < 1 and 0 <= a_T <= 1 (positivity, appendix B).
    """
    z = as_binary("da_weights", correct)
    a_s = float(z.mean())
    a_t = float(target_accuracy)
    if not 0.0 <= a_t <= 1.0 or np.isnan(a_t):
        raise ValueError(f"da_weights: target accuracy must lie in [0, 1], got {target_accuracy!r}")
    if a_s in (0.0, 1.0):
        raise ValueError(
            f"da_weights: source accuracy is {a_s:g}; DA needs 0 < accuracy < 1 (positivity, 003 appendix B) "
            "because the weight a_T/a_S or (1-a_T)/(1-a_S) divides by zero"
        )
    return np.where(z == 1, a_t / a_s, (1.0 - a_t) / (1.0 - a_s))


@dataclass(frozen=True)
class DistributionAligned:
    accuracy_a: float
    accuracy_b: float
    reweighted: str       # "a", "b" or "none" (equal accuracy): the model moved to the other's accuracy
    ece_a: float
    ece_b: float
    brier_a: float
    brier_b: float


def distribution_aligned(conf_a, correct_a, conf_b, correct_b, *, bins: int = 10) -> DistributionAligned:
    """DA-ECE and DA-BS (003 section 4.2): the more accurate model is evaluated at the other's accuracy.

    Both accuracies must lie strictly inside (0, 1) (positivity, appendix B); otherwise ValueError.
    """
    m = "distribution_aligned"
    ca, cb = as_prob(m, conf_a, "conf_a"), as_prob(m, conf_b, "conf_b")
    za, zb = as_binary(m, correct_a, "correct_a"), as_binary(m, correct_b, "correct_b")
    same_length(m, conf_a=ca, correct_a=za)
    same_length(m, conf_b=cb, correct_b=zb)
    aa, ab = float(za.mean()), float(zb.mean())
    for name, acc in (("a", aa), ("b", ab)):
        if acc in (0.0, 1.0):
            raise ValueError(
                f"{m}: model {name} has accuracy {acc:g}; DA requires 0 < accuracy < 1 for both models "
                "(positivity, 003 appendix B)"
            )
    wa, wb = np.ones_like(ca), np.ones_like(cb)
    moved = "none"
    if aa > ab:
        wa, moved = da_weights(za, ab), "a"
    elif ab > aa:
        wb, moved = da_weights(zb, aa), "b"
    return DistributionAligned(
        accuracy_a=aa,
        accuracy_b=ab,
        reweighted=moved,
        ece_a=weighted_ece(ca, za, wa, bins=bins),
        ece_b=weighted_ece(cb, zb, wb, bins=bins),
        brier_a=weighted_brier(ca, za, wa),
        brier_b=weighted_brier(cb, zb, wb),
    )


# ---------------------------------------------------------------- Candidate-Aligned (4.3)


def shared_candidate_pool(answers_a: Sequence[str], answers_b: Sequence[str]) -> list[tuple[int, str]]:
    """U_i = {s_i^(A), s_i^(B)} as (item index, candidate) pairs (003 section 4.3).

    U_i is a set: identical answer strings give one candidate. Normalise strings before calling
    if a looser notion of identity is wanted.
    """
    if len(answers_a) != len(answers_b):
        raise ValueError(f"shared_candidate_pool: {len(answers_a)} answers for A but {len(answers_b)} for B")
    pool: list[tuple[int, str]] = []
    for i, (sa, sb) in enumerate(zip(answers_a, answers_b, strict=False)):
        pool.append((i, sa))
        if sb != sa:
            pool.append((i, sb))
    return pool


@dataclass(frozen=True)
class CandidateAligned:
    ece: float
    brier: float
    n_candidates: int


def candidate_aligned(candidate_conf, candidate_correct, *, bins: int = 10) -> CandidateAligned:
    """CA-ECE and CA-BS of one model (003 section 4.3).

    ``candidate_conf[k]`` = e^(m)(s) for the k-th (x_i, s) instance of the shared pool;
    ``candidate_correct[k]`` = y_i(s). CA-BS = (1 / sum_i |U_i|) sum_i sum_{s in U_i} (e - y)^2.
    """
    c = as_prob("candidate_aligned", candidate_conf, "candidate_conf")
    y = as_binary("candidate_aligned", candidate_correct, "candidate_correct")
    same_length("candidate_aligned", candidate_conf=c, candidate_correct=y)
    return CandidateAligned(weighted_ece(c, y, bins=bins), weighted_brier(c, y), int(c.size))


# ---------------------------------------------------------------- ranking reversal (5.2)


def is_reversal(raw_diff: float, aligned_diff: float) -> bool:
    """True when raw and aligned signed differences (metric_A - metric_B) disagree in sign.

    A zero difference (a tie) is never a reversal (003 section 5.2: the raw winner must become
    the loser).
    """
    return bool(np.sign(raw_diff) * np.sign(aligned_diff) < 0)


def ranking_reversals(raw: Mapping[Hashable, float],
                      aligned: Mapping[Hashable, float]) -> list[tuple[Hashable, Hashable]]:
    """Model pairs whose order differs between the raw and the aligned view (003 section 5.2).

    ``raw`` and ``aligned`` map model -> metric value for the same models. Returns every pair
    (m1, m2), in the order of ``raw``'s keys, for which sign(raw[m1]-raw[m2]) is opposite to
    sign(aligned[m1]-aligned[m2]); tied pairs are not reversals.
    """
    if set(raw) != set(aligned):
        raise ValueError("ranking_reversals: raw and aligned views name different models: "
                         f"{sorted(map(str, raw))} vs {sorted(map(str, aligned))}")
    for view, vals in (("raw", raw), ("aligned", aligned)):
        for k, v in vals.items():
            if v is None or np.isnan(float(v)):
                raise ValueError(f"ranking_reversals: {view} value for {k!r} is missing")
    return [(m1, m2) for m1, m2 in itertools.combinations(list(raw), 2)
            if is_reversal(raw[m1] - raw[m2], aligned[m1] - aligned[m2])]


def reversal_pattern(raw_diff: float, aligned_diffs: Mapping[str, float]) -> frozenset[str]:
    """The views (e.g. {"IA", "DA", "CA"}) that overturn the raw winner for one comparison.

    Used for 003's exclusive-reversal tables (Tables 1-2) and Figure 4 combinations: an empty set
    is "no reversal", {"CA"} is CA-only, {"DA", "IA"} is joint DA+IA.
    """
    return frozenset(v for v, d in aligned_diffs.items() if is_reversal(raw_diff, d))


def reversal_rate(raw_diffs: Sequence[float], aligned_diffs: Sequence[float]) -> float:
    """Fraction of comparisons whose aligned difference reverses the raw one (003 section 5.2)."""
    r, a = np.asarray(raw_diffs, dtype=float), np.asarray(aligned_diffs, dtype=float)
    if r.shape != a.shape or r.ndim != 1 or r.size == 0:
        raise ValueError("reversal_rate: need two non-empty 1-D sequences of equal length")
    if np.isnan(r).any() or np.isnan(a).any():
        raise ValueError("reversal_rate: differences contain NaN")
    return float(np.mean(np.sign(r) * np.sign(a) < 0))


# ---------------------------------------------------------------- scalar forms (metric_A - metric_B)


def ia_retention(correct_a, correct_b) -> float:
    """|D_IA| / |D| (003 appendix E.4)."""
    za, zb = as_binary("ia_retention", correct_a, "correct_a"), as_binary("ia_retention", correct_b, "correct_b")
    same_length("ia_retention", correct_a=za, correct_b=zb)
    return float(np.mean(za == zb))


def ia_ece_diff(conf_a, correct_a, conf_b, correct_b, bins: int = 10) -> float:
    """IA-ECE(A) - IA-ECE(B) on D_IA (003 section 4.1)."""
    r = instance_aligned(conf_a, correct_a, conf_b, correct_b, bins=bins)
    return r.ece_a - r.ece_b


def ia_brier_diff(conf_a, correct_a, conf_b, correct_b) -> float:
    """IA-BS(A) - IA-BS(B) on D_IA (003 section 4.1)."""
    r = instance_aligned(conf_a, correct_a, conf_b, correct_b)
    return r.brier_a - r.brier_b


def da_ece_diff(conf_a, correct_a, conf_b, correct_b, bins: int = 10) -> float:
    """DA-ECE(A) - DA-ECE(B), the more accurate model moved to the other's accuracy (003 section 4.2)."""
    r = distribution_aligned(conf_a, correct_a, conf_b, correct_b, bins=bins)
    return r.ece_a - r.ece_b


def da_brier_diff(conf_a, correct_a, conf_b, correct_b) -> float:
    """DA-BS(A) - DA-BS(B) (003 section 4.2)."""
    r = distribution_aligned(conf_a, correct_a, conf_b, correct_b)
    return r.brier_a - r.brier_b


def ca_ece_diff(candidate_conf_a, candidate_conf_b, candidate_correct, bins: int = 10) -> float:
    """CA-ECE(A) - CA-ECE(B) over one shared candidate pool (003 section 4.3)."""
    return (candidate_aligned(candidate_conf_a, candidate_correct, bins=bins).ece
            - candidate_aligned(candidate_conf_b, candidate_correct, bins=bins).ece)


def ca_brier_diff(candidate_conf_a, candidate_conf_b, candidate_correct) -> float:
    """CA-BS(A) - CA-BS(B) over one shared candidate pool (003 section 4.3)."""
    return (candidate_aligned(candidate_conf_a, candidate_correct).brier
            - candidate_aligned(candidate_conf_b, candidate_correct).brier)


__all__ = ["CandidateAligned", "DistributionAligned", "InstanceAligned", "ca_brier_diff", "ca_ece_diff",
           "candidate_aligned", "da_brier_diff", "da_ece_diff", "da_weights", "distribution_aligned",
           "ia_brier_diff", "ia_ece_diff", "ia_retention", "instance_aligned", "is_reversal", "ranking_reversals",
           "reversal_pattern", "reversal_rate", "shared_candidate_pool", "weighted_brier", "weighted_ece"]
