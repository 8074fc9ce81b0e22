"""aligned.py: study 003 IA / DA / CA views and ranking reversal."""

import numpy as np
import pytest

from auditlang.metrics.aligned import (
    candidate_aligned,
    da_weights,
    distribution_aligned,
    instance_aligned,
    is_reversal,
    ranking_reversals,
    reversal_pattern,
    reversal_rate,
    shared_candidate_pool,
    weighted_brier,
    weighted_ece,
)
from auditlang.metrics.calibration import brier, ece

CA_, ZA = [0.9, 0.8, 0.7, 0.6], [1, 1, 1, 0]  # accuracy 0.75
CB, ZB = [0.9, 0.5, 0.4, 0.3], [1, 0, 0, 0]  # accuracy 0.25


def test_unweighted_forms_equal_core_metrics():
    rng = np.random.default_rng(1)
    c = rng.uniform(size=500)
    z = (rng.uniform(size=500) < c).astype(int)
    assert weighted_ece(c, z) == pytest.approx(ece(c, z))
    assert weighted_brier(c, z) == pytest.approx(brier(c, z))


def test_da_weights_hit_target_accuracy():
    w = da_weights(ZA, 0.25)
    np.testing.assert_allclose(w, [1 / 3, 1 / 3, 1 / 3, 3.0])
    assert np.sum(w * np.array(ZA)) / w.sum() == pytest.approx(0.25)


def test_distribution_aligned_hand_computed():
    da = distribution_aligned(CA_, ZA, CB, ZB)
    assert da.reweighted == "a" and (da.accuracy_a, da.accuracy_b) == (0.75, 0.25)
    # W = 4; DA-BS = (1/4)[(1/3)(0.01 + 0.04 + 0.09) + 3 * 0.36]
    assert da.brier_a == pytest.approx((0.14 / 3 + 1.08) / 4)
    # one item per bin: (1/3)(0.1 + 0.2 + 0.3) + 3 * 0.6 = 2.0, over W = 4
    assert da.ece_a == pytest.approx(0.5)
    # the less accurate model keeps its raw values
    assert da.ece_b == pytest.approx(ece(CB, ZB)) and da.brier_b == pytest.approx(brier(CB, ZB))
    # symmetric call moves the other argument
    assert distribution_aligned(CB, ZB, CA_, ZA).reweighted == "b"


def test_distribution_aligned_equals_replicated_rows():
    """Independent check: integer weights are row multiplicities."""
    rng = np.random.default_rng(7)
    ca, cb = rng.uniform(size=60), rng.uniform(size=60)
    za = np.r_[np.ones(40), np.zeros(20)]  # a_A = 2/3
    zb = np.r_[np.ones(20), np.zeros(40)]  # a_B = 1/3 -> weights 1/2 (correct), 2 (incorrect)
    da = distribution_aligned(ca, za, cb, zb)
    reps = np.where(za == 1, 1, 4)  # proportional to (1/2, 2)
    assert da.ece_a == pytest.approx(ece(np.repeat(ca, reps), np.repeat(za, reps)))
    assert da.brier_a == pytest.approx(brier(np.repeat(ca, reps), np.repeat(za, reps)))


def test_equal_accuracy_means_no_reweighting():
    da = distribution_aligned([0.9, 0.2], [1, 0], [0.6, 0.6], [0, 1])
    assert da.reweighted == "none" and da.ece_a == pytest.approx(ece([0.9, 0.2], [1, 0]))


@pytest.mark.parametrize("za,zb", [([1, 1], [1, 0]), ([1, 0], [0, 0])])
def test_positivity_violations_raise(za, zb):
    with pytest.raises(ValueError, match="positivity"):
        distribution_aligned([0.5, 0.5], za, [0.5, 0.5], zb)


def test_da_weights_errors():
    with pytest.raises(ValueError, match="divides by zero"):
        da_weights([1, 1, 1], 0.5)
    with pytest.raises(ValueError, match="target accuracy"):
        da_weights([1, 0], 1.5)


def test_instance_aligned_hand_computed():
    ca, za = [0.9, 0.8, 0.3, 0.6, 0.7], [1, 1, 0, 0, 1]
    cb, zb = [0.5, 0.4, 0.6, 0.9, 0.95], [1, 0, 0, 1, 1]
    ia = instance_aligned(ca, za, cb, zb)
    assert ia.retention == pytest.approx(3 / 5)
    assert (ia.n_both_right, ia.n_both_wrong) == (2, 1)
    np.testing.assert_array_equal(ia.mask, [True, False, True, False, True])
    assert ia.brier_a == pytest.approx(brier([0.9, 0.3, 0.7], [1, 0, 1]))
    assert ia.ece_b == pytest.approx(ece([0.5, 0.6, 0.95], [1, 0, 1]))
    assert ia.mean_conf_both_wrong_b == pytest.approx(0.6)
    assert ia.mean_conf_both_right_a == pytest.approx(0.8)


def test_instance_aligned_empty_subset_and_nan_means():
    with pytest.raises(ValueError, match="D_IA is empty"):
        instance_aligned([0.5, 0.5], [1, 0], [0.5, 0.5], [0, 1])
    ia = instance_aligned([0.5], [1], [0.7], [1])  # all both-right
    assert ia.retention == 1.0 and np.isnan(ia.mean_conf_both_wrong_a)


def test_shared_pool_and_candidate_aligned():
    assert shared_candidate_pool(["Paris", "4"], ["Lyon", "4"]) == [(0, "Paris"), (0, "Lyon"), (1, "4")]
    with pytest.raises(ValueError, match="shared_candidate_pool"):
        shared_candidate_pool(["a"], [])
    ca = candidate_aligned([0.9, 0.6, 0.8], [1, 0, 1])
    assert ca.brier == pytest.approx((0.01 + 0.36 + 0.04) / 3) and ca.n_candidates == 3
    assert ca.ece == pytest.approx(ece([0.9, 0.6, 0.8], [1, 0, 1]))


def test_ranking_reversals_pairs_and_ties():
    raw = {"a": 0.10, "b": 0.20, "c": 0.30}
    aligned = {"a": 0.25, "b": 0.20, "c": 0.30}
    assert ranking_reversals(raw, aligned) == [("a", "b")]
    assert ranking_reversals({"a": 0.1, "b": 0.1}, {"a": 0.3, "b": 0.1}) == []  # raw tie: nobody was ahead
    with pytest.raises(ValueError, match="different models"):
        ranking_reversals({"a": 0.1}, {"b": 0.1})
    with pytest.raises(ValueError, match="missing"):
        ranking_reversals({"a": 0.1, "b": float("nan")}, {"a": 0.1, "b": 0.2})


# Study 003 Table 10 (Verbalize, ECE deltas Model1 - Model2): raw, CA, DA, IA
@pytest.mark.parametrize("raw,ca,da,ia,expected", [
    (11.0, 7.2, -1.6, -1.5, {"DA", "IA"}),  # Qwen2.5 7B vs 72B
    (17.9, 12.5, -4.7, -3.9, {"DA", "IA"}),  # Llama3.1 8B vs 70B
    (-5.7, 4.9, -9.7, -8.0, {"CA"}),  # GPT-OSS-20B low vs high
    (-15.2, -2.7, -24.8, -25.6, set()),  # Qwen3-32B nothink vs think
])
def test_reversal_pattern_on_paper_rows(raw, ca, da, ia, expected):
    assert reversal_pattern(raw, {"CA": ca, "DA": da, "IA": ia}) == expected


def test_reversal_rate():
    assert reversal_rate([1.0, -1.0, 2.0, 0.0], [-1.0, -2.0, 1.0, 3.0]) == 0.25
    assert is_reversal(-0.1, 0.2) and not is_reversal(0.0, 0.2)
    with pytest.raises(ValueError, match="equal length"):
        reversal_rate([1.0], [1.0, 2.0])


def test_weight_errors():
    with pytest.raises(ValueError, match="non-negative"):
        weighted_ece([0.5, 0.5], [1, 0], [1.0, -1.0])
    with pytest.raises(ValueError, match="total weight is zero"):
        weighted_brier([0.5, 0.5], [1, 0], [0.0, 0.0])
    with pytest.raises(ValueError, match="bins"):
        weighted_ece([0.5], [1], bins=0)
