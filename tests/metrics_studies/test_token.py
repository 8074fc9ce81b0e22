"""token.py: study 000 appendix A.3 / C.3 token confidence and coverage; study 001 section 3.1 readouts."""

import math

import numpy as np
import pytest

from auditlang.metrics.token import (
    label_probs,
    span_confidence,
    span_confidences,
    token_confidence,
    token_confidences,
    topk_label_coverage,
)

LABELS = ["A", "B", "C", "D"]
L = math.log


def test_raw_and_normalised_over_labels_present():
    window = {"A": L(0.5), " B": L(0.2), "The": L(0.2), "C": L(0.05)}
    tc = token_confidence(window, LABELS, "A")
    assert tc.raw == pytest.approx(0.5)
    assert tc.norm == pytest.approx(0.5 / 0.75)  # D is absent: the sum runs over A, B, C only
    assert tc.labels_present == 3 and not tc.full_coverage


def test_same_label_tokens_are_summed_after_strip():
    assert label_probs({"A": L(0.3), " A": L(0.2), "B": L(0.1)}, LABELS) == pytest.approx({"A": 0.5, "B": 0.1})


def test_predicted_label_missing_from_window_scores_zero():
    tc = token_confidence({"A": L(0.6), "B": L(0.3)}, LABELS, "D")
    assert (tc.raw, tc.norm) == (0.0, 0.0)


def test_no_valid_label_in_window_gives_nan_norm():
    tc = token_confidence({"The": L(0.9), "Let": L(0.05)}, LABELS, "A")
    assert tc.raw == 0.0 and math.isnan(tc.norm) and tc.labels_present == 0


@pytest.mark.parametrize("pred", [None, "T", "E"])
def test_invalid_prediction_gives_nan(pred):
    tc = token_confidence({"A": L(0.9)}, LABELS, pred)
    assert math.isnan(tc.raw) and math.isnan(tc.norm)


def test_probabilities_input_and_full_coverage():
    tc = token_confidence({"A": 0.1, "B": 0.2, "C": 0.3, "D": 0.2}, LABELS, "C", logprobs=False)
    assert tc.raw == pytest.approx(0.3) and tc.norm == pytest.approx(0.375) and tc.full_coverage


def test_vectorised_form_matches_scalar_and_marks_missing():
    windows = [{"A": L(0.5), "B": L(0.5)}, {"x": L(1.0)}, {"B": L(0.2), "A": L(0.2)}]
    raw, norm = token_confidences(windows, ["A", "B"], ["A", "A", None])
    np.testing.assert_allclose(raw, [0.5, 0.0, np.nan])
    np.testing.assert_allclose(norm, [0.5, np.nan, np.nan])


@pytest.mark.parametrize(
    "window,labels,match",
    [({"A": 0.5}, ["A"], "not a valid"), ({"A": -0.1}, [], "empty"), ({"A": -0.1}, ["A", "A"], "duplicates")],
)
def test_bad_input_raises(window, labels, match):
    with pytest.raises(ValueError, match=match):
        token_confidence(window, labels, "A")


def test_token_confidences_length_mismatch():
    with pytest.raises(ValueError, match="token_confidences"):
        token_confidences([{"A": 0.0}], LABELS, ["A", "B"])


def test_topk_label_coverage_hand_computed():
    windows = [
        {"A": 0.5, "B": 0.3, "C": 0.2},  # full
        {"A": 0.6, "B": 0.3, "x": 0.1},  # C missing: bound 0.9 / (0.9 + 1 * 0.1) = 0.9
    ]
    cov = topk_label_coverage(windows, ["A", "B", "C"], logprobs=False)
    assert cov.example_coverage == 0.5 and not cov.full_cell and cov.n == 2
    assert cov.mass_ratio_lower_bound == pytest.approx(0.95)
    assert topk_label_coverage(windows[:1], ["A", "B", "C"], logprobs=False).full_cell
    with pytest.raises(ValueError, match="no windows"):
        topk_label_coverage([], ["A"])


def test_span_readouts():
    lp = [L(0.5), L(0.8)]
    assert span_confidence(lp, "T1") == pytest.approx(math.sqrt(0.4))
    assert span_confidence(lp, "T2") == pytest.approx(0.5)
    assert span_confidence([L(0.7)], "T1") == pytest.approx(span_confidence([L(0.7)], "T2"))
    np.testing.assert_allclose(span_confidences([lp, []]), [math.sqrt(0.4), np.nan])
    with pytest.raises(ValueError, match="readout"):
        span_confidence(lp, "T3")
    with pytest.raises(ValueError, match="<= 0"):
        span_confidence([0.5])
    with pytest.raises(ValueError, match="non-empty"):
        span_confidence([])
