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


def test_sub_grid_bandwidth_gives_the_per_value_limit():
    # correct answers all at 0.4 (std 0 -> fallback std(all) ~ 2e-5, below the grid step) while
    # wrong answers sit 5e-5 apart: the value is the grouped ECE to within the grid step
    c = np.r_[np.full(20, 0.4), 0.4 + 5e-5 * np.arange(1, 6)]
    y = np.r_[np.ones(20), np.zeros(5)]
    assert kde_ece(c, y) <= 1
    assert kde_ece(c, y) == pytest.approx(_grouped_ece(c, y), abs=0.05)


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
