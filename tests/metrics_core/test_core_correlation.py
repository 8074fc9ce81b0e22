"""Spearman/Pearson wrappers against scipy, with the n < 3 / constant-input NaN rule."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from auditlang.metrics import pearson, spearman


@pytest.mark.parametrize("seed", range(3))
def test_match_scipy(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=12)
    y = 0.5 * x + rng.normal(size=12)
    x[3] = x[4]  # a tie for Spearman
    for ours, ref in ((spearman, stats.spearmanr), (pearson, stats.pearsonr)):
        res, exp = ours(x, y), ref(x, y)
        assert (res.r, res.p, res.n) == pytest.approx((exp.statistic, exp.pvalue, 12), abs=1e-12)


def test_size_spread_example_of_study_000():
    sizes = [1.5, 3, 3.8, 7, 8, 1.7, 2, 4, 9, 14]
    spread = [0.12, 0.08, 0.2, 0.05, 0.1, 0.3, 0.15, 0.07, 0.09, 0.04]
    res = spearman(sizes, spread)
    assert res.r == pytest.approx(stats.spearmanr(sizes, spread).statistic) and -1 <= res.r <= 1


def test_undefined_cases_are_nan():
    for fn in (spearman, pearson):
        for x, y in (([1.0, 2.0], [3.0, 1.0]), ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [5.0] * 3)):
            res = fn(x, y)
            assert np.isnan(res.r) and np.isnan(res.p)


def test_missing_pairs():
    x = [1.0, 2.0, np.nan, 4.0, 5.0]
    y = [2.0, 1.0, 3.0, np.nan, 7.0]
    with pytest.raises(ValueError, match="spearman: 2 pair\\(s\\) contain NaN"):
        spearman(x, y)
    res = pearson(x, y, missing="drop")
    assert res.n == 3 and res.n_dropped == 2
    assert res.r == pytest.approx(stats.pearsonr([1, 2, 5], [2, 1, 7]).statistic)


@pytest.mark.parametrize(
    "x, y, message",
    [([1, 2, 3], [1, 2], "mismatched lengths"), ([], [], "empty"), ([[1, 2]], [1], "1-D"),
     ([1, np.inf, 2], [1, 2, 3], "infinite")],
)
def test_bad_input(x, y, message):
    with pytest.raises(ValueError, match=f"pearson: .*{message}"):
        pearson(x, y)
