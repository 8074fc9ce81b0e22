"""Property tests: every calibration / discrimination metric against an independent
implementation (scikit-learn, KDEpy, a brute-force kernel sum or a plain loop written here) on
generated inputs with ties, constants, values on bin edges, n = 1, all-correct / all-wrong and
NaN confidences (issue 10, "Done when")."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from auditlang.metrics import (
    accuracy, aurc, auroc, binfree_ece, brier, ece, kde_ece, ks_ce, mce, nll, selective_accuracy, smooth_ece,
)

EDGES = [k / 10 for k in range(11)] + [k / 7 for k in range(8)] + [0.25, 0.5, 0.75]


@st.composite
def data(draw, max_n: int = 40, nan: bool = False):
    """(conf, correct): n in [1, max_n]; confidences from a mix of continuous values, bin edges,
    0/1 and one repeated value (ties, or a constant); correctness mixed, all 1 or all 0."""
    n = draw(st.integers(1, max_n))
    shape = draw(st.sampled_from(["mixed", "edges", "constant", "two_valued", "continuous"]))
    if shape == "constant":
        c = np.full(n, draw(st.sampled_from([0.0, 1.0, 0.7, 0.3, 1 / 3])))
    elif shape == "two_valued":
        a, b = draw(st.sampled_from(EDGES)), draw(st.floats(0, 1))
        c = np.array(draw(st.lists(st.sampled_from([a, b]), min_size=n, max_size=n)))
    else:
        elems = {"mixed": st.one_of(st.floats(0, 1), st.sampled_from(EDGES)),
                 "edges": st.sampled_from(EDGES), "continuous": st.floats(0, 1)}[shape]
        c = np.array(draw(st.lists(elems, min_size=n, max_size=n)), dtype=float)
    mode = draw(st.sampled_from(["mixed", "all_correct", "all_wrong"]))
    if mode == "mixed":
        y = np.array(draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n)))
    else:
        y = np.full(n, 1.0 if mode == "all_correct" else 0.0)
    if nan:
        mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        c = np.where(mask, np.nan, c)
    return c, y


# ---------------------------------------------------------------- independent implementations


def ref_bins(c, bins, binning, closed):
    if binning == "equal_width":
        if closed == "left":  # [k/B, (k+1)/B), last bin closed; within 1e-9/B of an edge counts as on it
            return np.minimum(np.floor(c * bins + 1e-9).astype(int), bins - 1)
        return np.maximum(np.ceil(c * bins - 1e-9).astype(int) - 1, 0)  # (a, b], first bin [0, 1/B]
    edges = np.quantile(c, np.linspace(0, 1, bins + 1))[1:-1]
    return np.searchsorted(edges, c, side="right" if closed == "left" else "left")


def ref_ece_mce(c, y, bins, binning, closed):
    idx = ref_bins(c, bins, binning, closed)
    e, m = 0.0, 0.0
    for k in range(bins):
        s = idx == k
        if s.any():
            e += abs(c[s].sum() - y[s].sum()) / c.size
            m = max(m, abs(c[s].mean() - y[s].mean()))
    return e, m


def ref_ks(c, y):
    best = 0.0
    cum = 0.0
    for q in np.unique(c):
        s = c == q
        cum += (c[s] - y[s]).sum()
        best = max(best, abs(cum) / c.size)
    return best


def ref_topk_errors(c, y, k):
    """Expected errors among the k most confident, ties in random order."""
    errs, taken = 0.0, 0
    for q in np.unique(c)[::-1]:
        s = c == q
        g = int(s.sum())
        if taken + g <= k:
            errs += (1 - y[s]).sum()
            taken += g
        else:
            errs += (k - taken) * (1 - y[s]).mean()
            break
    return errs


def ref_aurc(c, y):
    return float(np.mean([ref_topk_errors(c, y, k) / k for k in range(1, c.size + 1)]))


def ref_selective(c, y, coverage):
    k = max(1, math.ceil(coverage * c.size))
    return 1 - ref_topk_errors(c, y, k) / k


def ref_smece(c, y, sigma, grid=4001):
    t = np.linspace(0, 1, grid)[:, None]
    phi = lambda d: np.exp(-0.5 * (d / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))  # noqa: E731
    k = sum(phi(t - c - 2 * j) + phi(t + c - 2 * j) for j in range(-3, 4))
    return np.trapezoid(np.abs((k * (c - y)).mean(axis=1)), t[:, 0])


# ---------------------------------------------------------------- properties


@settings(max_examples=120, deadline=None)
@given(data(), st.integers(1, 15), st.sampled_from(["equal_width", "equal_mass"]), st.sampled_from(["left", "right"]))
def test_binned_metrics_match_a_plain_loop(d, bins, binning, closed):
    c, y = d
    e, m = ref_ece_mce(c, y, bins, binning, closed)
    assert ece(c, y, bins=bins, binning=binning, closed=closed) == pytest.approx(e, abs=1e-12)
    assert mce(c, y, bins=bins, binning=binning, closed=closed) == pytest.approx(m, abs=1e-12)


@settings(max_examples=120, deadline=None)
@given(data())
def test_scores_match_scikit_learn(d):
    c, y = d
    assert accuracy(y) == pytest.approx(float(np.mean(y)), abs=1e-15)
    assert brier(c, y) == pytest.approx(brier_score_loss(y, c, pos_label=1), abs=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns about one-class y_true; the value is defined
        ref_nll = log_loss(y, np.clip(c, 1e-6, 1 - 1e-6), labels=[0, 1])
    assert nll(c, y) == pytest.approx(ref_nll, rel=1e-9, abs=1e-12)
    if 0 < y.sum() < y.size:
        assert auroc(c, y) == pytest.approx(roc_auc_score(y, c), abs=1e-12)
    else:
        assert math.isnan(auroc(c, y))  # one class: undefined, not an error


@settings(max_examples=120, deadline=None)
@given(data(), st.floats(0.01, 1.0))
def test_ranking_and_selective_metrics_match_a_plain_loop(d, coverage):
    c, y = d
    assert ks_ce(c, y) == pytest.approx(ref_ks(c, y), abs=1e-12)
    assert aurc(c, y) == pytest.approx(ref_aurc(c, y), abs=1e-12)
    assert selective_accuracy(c, y, coverage) == pytest.approx(ref_selective(c, y, coverage), abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(data(max_n=25), st.sampled_from([0.05, 0.2, 0.6]))
def test_smooth_ece_matches_a_brute_force_kernel_sum(d, sigma):
    c, y = d
    assert smooth_ece(c, y, sigma=sigma) == pytest.approx(ref_smece(c, y, sigma), abs=5e-6)


def _zhang_with_kdepy(c, y):
    """ece_kde_binary (Zhang et al. 2020) with KDEpy's FFTKDE and the paper's bandwidth only
    (std of the correct answers' confidences (2N)^(-1/5); the caller compares where it is above
    auditlang's floor); a grid point where both densities are <= 1e-6 contributes 0 (auditlang's
    rule, docs/metrics.md)."""
    kdepy = pytest.importorskip("KDEpy")
    x = np.linspace(-0.6, 1.6, num=2**14)
    n = c.size

    def mirror(d):
        return np.concatenate((-d[d < 0.5], d, 2 - d[d >= 0.5]))[:, None]

    c1 = c[y == 1]
    bw = np.std(c1) * (2 * n) ** -0.2 if c1.size else 0.0

    def kde(d):
        p = kdepy.FFTKDE(bw=bw, kernel="triweight").fit(mirror(d)).evaluate(x)
        return np.where((x > 0) & (x < 1), p, 0.0) * 2

    pp2 = kde(c)
    pp1 = kde(c1) if c1.size else np.zeros_like(x)
    integral = np.zeros_like(x)
    for i in range(x.size):
        if max(pp1[i], pp2[i]) > 1e-6:
            with np.errstate(divide="ignore", invalid="ignore"):
                acc = min(y.mean() * pp1[i] / pp2[i], 1.0)
            if not np.isnan(acc):
                integral[i] = abs(x[i] - acc) * pp2[i]
    ind = (x >= 0) & (x <= 1)
    return np.trapezoid(integral[ind], x[ind]) / np.trapezoid(pp2[ind], x[ind]), bw


@settings(max_examples=25, deadline=None)
@given(data(max_n=30))
def test_kde_ece_matches_kdepy_and_stays_in_range(d):
    c, y = d
    v = kde_ece(c, y)
    assert 0 <= v <= 1
    assert binfree_ece(c, y) == pytest.approx((v + ks_ce(c, y) + smooth_ece(c, y)) / 3, abs=1e-12)
    if np.ptp(c) == 0:
        assert v == pytest.approx(abs(y.mean() - c[0]), abs=1e-12)  # constant: the limit |a - q|
        return
    c = np.clip(c, 0.001, 0.999)  # KDEpy needs every mirrored point strictly inside its grid
    assume(np.ptp(c) > 0)
    assume(c[y == 1].size and np.std(c[y == 1]) * (2 * c.size) ** -0.2 >= 1e-3)  # the paper's bandwidth applies
    ref, bw = _zhang_with_kdepy(c, y)
    assert kde_ece(c, y) == pytest.approx(ref, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(data(nan=True))
def test_nan_confidences_are_dropped_or_rejected(d):
    c, y = d
    keep = ~np.isnan(c)
    fns = {"ece": ece, "mce": mce, "brier": brier, "nll": nll, "ks_ce": ks_ce, "auroc": auroc, "aurc": aurc,
           "kde_ece": kde_ece}
    for name, fn in fns.items():
        if keep.all():
            continue
        with pytest.raises(ValueError, match=name):
            fn(c, y)
        if not keep.any():
            with pytest.raises(ValueError, match="missing"):
                fn(c, y, missing="drop")
            continue
        got, want = fn(c, y, missing="drop"), fn(c[keep], y[keep])
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, abs=1e-12), name
