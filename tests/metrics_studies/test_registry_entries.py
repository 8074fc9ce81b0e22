"""Spec-level names of the study-specific metrics: registered, validated, and usable by the bootstrap."""

import numpy as np
import pytest

from auditlang.metrics import METRICS, bootstrap_ci, paired_bootstrap_diff, validate_params
from auditlang.metrics.aligned import distribution_aligned, instance_aligned
from auditlang.metrics.calibration import binfree_ece, ece
from auditlang.metrics.protocol import calibration_gap
from auditlang.metrics.robustness import a_sst, a_stb, answer_sensitivity, p_rb, prompt_robustness
from auditlang.metrics.spread import prompt_spread_arrays
from auditlang.metrics.token import label_coverage
from auditlang.metrics.verbal import overconf_vs_acc, overconf_vs_token

STUDY_NAMES = {
    "vpr", "overconf_vs_acc", "overconf_vs_token", "ece_gap", "prompt_spread", "size_spread_spearman",
    "calibration_gap", "p_rb", "a_stb", "a_sst", "ia_retention", "ia_ece_diff", "ia_brier_diff", "da_ece_diff",
    "da_brier_diff", "ca_ece_diff", "ca_brier_diff", "ranking_reversals", "iou_acc", "iou_rej", "iou_cons",
    "dec_cons", "agreement", "common_accept_accuracy", "abstain_precision", "abstain_recall", "abstain_f1",
    "topk_label_coverage",
}


def test_all_study_names_registered():
    assert STUDY_NAMES <= set(METRICS)


def test_parameters_are_validated():
    assert validate_params("ece_gap", {"bins": 15}) == {"bins": 15, "same_rows": False}
    assert validate_params("a_sst", {}) == {"contrast": "min"}
    with pytest.raises(ValueError, match="contrast"):
        validate_params("a_sst", {"contrast": "all"})
    with pytest.raises(ValueError, match="unknown parameter"):
        validate_params("iou_cons", {"bins": 10})


def test_scalar_wrappers_match_detailed_forms():
    conf, groups = [[0.2, 0.6, 0.9]], [["a", "a", "b"]]
    assert a_sst(conf, groups) == answer_sensitivity(conf, groups).value
    assert a_stb(conf, groups) == pytest.approx(0.8)
    assert p_rb([[0.2, 0.4]]) == prompt_robustness([[0.2, 0.4]]).value
    assert overconf_vs_acc([0.9, None], [0, 1]) == pytest.approx(0.9)
    assert overconf_vs_token([0.9, None], [0.5, 0.1]) == pytest.approx(0.4)
    assert prompt_spread_arrays([1, 0], [1, 1], [0, 0]) == 1.0
    with pytest.raises(ValueError, match="at least two"):
        prompt_spread_arrays([1, 0])
    assert label_coverage([{"A": 0.0}, {"B": 0.0}], ["A"]) == 0.5


def test_pairwise_scalar_forms():
    ca, za, cb, zb = [0.9, 0.8, 0.7, 0.6], [1, 1, 1, 0], [0.9, 0.5, 0.4, 0.3], [1, 0, 0, 0]
    da = distribution_aligned(ca, za, cb, zb)
    assert METRICS["da_ece_diff"].fn(ca, za, cb, zb) == pytest.approx(da.ece_a - da.ece_b)
    ia = instance_aligned(ca, za, cb, zb)
    assert METRICS["ia_brier_diff"].fn(ca, za, cb, zb) == pytest.approx(ia.brier_a - ia.brier_b)
    assert METRICS["ia_retention"].fn(za, zb) == pytest.approx(ia.retention)
    assert METRICS["ca_brier_diff"].fn([0.9, 0.2], [0.5, 0.5], [1, 0]) == pytest.approx((0.01 + 0.04 - 0.5) / 2)


def test_calibration_gap_estimator_by_name():
    rng = np.random.default_rng(2)
    v, t = rng.uniform(size=200), rng.uniform(size=200)
    y = (rng.uniform(size=200) < 0.5).astype(int)
    assert calibration_gap(v, t, y, "binfree_ece") == pytest.approx(binfree_ece(v, y) - binfree_ece(t, y))
    assert calibration_gap(v, t, y) == pytest.approx(ece(v, y) - ece(t, y))
    with pytest.raises(ValueError, match="not a registered"):
        calibration_gap(v, t, y, "iou_cons")


def test_bootstrap_over_study_metrics():
    rng = np.random.default_rng(4)
    n = 120
    verbal = rng.uniform(size=n)
    verbal[:10] = np.nan  # unparsed rows stay in the resampling, dropped inside the metric
    token, correct = rng.uniform(size=n), (rng.uniform(size=n) < 0.5).astype(int)
    ci = bootstrap_ci("ece_gap", verbal, token, correct, B=50, seed=42)
    assert np.isfinite(ci.low) and ci.low < ci.high and ci.n_nan == 0
    from auditlang.metrics.verbal import ece_gap
    assert ci.point == pytest.approx(ece_gap(verbal, token, correct))
    # paired example-level resampling of a spread statistic (000 App. E.2)
    cs = [(rng.uniform(size=n) < p).astype(int) for p in (0.5, 0.6, 0.7)]
    sp = bootstrap_ci("prompt_spread", *cs, B=50, seed=42)
    assert sp.point == pytest.approx(prompt_spread_arrays(*cs))
    diff = paired_bootstrap_diff("vpr", [verbal], [np.where(np.arange(n) < 30, np.nan, 0.5)], B=50, seed=42)
    assert diff.point == pytest.approx((110 - 90) / n)
