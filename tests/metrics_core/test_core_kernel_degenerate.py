"""KDE-ECE and the bin-free mean on tied, constant, two-valued and near-constant confidences
(issue 10 item 1; study 001 §3.1 "Calibration estimator", configurations C/D)."""

from __future__ import annotations

import numpy as np
import pytest

from auditlang.metrics import binfree_ece, ece, kde_ece, ks_ce, smooth_ece


def _grouped_ece(c, y):
    """The h -> 0 limit: ECE with one bin per distinct confidence (hand computation)."""
    return sum(np.mean(c == q) * abs(q - y[c == q].mean()) for q in np.unique(c))


@pytest.mark.parametrize("q,acc", [(0.7, 1.0), (0.7, 0.6), (0.05, 0.0), (1.0, 0.3), (0.0, 1.0), (0.5, 0.5)])
def test_constant_confidence_is_the_accuracy_gap(q, acc):
    # np.full's float std is ~2e-16, not 0: this used to return 578.7 for (0.7, 1.0)
    n = 50
    c = np.full(n, q)
    y = (np.arange(n) < round(acc * n)).astype(float)
    assert kde_ece(c, y) == pytest.approx(abs(acc - q), abs=1e-12)
    assert binfree_ece(c, y) == pytest.approx(abs(acc - q), abs=1e-9)


def test_issue_example_constant_07():
    assert kde_ece(np.full(50, 0.7), np.ones(50)) == pytest.approx(0.3, abs=1e-12)
    assert binfree_ece(np.full(50, 0.7), np.ones(50)) == pytest.approx(0.3, abs=1e-9)


@pytest.mark.parametrize("scale", [1e-15, 1e-12, 1e-9, 1e-6])
def test_near_constant_confidence_is_the_accuracy_gap(scale):
    # all confidences closer than the grid step (1.3e-4): the estimator cannot tell them apart
    rng = np.random.default_rng(3)
    c = 0.7 + scale * rng.uniform(-1, 1, 60)
    y = (rng.uniform(size=60) < 0.55).astype(float)
    gap = abs(y.mean() - c.mean())
    assert kde_ece(c, y) == pytest.approx(gap, abs=2e-4)
    assert binfree_ece(c, y) == pytest.approx((kde_ece(c, y) + ks_ce(c, y) + smooth_ece(c, y)) / 3)
    assert 0 <= binfree_ece(c, y) <= 1


def test_confidences_within_the_kernel_merge_and_groups_apart_stay_apart():
    # correct answers tied at 0.4 (reference bandwidth 0 -> the floor 1e-3, support 3e-3): wrong
    # answers 5e-5 apart from them are one group with them, wrong answers at 0.45 are their own
    c = np.r_[np.full(20, 0.4), 0.4 + 5e-5 * np.arange(1, 6)]
    y = np.r_[np.ones(20), np.zeros(5)]
    assert kde_ece(c, y) == pytest.approx(abs(c.mean() - y.mean()), abs=5e-3)
    c = np.r_[np.full(20, 0.4), np.full(5, 0.45)]
    assert kde_ece(c, y) == pytest.approx(_grouped_ece(c, y), abs=5e-3)


def _direct_kde_ece(c, y):
    """KDE-ECE from its definition with every kernel summed exactly (no binning, no FFT) on a
    fine grid of (0, 1): f = mirrored triweight KDE of all confidences (density doubled on
    [0, 1]), f1 the same of the correct ones, acc = min(1, a f1 / f), value = ∫|x - acc| f / ∫ f.
    Bandwidth: the paper's std(correct) (2N)^(-1/5), at least 1e-3 (auditlang's floor)."""
    c, y = np.asarray(c, float), np.asarray(y, float)
    x = np.linspace(0.0, 1.0, 40001)[1:-1]
    c1 = c[y == 1]
    h = 3 * max(np.std(c1) * (2 * c.size) ** -0.2 if c1.size else 0.0, 1e-3)  # triweight support

    def density(d):
        pts = np.r_[d, np.where(d < 0.5, -d, 2 - d)]
        u = (x[:, None] - pts[None, :]) / h
        return 2 * (35 / 32) * (np.clip(1 - u**2, 0, None) ** 3).sum(axis=1) / (h * pts.size)

    f = density(c)
    f1 = density(c1) if c1.size else np.zeros_like(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        acc = np.where(f > 0, np.minimum(y.mean() * f1 / f, 1.0), 0.0)
    return np.trapezoid(np.abs(x - acc) * f, x) / np.trapezoid(f, x)


def _tied_design(n, q=0.7, rng=None):
    """Half the answers correct, all at confidence q (a verbal "0.7"); the wrong ones spread."""
    k = n // 2
    wrong = np.linspace(0.2, 0.6, n - k) if rng is None else rng.uniform(0.5, 1.0, n - k)
    return np.r_[np.full(k, q), wrong], np.r_[np.ones(k), np.zeros(n - k)]


@pytest.mark.parametrize("q", [0.3, 0.6, 0.7, 0.9, 1.0])
def test_tied_correct_confidences_match_a_direct_kernel_sum(q):
    # issue 23: a reference written from the definition (exact kernel sums), not a port
    for n in (20, 40, 50):
        c, y = _tied_design(n, q)
        assert kde_ece(c, y) == pytest.approx(_direct_kde_ece(c, y), abs=0.02), n


@pytest.mark.parametrize("q", [0.7, 0.8, 0.9])  # above the wrong answers' linspace(0.2, 0.6)
def test_nearby_designs_give_close_values(q):
    # issue 23: the bandwidth switched to std(all) only when the float std of the tied correct
    # confidences was exactly 0 (n=20 and 50 here, ~1e-16 otherwise): 0.228 / 0.35 / 0.35 for
    # q=0.7 at n = 20 / 40 / 50. The rule is continuous in the data now.
    vals = [kde_ece(*_tied_design(n, q)) for n in (20, 30, 40, 50, 60)]
    assert max(vals) - min(vals) < 0.01, vals
    rng_vals = [np.mean([kde_ece(*_tied_design(n, q, np.random.default_rng(s))) for s in range(20)])
                for n in (20, 40, 50)]
    assert max(rng_vals) - min(rng_vals) < 0.02, rng_vals


@pytest.mark.parametrize("q", [0.6, 0.9, 1.0])
def test_ties_are_the_limit_of_untied_data(q):
    # the value at exactly tied correct confidences is the value of nearly tied ones
    c, y = _tied_design(40, q)
    tied = kde_ece(c, y)
    rng = np.random.default_rng(1)
    for eps in (1e-12, 1e-9, 1e-6, 1e-5):
        jitter = np.where(y == 1, eps * rng.uniform(-1, 0, c.size), 0.0)  # stays in [0, 1]
        assert kde_ece(c + jitter, y) == pytest.approx(tied, abs=2e-3), eps


@pytest.mark.parametrize("seed", range(6))
def test_two_valued_and_heavily_tied_stay_in_range(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 200))
    levels = rng.choice([0.0, 0.1, 0.5, 0.9, 0.95, 1.0], size=2, replace=False)
    c = rng.choice(levels, n)
    y = (rng.uniform(size=n) < 0.6).astype(float)
    for f in (kde_ece, binfree_ece):
        v = f(c, y)
        assert 0 <= v <= 1, (f.__name__, v)
    # every estimator of the mean |c - acc(c)| is bounded by the worst value gap
    assert kde_ece(c, y) <= np.max(np.abs(c - y)) + 1e-9


def test_two_clusters_far_apart_do_not_carry_density_across_the_gap():
    # the reference code repeats the last integrand value across a zero-density gap; with two
    # narrow clusters that spike crossed [0.2, 0.9] and gave values far above 1
    rng = np.random.default_rng(0)
    c = np.r_[0.2 + 1e-4 * rng.uniform(size=40), 0.9 + 1e-4 * rng.uniform(size=40)]
    y = np.r_[np.zeros(40), np.ones(35), np.zeros(5)]  # correct answers only near 0.9: tiny bandwidth
    v = kde_ece(c, y)
    assert v == pytest.approx(_grouped_ece(np.round(c, 1), y), abs=0.02)
    # the 10-bin ECE sees the same two groups
    assert v == pytest.approx(ece(c, y), abs=0.02)


def test_n_equal_one():
    assert kde_ece([0.8], [1]) == pytest.approx(0.2)
    assert kde_ece([0.8], [0]) == pytest.approx(0.8)
    assert binfree_ece([0.8], [0]) == pytest.approx(0.8, abs=1e-9)
