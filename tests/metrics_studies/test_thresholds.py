"""thresholds.py: study 004 dev-split threshold fitting and the 0.5 correction rule."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditlang.metrics.thresholds import apply_threshold, fit_threshold, misclassifications

CONF = [0.1, 0.2, 0.3, 0.6, 0.7, 0.8, 0.9]
CORRECT = [0, 0, 1, 0, 1, 1, 1]


def test_fit_hand_computed_with_tie_rule():
    fit = fit_threshold(CONF, CORRECT)
    # t = 0.3 (accepts the wrong 0.6) and t = 0.7 (rejects the right 0.3) both make 1 error and are
    # equally far from 0.5; the smaller one wins
    assert (fit.threshold, fit.fitted, fit.corrected, fit.dev_errors, fit.dev_size) == (0.3, 0.3, False, 1, 7)
    assert misclassifications(CONF, CORRECT, 0.7) == 1


def test_closest_to_half_breaks_ties():
    # perfect separation anywhere in (0.2, 0.8]: candidates 0.8 only achieve 0 errors -> 0.8
    assert fit_threshold([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]).threshold == 0.8
    grid = np.round(np.arange(0, 1.0001, 0.05), 2)
    assert fit_threshold([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], candidates=grid).threshold == 0.5


def test_correction_rule_replaces_unreasonable_thresholds():
    conf, correct = [0.97, 0.98, 0.99, 0.99], [0, 1, 1, 1]
    raw = fit_threshold(conf, correct, bounds=None)
    assert raw.threshold == 0.98 and not raw.corrected
    fixed = fit_threshold(conf, correct)
    assert (fixed.threshold, fixed.fitted, fixed.corrected) == (0.5, 0.98, True)
    low = fit_threshold([0.01, 0.4, 0.6], [1, 1, 1])  # accept-everything threshold 0.01
    assert low.fitted == 0.01 and low.threshold == 0.5
    assert fit_threshold(conf, correct, bounds=(0.0, 0.99), fallback=0.4).threshold == 0.98


def test_reject_all_is_a_candidate():
    fit = fit_threshold([0.3, 0.4], [0, 0], bounds=None)
    assert fit.fitted == 1.0 and fit.dev_errors == 0


def test_apply_threshold():
    np.testing.assert_array_equal(apply_threshold([0.2, 0.5, np.nan, 0.9], 0.5), [0.0, 1.0, np.nan, 1.0])
    with pytest.raises(ValueError, match="threshold"):
        apply_threshold([0.2], 1.2)


@pytest.mark.parametrize("kwargs,match", [({"bounds": (0.9, 0.1)}, "bounds"), ({"fallback": 2.0}, "fallback"),
                                          ({"candidates": [1.5]}, "candidates")])
def test_fit_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_threshold(CONF, CORRECT, **kwargs)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=40))
def test_fit_minimises_errors_like_brute_force(rows):
    conf = np.array([c / 20 for c, _ in rows])
    correct = np.array([int(b) for _, b in rows])
    fit = fit_threshold(conf, correct, bounds=None)
    brute = min(misclassifications(conf, correct, t) for t in np.append(np.unique(conf), 1.0))
    assert fit.dev_errors == brute == misclassifications(conf, correct, fit.fitted)
