"""Precision planning: expected interval half-widths and minimum detectable differences (MDD).

Two sources, both pure numpy:

* **analytic**, from the declared number of items ``n`` alone (no run):
  accuracy — binomial, ``h = z * sqrt(p(1-p)/n)`` at a planning accuracy ``p`` (0.5: the widest);
  brier — the plug-in variance of the per-item loss ``(c - y)^2`` under a stated assumption: a
  calibrated model (``y ~ Bernoulli(c)``) whose confidence is ``Beta(2p, 2(1-p))`` (mean ``p``;
  uniform at p = 0.5, per-item SD 0.197; the worst-case bound 0.5 was 2.7x too wide for a
  calibrated model; every such figure carries the note ``BRIER_CAVEAT``: an over-confident model's
  spread is wider, up to the bound ``z * 0.5 / sqrt(n)``); mean confidence — a bound: a per-item value in [0, 1] has variance <= 1/4
  (Popoviciu), so ``h <= z * 0.5 / sqrt(n)``; auroc — Hanley & McNeil (1982), with
  ``n1 = round(p n)`` correct and ``n0 = n - n1`` wrong items at AUROC 0.5 (its SE's maximum for
  balanced classes, within 3 % of it down to 10 % wrong items);
  selective_accuracy(coverage=c) — binomial on the ``c n`` answered items (the threshold's own
  randomness ignored). ECE, MCE, the kernel/bin-free ECEs, NLL and AURC get none: binned ECE is
  biased upward at small n and not normal near 0, NLL's per-item loss is unbounded up to
  ``-log(eps)``; a pilot run gives them.
* **pilot**, from a finished small run's per-item values: the project's percentile bootstrap
  (:func:`~auditlang.metrics.bootstrap.bootstrap_ci`, same B and seed) gives the half-width at the
  pilot's ``n_p``, scaled to the declared ``n`` as ``h_n = h_p * sqrt(n_p / n)``. Binned ECE
  (``ece``) takes its plug-in variance instead: the SD ``s`` of its per-item terms
  ``sign(S_b)(c_i - y_i)`` (:func:`~auditlang.metrics.calibration.ece_terms`, mean = ECE) on the
  pilot, ``h = z s / sqrt(n)``: the bootstrap of a small pilot under-states an over-confident
  cell's ECE spread (30 items planned at 300: 0.8x of the simulated spread; plug-in 0.97x), while
  near ECE 0 (bins whose gap sign is uncertain) the plug-in leans conservative (1.7x). A paired
  ECE difference keeps the paired bootstrap below: the linearisation misses items that change
  bins between the two cells (0.7x for two near-identical protocols).

Paired contrasts (two cells on the same items): the per-item difference ``d_i`` has standard
deviation ``sd_d``; the interval half-width of the mean difference is ``z_{1-a/2} sd_d / sqrt(n)``
and the minimum detectable difference at two-sided level ``a`` and power ``1-b`` is
``MDD = (z_{1-a/2} + z_{1-b}) * sd_d / sqrt(n)`` (a = 0.05, 1-b = 0.8: 2.80 sd_d / sqrt(n)).
Analytically ``sd_d^2 = s_A^2 + s_B^2 - 2 rho s_A s_B`` with both sides' per-item variance at the
planning value and an assumed item-level correlation ``rho`` (default 0: uncorrelated sides; the
same items usually correlate positively, which makes the real MDD smaller); for AUROC the same
with Hanley & McNeil's SE (their 1983 paper, correlation ``r = rho``). From a pilot, ``sd_d`` is the
sample SD of the per-item differences for metrics that are a mean of per-item values (accuracy,
brier, nll, mean confidence), else ``sqrt(n_p)`` times the SD of the paired bootstrap replicates
of the difference (same resampled items on both sides). Metrics without a weighted batch form
(the kernel and bin-free ECEs: one call per replicate, up to ~40 ms each) use the delete-one
jackknife instead of the bootstrap, on both paths: ``n_p`` calls per cell, which a caller can
cache (:func:`leave_one_out`); they are smooth functions of the data, where the jackknife SE holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from auditlang.metrics.bootstrap import bootstrap_ci, has_batch, masked_replicates, resample_indices
from auditlang.metrics.calibration import ece_terms
from auditlang.metrics.registry import METRICS

MEAN_CONFIDENCE = "mean_confidence"  # the statistic of study 001's supplied-answer contrasts (a pseudo-metric here)

# metrics that are the mean of one value per item: (conf, correct) -> per-item values
_PER_ITEM = {"accuracy", "brier", "nll", MEAN_CONFIDENCE}
# metrics whose pilot figure is a plug-in variance of per-item terms (their mean is the metric), not the bootstrap
_PLUG_IN = {"ece"}
BRIER_ASSUMPTION = "a calibrated model (y ~ Bernoulli(c)) with confidence c ~ Beta(2p, 2(1-p))"
# said next to every analytic Brier figure (issue 39 item 5): a real model is rarely calibrated, and an
# over-confident one's spread was 1.5-2.2x the calibrated figure in simulation; the [0, 1] loss bounds it
BRIER_CAVEAT = ("no pilot: the figure assumes a calibrated model, and an over- or under-confident model's half-width is "
                "wider (up to the bound z*0.5/sqrt(N), per-item loss in [0, 1]): run --pilot to measure it")

NO_ANALYTIC = {
    "ece": "binned ECE is biased upward at small n and not normal near 0: no honest analytic half-width; use --pilot",
    "mce": "the maximum bin gap has no usable normal approximation; use --pilot",
    "smooth_ece": "a kernel ECE has no closed-form variance; use --pilot",
    "kde_ece": "a kernel ECE has no closed-form variance; use --pilot",
    "ks_ce": "a Kolmogorov-Smirnov statistic is not normal near 0; use --pilot",
    "binfree_ece": "a mean of bin-free ECEs has no closed-form variance; use --pilot",
    "nll": "the per-item loss is unbounded up to -log(eps), so no useful bound; use --pilot",
    "aurc": "AURC depends on the whole confidence ranking; no closed form; use --pilot",
}


def z_quantile(q: float) -> float:
    """The standard normal quantile ``z_q`` (``z_0.975 = 1.96``, ``z_0.8 = 0.8416``)."""
    return NormalDist().inv_cdf(q)


def z_level(level: float = 0.95) -> float:
    """``z_{1-a/2}`` of a two-sided interval at ``level`` (1.96 for 0.95)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    return z_quantile(0.5 + level / 2)


def mdd_factor(alpha: float = 0.05, power: float = 0.8) -> float:
    """``z_{1-alpha/2} + z_power``: 2.8016 for alpha 0.05 and power 0.8."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha!r}, {power!r}")
    return z_quantile(1 - alpha / 2) + z_quantile(power)


def binomial_half_width(n: int, p: float = 0.5, level: float = 0.95) -> float:
    """``z * sqrt(p(1-p)/n)``: the normal-approximation half-width of a proportion."""
    _check_n(n)
    _check_p(p)
    return z_level(level) * math.sqrt(p * (1 - p) / n)


def hanley_mcneil_se(auc: float, n_pos: int, n_neg: int) -> float:
    """Hanley & McNeil (1982) standard error of an AUROC from ``n_pos`` positives and ``n_neg`` negatives.

    ``SE^2 = [A(1-A) + (n1-1)(Q1-A^2) + (n0-1)(Q2-A^2)] / (n1 n0)``, ``Q1 = A/(2-A)``, ``Q2 = 2A^2/(1+A)``.
    """
    if not 0 < auc < 1:
        raise ValueError(f"auc must be in (0, 1), got {auc!r}")
    if n_pos < 1 or n_neg < 1:
        raise ValueError(f"AUROC needs both classes, got {n_pos} positive and {n_neg} negative")
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc * auc) + (n_neg - 1) * (q2 - auc * auc)) / (n_pos * n_neg)
    return math.sqrt(var)


def mdd(sd_diff: float, n: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """``(z_{1-alpha/2} + z_power) * sd_diff / sqrt(n)``: the smallest true mean difference a two-sided
    paired z-test at ``alpha`` detects with probability ``power``."""
    _check_n(n)
    return mdd_factor(alpha, power) * sd_diff / math.sqrt(n)


def scale_half_width(h_pilot: float, n_pilot: float, n: float) -> float:
    """``h_pilot * sqrt(n_pilot / n)``: a half-width measured at ``n_pilot`` items, at ``n`` items."""
    _check_n(n_pilot)
    _check_n(n)
    return h_pilot * math.sqrt(n_pilot / n)


def _check_n(n: float) -> None:
    if not n > 0:
        raise ValueError(f"number of items must be positive, got {n!r}")


def _check_p(p: float) -> None:
    if not 0 <= p <= 1:
        raise ValueError(f"planning accuracy p must be in [0, 1], got {p!r}")


@dataclass(frozen=True)
class Estimate:
    """A planned half-width (and, for a contrast, MDD); ``half_width`` None means n/a, ``note`` says why.

    ``sd`` is the per-item standard deviation behind it (of the value, or of the paired difference)
    where one exists; ``method`` names the formula or the pilot procedure.
    """

    half_width: float | None
    method: str
    mdd: float | None = None
    sd: float | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"half_width": self.half_width, "mdd": self.mdd, "sd": self.sd, "method": self.method, "note": self.note}


def calibrated_brier_sd(p: float) -> float:
    """SD of the per-item Brier loss ``(c - y)^2`` when ``c ~ Beta(2p, 2(1-p))`` and ``y ~ Bernoulli(c)``:
    ``E[b] = E[c(1-c)]``, ``E[b^2] = E[c(1-c)^4 + (1-c)c^4]`` by Beta moments (0.197 at p = 0.5)."""
    _check_p(p)
    if p in (0.0, 1.0):
        return 0.0
    a, b = 2 * p, 2 * (1 - p)

    def m(k: int, j: int) -> float:  # E[c^k (1-c)^j] = B(a+k, b+j) / B(a, b)
        return math.exp(math.lgamma(a + k) + math.lgamma(b + j) - math.lgamma(a + b + k + j)
                        - math.lgamma(a) - math.lgamma(b) + math.lgamma(a + b))

    mean = m(1, 1)
    return math.sqrt(max(m(1, 4) + m(4, 1) - mean * mean, 0.0))


def _per_item_sd(metric: str, p: float, params: Mapping[str, Any]) -> tuple[float, str] | None:
    """The planning SD of one item's value for metrics that are a mean over items."""
    if metric == "accuracy":
        return math.sqrt(p * (1 - p)), f"binomial at p={p:g}"
    if metric == "brier":
        return calibrated_brier_sd(p), f"plug-in variance, assumption: {BRIER_ASSUMPTION} at p={p:g}"
    if metric == MEAN_CONFIDENCE:
        return 0.5, "bound: per-item value in [0, 1], variance <= 1/4"
    return None


def analytic(metric: str, n: int, p: float = 0.5, level: float = 0.95, params: Mapping[str, Any] | None = None) -> Estimate:
    """The half-width of ``metric`` on ``n`` items from declared sizes alone (module docstring)."""
    params = dict(params or {})
    _check_p(p)
    if n < 1:
        return Estimate(None, "analytic", note="no items")
    z = z_level(level)
    base = _per_item_sd(metric, p, params)
    if base is not None:
        sd, how = base
        return Estimate(z * sd / math.sqrt(n), f"{how}: z*sd/sqrt(n)", sd=sd,
                        note=BRIER_CAVEAT if metric == "brier" else "")
    if metric == "auroc":
        n1 = int(round(p * n))
        n1 = min(max(n1, 1), n - 1) if n >= 2 else 0
        if n < 2:
            return Estimate(None, "analytic", note="AUROC needs a correct and a wrong item")
        se = hanley_mcneil_se(0.5, n1, n - n1)
        return Estimate(z * se, f"Hanley-McNeil SE at AUROC 0.5, {n1} correct / {n - n1} wrong (p={p:g})",
                        sd=se * math.sqrt(n))
    if metric == "selective_accuracy":
        cov = float(params.get("coverage") or 1.0)
        k = max(1, int(math.floor(cov * n)))
        return Estimate(z * math.sqrt(p * (1 - p) / k), f"binomial at p={p:g} on the {k} answered items "
                        f"(coverage {cov:g}; threshold randomness ignored)", sd=math.sqrt(p * (1 - p)))
    return Estimate(None, "analytic", note=NO_ANALYTIC.get(metric, "no analytic approximation for this metric; use --pilot"))


def analytic_contrast(metric: str, n: int, p: float = 0.5, rho: float = 0.0, level: float = 0.95,
                      alpha: float = 0.05, power: float = 0.8, params: Mapping[str, Any] | None = None) -> Estimate:
    """Half-width and MDD of a paired difference of ``metric`` between two cells on the same ``n`` items.

    ``sd_d = sqrt(2 s^2 (1 - rho))`` with ``s`` the planning per-item SD of either side (both at the
    same planning value) and ``rho`` the assumed item-level correlation of the two sides.
    """
    if not -1 <= rho <= 1:
        raise ValueError(f"rho must be in [-1, 1], got {rho!r}")
    one = analytic(metric, n, p, level, params)
    if one.half_width is None or one.sd is None:
        return Estimate(None, "analytic", note=one.note)
    sd_d = math.sqrt(2 * one.sd ** 2 * (1 - rho))
    n_eff = n
    if metric == "selective_accuracy":  # both sides answer their own top c*n items: pairing on those is not exact
        n_eff = max(1, int(math.floor(float((params or {}).get("coverage") or 1.0) * n)))
    how = f"{one.method.split(':')[0]}; sd_d = sqrt(2 s^2 (1 - rho)), rho={rho:g}"
    return Estimate(z_level(level) * sd_d / math.sqrt(n_eff), how, mdd=mdd(sd_d, n_eff, alpha, power), sd=sd_d,
                    note=one.note)


# ------------------------------------------------------------------------------------------- pilot


def _kwargs(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (params or {}).items() if v is not None}


def per_item_values(metric: str, arrays: Sequence[np.ndarray], params: Mapping[str, Any] | None = None) -> np.ndarray | None:
    """One value per item whose mean is ``metric`` (accuracy, brier, nll, mean confidence), else None.

    ``arrays`` is ``(correct,)`` or ``(conf, correct)``.
    """
    if metric not in _PER_ITEM:
        return None
    if metric == "accuracy":
        return np.asarray(arrays[-1], dtype=float)
    conf = np.asarray(arrays[0], dtype=float)
    if metric == MEAN_CONFIDENCE:
        return conf
    y = np.asarray(arrays[1], dtype=float)
    if metric == "brier":
        return (conf - y) ** 2
    eps = float((params or {}).get("eps") or 1e-6)
    c = np.clip(conf, eps, 1 - eps)
    return -(y * np.log(c) + (1 - y) * np.log1p(-c))


def jackknifed(metric: str) -> bool:
    """True for a registered metric without a batch form (the bootstrap would call it B times)."""
    return metric not in _PER_ITEM and metric in METRICS and not has_batch(metric)


def leave_one_out(metric: str, arrays: Sequence[np.ndarray], params: Mapping[str, Any] | None = None) -> np.ndarray:
    """``metric`` on the pilot's items without item ``i``, for each ``i`` (NaN where undefined)."""
    fn = METRICS[metric].fn
    arrs = [np.asarray(a, dtype=float) for a in arrays]
    kw = _kwargs(params)
    out = np.full(arrs[0].size, np.nan)
    keep = np.ones(arrs[0].size, dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        for i in range(arrs[0].size):
            keep[i] = False
            try:
                out[i] = float(fn(*(a[keep] for a in arrs), **kw))
            except (ValueError, FloatingPointError, ZeroDivisionError):
                pass
            keep[i] = True
    return out


def jackknife_se(loo: np.ndarray) -> float | None:
    """The delete-one jackknife SE ``sqrt((n-1)/n * sum (t_i - mean t)^2)`` over the defined values."""
    t = np.asarray(loo, dtype=float)
    t = t[~np.isnan(t)]
    if t.size < 2:
        return None
    return math.sqrt((t.size - 1) / t.size * float(np.sum((t - t.mean()) ** 2)))


def pilot(metric: str, arrays: Sequence[np.ndarray], n: float, B: int = 1000, seed: int = 42, level: float = 0.95,
          params: Mapping[str, Any] | None = None, loo: np.ndarray | None = None) -> Estimate:
    """The half-width at ``n`` items scaled from the percentile bootstrap on a pilot's aligned ``arrays``.

    ``metric`` is a registered metric name (or ``mean_confidence``); the bootstrap is
    :func:`bootstrap_ci` with the audit's ``B`` and ``seed``. A metric without a batch form takes
    ``z`` times the jackknife SE instead (``loo``: its :func:`leave_one_out` values, if computed).
    """
    arrs = [np.asarray(a, dtype=float) for a in arrays]
    n_p = arrs[0].size if arrs else 0
    if n_p < 2:
        return Estimate(None, "pilot", note="fewer than 2 usable pilot items")
    vals = per_item_values(metric, arrs, params)
    if vals is not None and float(np.ptp(vals)) == 0.0:
        return Estimate(0.0, f"pilot bootstrap at n_p={n_p}", sd=0.0,
                        note="no variation in the pilot (every item scored the same): 0 is no planning figure")
    if metric in _PLUG_IN:
        kw = {k: v for k, v in _kwargs(params).items() if k in ("bins", "binning", "closed")}
        sd = float(np.std(ece_terms(arrs[0], arrs[1], **kw), ddof=1))
        return Estimate(z_level(level) * sd / math.sqrt(n), f"pilot plug-in variance at n_p={n_p}: SD of the "
                        "per-item terms sign(gap of the bin)(c - y), whose mean is the ECE; z*sd/sqrt(n)", sd=sd)
    if jackknifed(metric):
        se = jackknife_se(leave_one_out(metric, arrs, params) if loo is None else loo)
        if se is None:
            return Estimate(None, "pilot", note="undefined on the pilot's leave-one-out subsets")
        return Estimate(scale_half_width(z_level(level) * se, n_p, n), f"pilot jackknife SE at n_p={n_p} "
                        "(no batch form), z*SE scaled by sqrt(n_p/n)", sd=se * math.sqrt(n_p))
    fn: Any = (lambda c: float(np.mean(c))) if metric == MEAN_CONFIDENCE else metric
    use = arrs[:1] if metric == MEAN_CONFIDENCE else arrs
    with np.errstate(invalid="ignore", divide="ignore"):
        try:
            ci = bootstrap_ci(fn, *use, B=B, seed=seed, level=level, **_kwargs(params))
        except (ValueError, FloatingPointError, ZeroDivisionError) as e:
            return Estimate(None, "pilot", note=f"undefined on the pilot ({e})")
    if math.isnan(ci.low) or math.isnan(ci.high):
        return Estimate(None, "pilot", note="no bootstrap replicate defined on the pilot (e.g. AUROC with one class)")
    h_p = (ci.high - ci.low) / 2
    note = "some bootstrap replicates undefined (e.g. a resample with one class): the interval is of the rest" if ci.n_nan else ""
    sd = float(np.std(vals, ddof=1)) if vals is not None else None
    return Estimate(scale_half_width(h_p, n_p, n), f"pilot bootstrap at n_p={n_p} (B={B}, seed={seed}), "
                    "scaled by sqrt(n_p/n)", sd=sd, note=note)


def pilot_contrast(metric: str, a_arrays: Sequence[np.ndarray], b_arrays: Sequence[np.ndarray], n: float,
                   B: int = 1000, seed: int = 42, level: float = 0.95, alpha: float = 0.05, power: float = 0.8,
                   params: Mapping[str, Any] | None = None, loo_a: np.ndarray | None = None,
                   loo_b: np.ndarray | None = None) -> Estimate:
    """Half-width and MDD at ``n`` items of the paired difference B - A, from a pilot's aligned
    arrays of the two cells (same items in the same order; module docstring for ``sd_d``).
    ``loo_a`` / ``loo_b``: the sides' :func:`leave_one_out` values, for a metric without a batch form."""
    a = [np.asarray(x, dtype=float) for x in a_arrays]
    b = [np.asarray(x, dtype=float) for x in b_arrays]
    n_p = a[0].size if a else 0
    if n_p < 2 or b[0].size != n_p:
        return Estimate(None, "pilot", note="fewer than 2 paired pilot items")
    va, vb = per_item_values(metric, a, params), per_item_values(metric, b, params)
    if va is not None and vb is not None:
        d = vb - va
        sd_d = float(np.std(d, ddof=1))
        how = f"pilot: SD of {n_p} per-item differences"
    elif jackknifed(metric):
        la = leave_one_out(metric, a, params) if loo_a is None else loo_a
        lb = leave_one_out(metric, b, params) if loo_b is None else loo_b
        se = jackknife_se(lb - la)
        if se is None:
            return Estimate(None, "pilot", note="undefined on the pilot's leave-one-out subsets")
        sd_d = se * math.sqrt(n_p)
        how = f"pilot: paired jackknife SE at n_p={n_p} (no batch form) x sqrt(n_p)"
    else:
        idx = resample_indices(n_p, B, seed)
        kw = _kwargs(params)
        with np.errstate(invalid="ignore", divide="ignore"):
            try:
                reps = masked_replicates(metric, b, idx, **kw) - masked_replicates(metric, a, idx, **kw)
            except (ValueError, FloatingPointError, ZeroDivisionError) as e:
                return Estimate(None, "pilot", note=f"undefined on the pilot ({e})")
        ok = reps[~np.isnan(reps)]
        if ok.size < 2:
            return Estimate(None, "pilot", note="no paired bootstrap replicate defined on the pilot")
        sd_d = float(np.std(ok, ddof=1)) * math.sqrt(n_p)
        how = f"pilot: paired bootstrap SD at n_p={n_p} (B={B}, seed={seed}) x sqrt(n_p)"
    note = "the two cells agree on every pilot item: 0 is no planning figure" if sd_d == 0.0 else ""
    return Estimate(z_level(level) * sd_d / math.sqrt(n), how, mdd=mdd(sd_d, n, alpha, power), sd=sd_d, note=note)
