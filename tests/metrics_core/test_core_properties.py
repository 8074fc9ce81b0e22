"""Hypothesis property tests: ranges, orderings and identities that hold for any input."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from auditlang.metrics import aurc, auroc, brier, ece, ks_ce, mce, selective_accuracy, smooth_ece

probs = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def conf_correct(draw, max_size: int = 60):
    n = draw(st.integers(1, max_size))
    c = np.array(draw(st.lists(st.one_of(probs, st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.7, 1.0])),
                               min_size=n, max_size=n)))
    y = np.array(draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n)))
    return c, y


@settings(max_examples=60, deadline=None)
@given(conf_correct(), st.integers(1, 20), st.sampled_from(["equal_width", "equal_mass"]),
       st.sampled_from(["left", "right"]))
def test_binned_ranges_and_brier_bound(data, bins, binning, closed):
    c, y = data
    e, rb = ece(c, y, bins=bins, binning=binning, closed=closed, return_bins=True)
    m = mce(c, y, bins=bins, binning=binning, closed=closed)
    assert 0 <= e <= m + 1e-12 <= 1 + 1e-12
    assert rb.counts.sum() == c.size
    # binned Jensen bound: ECE <= mean|c - y| and ECE^2 <= Brier
    assert e <= np.mean(np.abs(c - y)) + 1e-12
    assert e**2 <= brier(c, y) + 1e-12
    assert abs(np.mean(c - y)) <= e + 1e-12  # one bin is the least resolved estimate
    assert abs(np.mean(c - y)) - 1e-12 <= ks_ce(c, y) <= np.mean(np.abs(c - y)) + 1e-12


@settings(max_examples=40, deadline=None)
@given(conf_correct())
def test_ranking_metrics(data):
    c, y = data
    a = auroc(c, y)
    if 0 < y.sum() < y.size:
        assert 0 <= a <= 1
        assert abs(a + auroc(c, 1 - y) - 1) < 1e-12  # swapping the classes mirrors AUROC
    else:
        assert np.isnan(a)
    r = aurc(c, y)
    assert 0 <= r <= 1
    # AURC is at least the oracle value (errors ranked last) and averages to the error rate
    err = int(y.size - y.sum())
    oracle = np.mean([max(0, k - (y.size - err)) / k for k in range(1, y.size + 1)])
    assert r >= oracle - 1e-12
    assert abs(selective_accuracy(c, y, 1.0) - y.mean()) < 1e-12


@settings(max_examples=15, deadline=None)
@given(conf_correct(max_size=30))
def test_smooth_ece_is_a_fixed_point_in_range(data):
    c, y = data
    value, sigma = smooth_ece(c, y, return_sigma=True)
    assert 0 <= value <= np.mean(np.abs(c - y)) + 1e-9
    assert sigma == 1e-3 or abs(value - sigma) < 1e-7
