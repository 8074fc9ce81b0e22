"""consistency.py: study 004 IoU / DecCons / Agreement / common-accept accuracy and abstain metrics."""

import warnings

import numpy as np
import pytest
from sklearn.metrics import f1_score, jaccard_score, precision_score, recall_score

from auditlang.metrics.consistency import (
    abstain_f1,
    abstain_metrics,
    abstain_precision,
    abstain_recall,
    agreement,
    common_accept_accuracy,
    consistency_report,
    decision_consistency,
    iou_acc,
    iou_cons,
    iou_rej,
)

D1 = [1, 1, 0, 0, 1]  # A1 = {0, 1, 4}, R1 = {2, 3}
D2 = [1, 0, 0, 1, 1]  # A2 = {0, 3, 4}, R2 = {1, 2}


def test_hand_computed_pair():
    assert iou_acc(D1, D2) == pytest.approx(2 / 4)
    assert iou_rej(D1, D2) == pytest.approx(1 / 3)
    assert iou_cons(D1, D2) == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert decision_consistency(D1, D2) == pytest.approx(3 / 5)


def test_iou_against_sklearn_jaccard():
    rng = np.random.default_rng(0)
    for _ in range(20):
        d1, d2 = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
        assert iou_acc(d1, d2) == pytest.approx(jaccard_score(d1, d2, pos_label=1))
        assert iou_rej(d1, d2) == pytest.approx(jaccard_score(d1, d2, pos_label=0))
        # with every question decided, DecCons is plain agreement of decisions
        assert decision_consistency(d1, d2) == pytest.approx(np.mean(d1 == d2))


def test_missing_decisions_leave_the_union():
    d1 = [1, 0, np.nan, 1]
    d2 = [1, 1, np.nan, np.nan]
    # A1 = {0,3}, A2 = {0,1}; R1 = {1}; R2 = {}; union of all = {0,1,3}; agreeing = {0}
    assert iou_acc(d1, d2) == pytest.approx(1 / 3)
    assert iou_rej(d1, d2) == 0.0
    assert decision_consistency(d1, d2) == pytest.approx(1 / 3)


def test_empty_unions_use_zero_division():
    assert iou_rej([1, 1], [1, 1]) == 0.0
    assert np.isnan(iou_rej([1, 1], [1, 1], zero_division=float("nan")))
    assert np.isnan(iou_cons([1, 1], [1, 1], zero_division=float("nan")))
    assert iou_cons([1, 1], [1, 1]) == 0.0  # harmonic mean with a zero
    assert decision_consistency([np.nan], [np.nan]) == 0.0


def test_agreement_and_common_accept_accuracy():
    answers_1, answers_2 = ["A", "B", "C", "D", "A"], ["A", "C", "C", "D", "B"]
    assert agreement(D1, D2, answers_1, answers_2) == pytest.approx(1 / 2)  # common accept {0, 4}
    assert common_accept_accuracy(D1, D2, [1, 0, 0, 0, 1], [1, 1, 0, 0, 0]) == pytest.approx((1 + 0.5) / 2)
    assert agreement([0, 0], [0, 1], ["A", "B"], ["A", "B"]) == 0.0  # nothing commonly accepted
    rep = consistency_report(D1, D2, answers_1=answers_1, answers_2=answers_2)
    assert rep.dec_cons == pytest.approx(0.6) and rep.agreement == pytest.approx(0.5)
    assert np.isnan(rep.common_accept_accuracy)


def test_decision_errors():
    with pytest.raises(ValueError, match="1 \\(accept\\)"):
        iou_acc([1, 2], [1, 0])
    with pytest.raises(ValueError, match="mismatched"):
        iou_acc([1, 0], [1])
    with pytest.raises(ValueError, match="agreement"):
        agreement([1], [1], ["A", "B"], ["A"])


def test_abstain_metrics_reconstruct_table_11_row():
    # AskCal Original, Mistral-7B HellaSwag (004 Table 11): 6 answered (3 right, 3 wrong),
    # 994 abstained of which 628 wrong.
    abstain = np.r_[np.zeros(6), np.ones(994)]
    correct = np.r_[[1, 1, 1, 0, 0, 0], np.zeros(628), np.ones(366)]
    m = abstain_metrics(abstain, correct)
    got = [round(x, 3) for x in (m.reliable_accuracy, m.effective_reliability, m.abstain_accuracy,
                                  m.abstain_precision, m.abstain_recall, m.abstain_rate, m.abstain_f1)]
    assert got == [0.500, 0.000, 0.631, 0.632, 0.995, 0.994, 0.773]


def test_abstain_metrics_against_sklearn():
    rng = np.random.default_rng(5)
    for _ in range(20):
        ab, z = rng.integers(0, 2, 40), rng.integers(0, 2, 40)
        wrong = 1 - z
        assert abstain_precision(ab, z) == pytest.approx(precision_score(wrong, ab, zero_division=0))
        assert abstain_recall(ab, z) == pytest.approx(recall_score(wrong, ab, zero_division=0))
        assert abstain_f1(ab, z) == pytest.approx(f1_score(wrong, ab, zero_division=0))


def test_abstain_edge_cases():
    never = abstain_metrics([0, 0, 0], [1, 1, 0])
    assert never.abstain_precision == 0.0 and never.abstain_rate == 0.0 and never.abstain_f1 == 0.0
    assert never.reliable_accuracy == pytest.approx(2 / 3)
    all_right = abstain_metrics([1, 0], [1, 1], zero_division=float("nan"))
    assert np.isnan(all_right.abstain_recall) and np.isnan(all_right.abstain_f1)
    everything = abstain_metrics([1, 1], [0, 1], zero_division=float("nan"))
    assert np.isnan(everything.reliable_accuracy) and everything.effective_reliability == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        abstain_metrics([1, 1], [1, 1])
    with pytest.raises(ValueError, match="abstain"):
        abstain_metrics([1, 0.5], [1, 1])
