"""Kernel (bin-free) calibration errors: smooth ECE and KDE-ECE (study 001 §3.1, configuration C)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from auditlang.metrics._inputs import prepare

SMECE_SIGMA_MIN = 1e-3


# ---------------------------------------------------------------- smooth ECE (Błasiok & Nakkiran 2024)


class _SmoothResidual:
    """``r_sigma(t) = (1/n) sum_i K^R_sigma(t, c_i) (c_i - z_i)`` for the reflected Gaussian kernel.

    Reflecting about 0 and 1 makes the kernel 2-periodic and even, so (Poisson summation)
    ``K^R_sigma(t, c) = 1 + 2 sum_{m>=1} exp(-(pi m sigma)^2 / 2) cos(pi m t) cos(pi m c)``.
    We evaluate this cosine series exactly (truncated where the factor is < 1e-14) on a grid with a
    DCT-I; the coefficients ``A_m = (1/n) sum_i (c_i - z_i) cos(pi m c_i)`` do not depend on sigma.
    """

    def __init__(self, conf: np.ndarray, correct: np.ndarray) -> None:
        self.c = conf
        self.a = (conf - correct) / conf.size
        self.coef = np.array([self.a.sum()])

    def _coefficients(self, m_max: int) -> np.ndarray:
        have = self.coef.size
        if m_max >= have:
            step = max(1, 2_000_000 // self.c.size)  # bound the (terms, n) block in memory
            blocks = [self.coef]
            for lo in range(have, m_max + 1, step):
                m = np.arange(lo, min(lo + step, m_max + 1))
                blocks.append(np.einsum("ij,j->i", np.cos(np.pi * np.outer(m, self.c)), self.a))
            self.coef = np.concatenate(blocks)
        return self.coef[: m_max + 1]

    def integral(self, sigma: float) -> float:
        """``smECE_sigma = int_0^1 |r_sigma(t)| dt`` (trapezoid on a grid of step <= sigma/32)."""
        m_max = int(np.ceil(np.sqrt(2 * np.log(1e14)) / (np.pi * sigma)))
        grid = 1024
        while grid < 32 / sigma:
            grid *= 2
        m_max = min(m_max, grid - 1)
        m = np.arange(m_max + 1)
        x = np.zeros(grid + 1)
        x[: m_max + 1] = self._coefficients(m_max) * np.exp(-0.5 * (np.pi * m * sigma) ** 2)
        # DCT-I: y_k = x_0 + (-1)^k x_G + 2 sum_{m=1}^{G-1} x_m cos(pi k m / G) = r(k / G)
        from scipy import fft  # lazy: scipy.signal & co. cost ~0.5 s at start-up

        r = fft.dct(x, type=1)
        absr = np.abs(r)
        return float((absr.sum() - 0.5 * (absr[0] + absr[-1])) / grid)


def smooth_ece(conf: ArrayLike, correct: ArrayLike, sigma: float | None = None, missing: str = "error",
               return_sigma: bool = False) -> float | tuple[float, float]:
    """Smooth ECE (Błasiok & Nakkiran 2024, ICLR, arXiv:2309.12236; study 001 §3.1).

    ``smECE_sigma = int_0^1 |r_sigma(t)| dt`` with ``r_sigma(t) = (1/N) sum_i K^R_sigma(t, c_i)(c_i - z_i)``,
    the kernel-smoothed residual under the Gaussian kernel reflected at 0 and 1 (equivalently
    ``int |rhat(t)| deltahat(t) dt`` with the smoothed calibration residual ``rhat`` and density
    ``deltahat``). Without ``sigma``, the bandwidth is the fixed point ``smECE_sigma* = sigma*``
    (unique because ``smECE_sigma`` is non-increasing in sigma), solved to 1e-9; if
    ``smECE_sigma < sigma`` already at ``sigma = 1e-3`` (the ``eps`` of the reference ``relplot``
    package), the value at ``sigma = 1e-3`` is returned. ``relplot.smECE`` discretises the kernel and
    stops its bisection after 10 halvings; the two agree to about 1e-3 for confidences inside
    (0, 1). A confidence exactly at 0 or 1 keeps unit mass here (the kernel is the density of
    the reflected point ``pi_R(c + N(0, sigma^2))``), whereas relplot's grid reflection counts such a
    point once, i.e. with half its mass — this matters for verbal confidences of exactly 1.0.
    ``return_sigma=True`` returns ``(value, sigma)``.
    """
    if sigma is not None and not (isinstance(sigma, (int, float)) and 0 < sigma <= 10):
        raise ValueError(f"smooth_ece: sigma must be a number in (0, 10] or None, got {sigma!r}")
    c, y = prepare("smooth_ece", conf, correct, missing)
    sr = _SmoothResidual(c, y)
    if sigma is not None:
        s = float(sigma)
    else:
        s = _fixed_point(sr.integral)
    value = sr.integral(s)
    return (value, s) if return_sigma else value


def _fixed_point(f: Callable[[float], float]) -> float:
    """Solve ``f(sigma) = sigma`` for non-increasing ``f`` on ``[SMECE_SIGMA_MIN, 1]``."""
    def h(s: float) -> float:
        return f(s) - s

    hi = 1.0
    if h(hi) >= 0:
        return hi
    lo = hi
    while True:  # walk down geometrically until h >= 0 (keeps the needed grid small)
        lo = max(lo / 2, SMECE_SIGMA_MIN)
        if h(lo) >= 0:
            break
        if lo == SMECE_SIGMA_MIN:
            return SMECE_SIGMA_MIN
        hi = lo
    from scipy import optimize  # lazy: scipy costs ~0.3 s at start-up; only these estimators need it

    return float(optimize.brentq(h, lo, hi, xtol=1e-9, rtol=1e-9))


# ---------------------------------------------------------------- KDE-ECE (Zhang, Kailkhura & Han 2020)

_KDE_GRID = np.linspace(-0.6, 1.6, num=2**14)
# the smallest bandwidth: the reference's h = std(correct) (2N)^(-1/5) is 0 for tied correct
# confidences (a verbal "0.9" for every correct answer); the floor makes the value continuous in
# the data there (h -> 0 and exact ties give the same value) and keeps the kernel 22 grid steps
# wide (support 3h), so mass at exactly 0 or 1 is still mirrored, not cut by the grid
KDE_BW_MIN = 1e-3


def _mirror(d: np.ndarray) -> np.ndarray:
    # reference mirror_1d(d, 0, 1): values < 0.5 reflect about 0, values >= 0.5 about 1
    return np.concatenate((-d[d < 0.5], d, 2.0 - d[d >= 0.5]))


def _triweight_kde(data: np.ndarray, bw: float) -> np.ndarray:
    """KDEpy ``FFTKDE(bw, kernel="triweight").fit(data).evaluate(_KDE_GRID)``: linear binning onto
    the grid, then convolution with the triweight kernel scaled to standard deviation ``bw``
    (``35/32 (1 - u^2)^3`` on ``|u| < 1`` with ``u = x / (3 bw)``)."""
    x = _KDE_GRID
    dx = (x[-1] - x[0]) / (x.size - 1)
    pos = (data - x[0]) / dx
    i = np.floor(pos).astype(np.intp)
    frac = pos - i
    counts = np.bincount(i, weights=1 - frac, minlength=x.size) + np.bincount(i + 1, weights=frac, minlength=x.size)
    counts = counts[: x.size] / data.size
    real_bw = 3.0 * bw
    L = int(min(np.floor(real_bw / dx), x.size))
    u = np.linspace(-dx * L, dx * L, 2 * L + 1) / real_bw
    kernel = np.where(u**2 < 1, np.maximum(0.0, 1 - u**2) ** 3, 0.0) * (35.0 / 32.0) / real_bw
    from scipy import signal  # lazy: scipy costs ~0.3 s at start-up; only these estimators need it

    return signal.convolve(counts, kernel, mode="same")


def kde_ece(conf: ArrayLike, correct: ArrayLike, missing: str = "error") -> float:
    """KDE-based ECE of Zhang, Kailkhura & Han (2020, "Mix-n-Match", ICML; study 001 §3.1).

    ``ECE_KDE = int |c - acc(c)| f(c) dc / int f(c) dc`` over [0, 1], where ``f`` is a KDE of all
    confidences, ``f1`` a KDE of the confidences of correct answers, and
    ``acc(c) = min(1, a * f1(c) / f(c))`` with ``a`` the accuracy. As in the authors' reference
    implementation (``ece_kde_binary``): triweight kernel; bandwidth
    ``h = std(confidences of correct answers) * (2N)^(-1/5)`` used for both KDEs; boundary bias
    removed by mirroring each point about its nearer end of [0, 1] and doubling the density; KDEs
    on ``linspace(-0.6, 1.6, 2^14)`` by linear binning and convolution (KDEpy ``FFTKDE``); grid points
    where both densities are <= 1e-6 repeat the previous integrand value; trapezoidal integrals.

    Our additions for degenerate inputs (the reference code fails or diverges on them; KDEpy
    accepts only a positive bandwidth): with no correct answers ``acc(c) = 0``; the bandwidth is
    ``h = max(std(correct) * (2N)^(-1/5), KDE_BW_MIN)`` with ``KDE_BW_MIN = 1e-3``, so tied or
    single correct confidences (reference ``h = 0``) get the value of the nearby untied data: the
    rule is continuous in the data (a former switch to ``std(all)`` at a float std of exactly 0
    gave 0.228 / 0.35 / 0.35 for one design at n = 20 / 30 / 40); with constant confidence ``q``
    (all values equal) the estimator's limit ``|a - q|`` is returned (study 003 §2). A grid point
    where both densities are <= 1e-6 contributes 0 instead of repeating the previous integrand
    value: where the density has a gap (clusters of confidences further apart than the kernel's
    support) the reference's repetition carries a spike of the density across
    the gap and gives values far above 1 (578.7 for 50 tied confidences). Where the density has no
    gap inside (0, 1) both rules give the same value. With it the value is an average of
    ``|c - acc(c)|`` under the density, so it always lies in [0, 1]. At the floor, groups of tied
    confidences further apart than the kernel's support (3e-3) give about
    ``sum_k (n_k/N) |q_k - acc_k|`` over the distinct confidences ``q_k``; closer ones merge.
    """
    c, y = prepare("kde_ece", conf, correct, missing)
    n = c.size
    perc = float(y.mean())
    c1 = c[y == 1]
    bw = max(float(np.std(c1)) * (2 * n) ** -0.2 if c1.size else 0.0, KDE_BW_MIN)
    if not np.ptp(c) > 0:
        return abs(perc - float(c[0]))
    x = _KDE_GRID
    inside = (x > 0.0) & (x < 1.0)
    pp2 = np.where(inside, _triweight_kde(_mirror(c), bw), 0.0) * 2
    pp1 = np.where(inside, _triweight_kde(_mirror(c1), bw), 0.0) * 2 if c1.size else np.zeros_like(x)
    active = np.maximum(pp1, pp2) > 1e-6
    with np.errstate(divide="ignore", invalid="ignore"):
        accu = np.minimum(perc * pp1 / pp2, 1.0)
        integral = np.where(active & ~np.isnan(accu), np.abs(x - accu) * pp2, 0.0)  # masked: no warning
    ind = (x >= 0.0) & (x <= 1.0)
    return float(np.trapezoid(integral[ind], x[ind]) / np.trapezoid(pp2[ind], x[ind]))
