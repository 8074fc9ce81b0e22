"""Smooth ECE against relplot and a brute-force kernel sum; KDE-ECE against the reference code."""

from __future__ import annotations

import numpy as np
import pytest

from auditlang.metrics import binfree_ece, kde_ece, ks_ce, smooth_ece

relplot = pytest.importorskip("relplot")


def _smece_bruteforce(c, y, sigma, grid=4001):
    # r(t) = (1/n) sum_i sum_j [phi(t - c_i - 2j) + phi(t + c_i - 2j)] (c_i - y_i): reflected Gaussian
    t = np.linspace(0, 1, grid)[:, None]
    phi = lambda d: np.exp(-0.5 * (d / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))  # noqa: E731
    k = sum(phi(t - c - 2 * j) + phi(t + c - 2 * j) for j in range(-2, 3))
    r = (k * (c - y)).mean(axis=1)
    return np.trapezoid(np.abs(r), t[:, 0])


@pytest.mark.parametrize("sigma", [0.02, 0.1, 0.4])
def test_smooth_ece_fixed_sigma_equals_bruteforce_kernel_sum(sigma, synth):
    c, y = synth(80, 3, power=3.0)
    assert smooth_ece(c, y, sigma=sigma) == pytest.approx(_smece_bruteforce(c, y, sigma), abs=2e-6)


@pytest.mark.parametrize("seed", range(5))
def test_smooth_ece_matches_relplot(seed, synth):
    c, y = synth(300 + 50 * seed, seed, power=1.0 + seed)
    ours, sigma = smooth_ece(c, y, return_sigma=True)
    assert ours == pytest.approx(sigma, abs=1e-8)  # the fixed point smECE_sigma* = sigma*
    assert ours == pytest.approx(relplot.smECE(c, y), abs=2e-3)
    assert smooth_ece(c, y, sigma=0.05) == pytest.approx(relplot.smECE_sigma(c, y, 0.05), abs=1e-3)


def test_smooth_ece_on_ties_and_boundaries(synth):
    c, y = synth(400, 7, ties=1)  # heavy ties, 24 confidences exactly 1.0
    inner = np.clip(c, 0.002, 0.998)
    assert smooth_ece(inner, y) == pytest.approx(relplot.smECE(inner, y), abs=2e-3)
    # a confidence exactly on 0 or 1 keeps its full unit mass under the reflected kernel
    # (relplot's grid reflection counts it once, i.e. half the mass; documented difference)
    assert smooth_ece(np.ones(5), np.zeros(5), sigma=0.1) == pytest.approx(1.0, abs=1e-9)
    assert smooth_ece(np.zeros(5), np.ones(5), sigma=0.3) == pytest.approx(1.0, abs=1e-9)
    value, s = smooth_ece(np.ones(10), np.ones(10), return_sigma=True)
    assert s == 1e-3 and value == pytest.approx(0.0, abs=1e-12)  # calibrated: the sigma floor


def test_smooth_ece_constant_confidence_wide_kernel_is_mean_gap():
    # with constant residual sign the integral of |r| is |mean(c - y)| for any sigma
    c = np.full(50, 0.9)
    y = np.r_[np.ones(30), np.zeros(20)]
    assert smooth_ece(c, y) == pytest.approx(0.3, abs=1e-9)


def _mirror_1d(d, xmin, xmax):
    xmed = (xmin + xmax) / 2
    return np.concatenate(((2 * xmin - d[d < xmed]).reshape(-1, 1), d, (2 * xmax - d[d >= xmed]).reshape(-1, 1)))


def _zhang_reference(conf, correct):
    """Port of ``ece_kde_binary`` (Zhang, Kailkhura & Han 2020, Mix-n-Match code) for top-label
    confidences, using KDEpy as the original does."""
    kdepy = pytest.importorskip("KDEpy")
    x_int = np.linspace(-0.6, 1.6, num=2**14)
    N = conf.shape[0]
    dconf_1 = conf[correct == 1].reshape(-1, 1)
    kbw = np.std(dconf_1) * (N * 2) ** -0.2
    pp1 = kdepy.FFTKDE(bw=kbw, kernel="triweight").fit(_mirror_1d(dconf_1, 0.0, 1.0)).evaluate(x_int)
    pp1[x_int <= 0] = 0
    pp1[x_int >= 1] = 0
    pp1 = pp1 * 2
    pp2 = kdepy.FFTKDE(bw=kbw, kernel="triweight").fit(_mirror_1d(conf.reshape(-1, 1), 0.0, 1.0)).evaluate(x_int)
    pp2[x_int <= 0] = 0
    pp2[x_int >= 1] = 0
    pp2 = pp2 * 2
    perc = np.mean(correct)
    integral = np.zeros(x_int.shape)
    for i in range(x_int.shape[0]):
        conf_i = x_int[i]
        if max(pp1[i], pp2[i]) > 1e-6:
            with np.errstate(divide="ignore", invalid="ignore"):
                accu = min(perc * pp1[i] / pp2[i], 1.0)
            if not np.isnan(accu):
                integral[i] = abs(conf_i - accu) * pp2[i]
        elif i > 1:
            integral[i] = integral[i - 1]
    ind = np.where((x_int >= 0) & (x_int <= 1))
    return np.trapezoid(integral[ind], x_int[ind]) / np.trapezoid(pp2[ind], x_int[ind])


@pytest.mark.parametrize("seed,ties", [(0, None), (1, None), (2, 2), (3, 1)])
def test_kde_ece_matches_reference_implementation(seed, ties, synth):
    c, y = synth(250 + 100 * seed, seed, ties=ties)
    c = np.clip(c, 0.001, 0.999)  # KDEpy needs data strictly inside its grid after mirroring
    assert kde_ece(c, y) == pytest.approx(_zhang_reference(c, y), abs=1e-9)


def test_kde_ece_degenerate_inputs():
    assert kde_ece(np.full(8, 0.7), np.r_[np.ones(2), np.zeros(6)]) == pytest.approx(abs(0.25 - 0.7))
    c = np.array([0.2, 0.4, 0.6, 0.8])
    assert kde_ece(c, np.zeros(4)) == pytest.approx(np.mean(c), abs=0.02)  # acc(c) = 0 everywhere
    assert 0 <= kde_ece(c, np.array([1, 0, 0, 0])) <= 1  # one correct answer: bandwidth fallback


def test_binfree_ece_is_mean_of_three_estimators(tied500):
    c, y = tied500
    expected = (kde_ece(c, y) + ks_ce(c, y) + smooth_ece(c, y)) / 3
    assert binfree_ece(c, y) == pytest.approx(expected, rel=1e-12)
    cm = c.copy()
    cm[:7] = np.nan
    assert binfree_ece(cm, y, missing="drop") == pytest.approx(binfree_ece(c[7:], y[7:]))


def test_kernel_estimators_validate_input():
    with pytest.raises(ValueError, match="smooth_ece: sigma must be"):
        smooth_ece([0.5], [1], sigma=0)
    with pytest.raises(ValueError, match="kde_ece: confidence contains 1 NaN"):
        kde_ece([np.nan, 0.5], [1, 0])
    with pytest.raises(ValueError, match="binfree_ece: inputs have mismatched lengths"):
        binfree_ece([0.5, 0.2], [1])
