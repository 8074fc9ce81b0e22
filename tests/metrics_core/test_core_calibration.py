"""Binned ECE/MCE, Brier, NLL, KS-Cal and accuracy against netcal/sklearn and hand-computed cases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss

from auditlang.metrics import accuracy, brier, drop_missing, ece, ks_ce, mce, nll, reliability_bins

netcal_metrics = pytest.importorskip("netcal.metrics")


def _netcal(cls, c, y, equal: bool = True, bins: int = 10) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cls(bins=bins, equal_intervals=equal, detection=True).measure(c, y))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bins", [1, 10, 15])
def test_ece_mce_match_netcal_on_random_inputs(seed, bins, synth):
    c, y = synth(40 + 97 * seed, seed)
    for binning, equal in (("equal_width", True), ("equal_mass", False)):
        ref_ece = _netcal(netcal_metrics.ECE, c, y, equal, bins)
        ref_mce = _netcal(netcal_metrics.MCE, c, y, equal, bins)
        assert ece(c, y, bins=bins, binning=binning) == pytest.approx(ref_ece, abs=1e-12)
        assert mce(c, y, bins=bins, binning=binning) == pytest.approx(ref_mce, abs=1e-12)


def test_constant_confidence_identities_of_study_003():
    # study 003 §2: all confidences q, accuracy a -> ECE = |a - q|, Brier = q^2 + a(1 - 2q)
    for q, y in ((0.8, [1, 1, 0, 1, 0]), (0.3, [1, 0, 0, 0]), (1.0, [0, 1]), (0.0, [1, 1, 0])):
        y = np.array(y, float)
        c = np.full(y.size, q)
        a = y.mean()
        for binning in ("equal_width", "equal_mass"):
            assert ece(c, y, binning=binning) == pytest.approx(abs(a - q))
        assert brier(c, y) == pytest.approx(q**2 + a * (1 - 2 * q))
        assert ks_ce(c, y) == pytest.approx(abs(a - q))


def test_hand_computed_ece_with_empty_bins():
    c = np.array([0.05, 0.15, 0.95, 0.95])
    y = np.array([0, 1, 1, 0])
    # bins 0, 1, 9 occupied: |0.05-0|*1/4 + |0.15-1|*1/4 + |0.95-0.5|*2/4
    assert ece(c, y) == pytest.approx(0.05 / 4 + 0.85 / 4 + 0.45 / 2)
    assert mce(c, y) == pytest.approx(0.85)
    rb = reliability_bins(c, y)
    assert rb.counts.tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert np.isnan(rb.mean_conf[2]) and np.isnan(rb.accuracy[5])
    assert rb.mean_conf[9] == pytest.approx(0.95) and rb.accuracy[9] == 0.5
    assert rb.edges == pytest.approx(np.linspace(0, 1, 11))


def test_single_bin_is_absolute_mean_gap(data500):
    c, y = data500
    assert ece(c, y, bins=1) == pytest.approx(abs(c.mean() - y.mean()))
    assert mce(c, y, bins=1) == pytest.approx(abs(c.mean() - y.mean()))


def test_all_correct_and_all_wrong():
    c = np.array([0.2, 0.55, 0.9, 1.0])
    assert ece(c, np.ones(4)) == pytest.approx(np.mean(1 - c))
    assert ece(c, np.zeros(4)) == pytest.approx(np.mean(c))
    assert brier(c, np.ones(4)) == pytest.approx(np.mean((1 - c) ** 2))
    assert accuracy(np.ones(4)) == 1.0 and accuracy([False, False]) == 0.0


def test_confidences_exactly_on_edges_left_closed():
    c = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    rb = reliability_bins(c, np.zeros(c.size))
    # [k/10, (k+1)/10): value k/10 opens bin k; 1.0 closes the last bin
    assert rb.counts.tolist() == [1, 1, 1, 1, 1, 1, 1, 1, 1, 2]
    right = reliability_bins(c, np.zeros(c.size), closed="right")
    # (k/10, (k+1)/10]: value k/10 closes bin k-1; 0.0 opens the first bin
    assert right.counts.tolist() == [2, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert reliability_bins([0.35, 0.35000000001], [1, 1], bins=20).counts[7] == 2


def test_edge_values_where_netcal_float_edges_differ():
    # netcal bins with np.linspace edges, so 0.3 < 0.30000000000000004 falls in [0.2, 0.3);
    # we treat 0.3 as on the edge -> [0.3, 0.4). Documented difference.
    c = np.array([0.3, 0.3, 0.6, 0.7])
    y = np.array([1.0, 0.0, 1.0, 1.0])
    ours = reliability_bins(c, y)
    assert ours.counts[3] == 2 and ours.counts[6] == 1 and ours.counts[7] == 1
    pair_c, pair_y = np.array([0.3, 0.25]), np.array([1.0, 0.0])
    assert _netcal(netcal_metrics.ECE, pair_c, pair_y) == pytest.approx(abs(0.275 - 0.5))  # one bin in netcal
    assert ece(pair_c, pair_y) == pytest.approx(0.5 * 0.7 + 0.5 * 0.25)  # two bins here
    pair_c = np.array([0.3, 0.35])
    assert ece(pair_c, pair_y) == pytest.approx(abs(0.325 - 0.5))  # same bin here
    assert _netcal(netcal_metrics.ECE, pair_c, pair_y) == pytest.approx(0.5 * 0.7 + 0.5 * 0.35)


def test_equal_mass_bins_with_ties_share_a_bin():
    c = np.array([0.5] * 6 + [0.9] * 4)
    y = np.array([1, 0, 1, 0, 1, 0, 1, 1, 1, 0], float)
    value, rb = ece(c, y, bins=4, binning="equal_mass", return_bins=True)
    assert rb.counts.sum() == 10 and set(rb.counts.tolist()) <= {0, 6, 4}
    assert value == pytest.approx(0.6 * abs(0.5 - 0.5) + 0.4 * abs(0.9 - 0.75))
    assert rb.edges[0] == 0.0 and rb.edges[-1] == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_brier_and_nll_match_sklearn(seed, synth):
    c, y = synth(300, seed)
    assert brier(c, y) == pytest.approx(brier_score_loss(y, c), abs=1e-12)
    cc = np.clip(c, 1e-6, 1 - 1e-6)
    expected = -np.mean(y * np.log(cc) + (1 - y) * np.log(1 - cc))
    assert nll(c, y) == pytest.approx(expected, rel=1e-12)


def test_nll_clips_at_eps():
    assert nll([1.0, 0.0], [0, 1]) == pytest.approx(-np.log(1e-6))
    assert nll([1.0], [1]) == pytest.approx(-np.log1p(-1e-6))
    assert nll([0.0], [1], eps=1e-3) == pytest.approx(-np.log(1e-3))


def _ks_reference(c, y):
    # Gupta & Ramdas (2021) reference: argsort, cumulative sums, max abs difference
    o = np.argsort(c)
    return np.max(np.abs(np.cumsum(c[o]) / c.size - np.cumsum(y[o]) / c.size))


@pytest.mark.parametrize("seed", range(5))
def test_ks_matches_reference_without_ties(seed, synth):
    c, y = synth(200, seed)
    assert ks_ce(c, y) == pytest.approx(_ks_reference(c, y), abs=1e-12)


def test_ks_is_invariant_to_tie_order():
    c = np.array([0.9, 0.9, 0.9, 0.2])
    y1, y2 = np.array([1, 0, 0, 0.0]), np.array([0, 0, 1, 0.0])
    # cumulative gap at t=0.2: 0.2; at t=0.9: 2.9 - 1 = 1.9 -> /4
    assert ks_ce(c, y1) == ks_ce(c, y2) == pytest.approx(1.9 / 4)


def test_missing_confidences_error_or_drop():
    c = np.array([0.9, np.nan, 0.2, np.nan])
    y = np.array([1, 0, 0, 1])
    with pytest.raises(ValueError, match="ece: confidence contains 2 NaN"):
        ece(c, y)
    assert ece(c, y, missing="drop") == pytest.approx(ece([0.9, 0.2], [1, 0]))
    assert brier(c, y, missing="drop") == pytest.approx(0.025)
    kept_c, kept_y, n_missing = drop_missing(c, y)
    assert n_missing == 2 and kept_c.tolist() == [0.9, 0.2] and kept_y.tolist() == [1, 0]
    with pytest.raises(ValueError, match="all 2 confidences are missing"):
        brier([np.nan, np.nan], [1, 0], missing="drop")
    with pytest.raises(ValueError, match="missing must be one of"):
        ece([0.5], [1], missing="zero")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ece([0.5, 0.6], [1]), "ece: inputs have mismatched lengths"),
        (lambda: ece([1.2], [1]), r"ece: confidence must lie in \[0, 1\]"),
        (lambda: brier([], []), "brier: confidence is empty"),
        (lambda: mce([0.5], [2]), "mce: correct must contain only 0/1"),
        (lambda: nll([0.5], [np.nan]), "nll: correct must contain only 0/1"),
        (lambda: ks_ce([[0.5]], [1]), "ks_ce: confidence must be 1-D"),
        (lambda: ece([0.5], [1], bins=0), "ece: bins must be >= 1"),
        (lambda: ece([0.5], [1], bins=2.5), "ece: bins must be an integer"),
        (lambda: ece([0.5], [1], binning="quantile"), "ece: binning must be one of"),
        (lambda: nll([0.5], [1], eps=0.7), "nll: eps must be"),
        (lambda: accuracy([]), "accuracy: correct is empty"),
    ],
)
def test_bad_input_raises_value_error_naming_the_metric(call, message):
    with pytest.raises(ValueError, match=message):
        call()
