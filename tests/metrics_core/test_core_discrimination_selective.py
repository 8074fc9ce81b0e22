"""AUROC against sklearn; AURC and selective accuracy against brute force over tie orders."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from auditlang.metrics import aurc, auroc, risk_coverage_curve, selective_accuracy


@pytest.mark.parametrize("seed,ties", [(0, None), (1, 1), (2, 2), (3, 0)])
def test_auroc_matches_sklearn_including_ties(seed, ties, synth):
    c, y = synth(300, seed, ties=ties)
    assert auroc(c, y) == pytest.approx(roc_auc_score(y, c), abs=1e-12)


def test_auroc_hand_cases():
    assert auroc([0.9, 0.8, 0.3, 0.1], [1, 1, 0, 0]) == 1.0
    assert auroc([0.1, 0.2, 0.8], [1, 1, 0]) == 0.0
    assert auroc([0.5, 0.5, 0.5], [1, 0, 1]) == 0.5  # all tied: half credit
    assert auroc([0.7, 0.5, 0.5, 0.2], [1, 1, 0, 0]) == pytest.approx((2 + 1.5) / 4)


def test_auroc_single_class_is_nan():
    assert np.isnan(auroc([0.2, 0.9], [1, 1]))
    assert np.isnan(auroc([0.2, 0.9], [0, 0]))


def test_auroc_missing_drop():
    assert auroc([0.9, np.nan, 0.1], [1, 1, 0], missing="drop") == 1.0
    with pytest.raises(ValueError, match="auroc: confidence contains 1 NaN"):
        auroc([0.9, np.nan, 0.1], [1, 1, 0])


def _aurc_sorted(c, y):
    order = np.argsort(-c, kind="stable")
    err = 1 - y[order]
    return np.mean(np.cumsum(err) / np.arange(1, c.size + 1))


def _aurc_tie_average(c, y):
    # expectation over every ordering of tied examples (brute force, small n)
    vals = [_aurc_sorted(c[list(p)], y[list(p)]) for p in itertools.permutations(range(c.size))]
    return float(np.mean(vals))


@pytest.mark.parametrize("seed", range(5))
def test_aurc_without_ties_is_the_standard_sorted_formula(seed, synth):
    c, y = synth(200, seed)
    assert aurc(c, y) == pytest.approx(_aurc_sorted(c, y), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_aurc_with_ties_is_expectation_over_tie_orders(seed):
    rng = np.random.default_rng(seed)
    c = rng.choice([0.2, 0.5, 0.9], size=7)
    y = (rng.uniform(size=7) < 0.6).astype(float)
    assert aurc(c, y) == pytest.approx(_aurc_tie_average(c, y), abs=1e-12)
    cov, risk = risk_coverage_curve(c, y)
    assert cov[-1] == 1.0 and risk[-1] == pytest.approx(1 - y.mean())
    assert np.mean(risk) == pytest.approx(aurc(c, y), abs=1e-12)


def test_aurc_hand_cases():
    assert aurc([0.9, 0.8, 0.1], [1, 1, 0]) == pytest.approx((0 + 0 + 1 / 3) / 3)
    assert aurc([0.5] * 4, [1, 0, 1, 1]) == pytest.approx(0.25)  # constant confidence: error rate
    assert aurc([0.3, 0.6], [1, 1]) == 0.0 and aurc([0.3, 0.6], [0, 0]) == 1.0


def _selective_tie_average(c, y, coverage):
    k = max(int(np.ceil(coverage * c.size - 1e-9)), 1)
    vals = []
    for p in itertools.permutations(range(c.size)):
        p = list(p)
        order = np.argsort(-c[p], kind="stable")
        vals.append(y[p][order][:k].mean())
    return float(np.mean(vals))


@pytest.mark.parametrize("coverage", [0.1, 0.5, 0.8, 1.0])
def test_selective_accuracy_with_ties(coverage):
    c = np.array([0.9, 0.9, 0.7, 0.7, 0.7, 0.2])
    y = np.array([1, 0, 1, 1, 0, 0], float)
    assert selective_accuracy(c, y, coverage) == pytest.approx(_selective_tie_average(c, y, coverage), abs=1e-12)


def test_selective_accuracy_hand_cases(data500):
    c, y = data500
    assert selective_accuracy(c, y, 1.0) == pytest.approx(y.mean())
    top = np.argsort(-c)[:250]
    assert selective_accuracy(c, y, 0.5) == pytest.approx(y[top].mean())
    assert selective_accuracy([0.9, 0.1, 0.5], [1, 0, 0], 0.3) == 1.0  # k = ceil(0.9) = 1
    assert selective_accuracy([0.9, 0.1, 0.5], [1, 0, 0], 0.01) == 1.0  # at least one answer


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, "0.5", True])
def test_selective_accuracy_rejects_bad_coverage(bad):
    with pytest.raises(ValueError, match="selective_accuracy: coverage must be a number in"):
        selective_accuracy([0.5], [1], bad)
