"""Study 002 §3.2 (Table 1): the illustrative simulation of four synthetic confidence estimators.

N inputs, each with a difficulty d_i ~ U[0, 1] and M generations whose correctness is
corr_i^(m) ~ Bernoulli(1 - d_i); the estimators are f_oracle = corr, f_constant = 1 - d_i,
f_random ~ Bernoulli(1 - d_i) drawn independently of corr, and f_prior = 0.5 (002 §3.2). Each is
scored over the N x M generations with ECE (equal-mass bins), Brier and AUROC, and with A-STB / A-SST
(auditlang/metrics/robustness.py) where, as 002's footnote 1 assumes, generations with the same
correctness have the same meaning (two semantic groups per input). One seeded numpy generator
(``seed=``) draws d, corr and f_random in that order. The comparison reads no records: its audit only
anchors it in the spec.
"""

from __future__ import annotations

import numpy as np

from auditlang.metrics.calibration import brier, ece
from auditlang.metrics.discrimination import auroc
from auditlang.report.comparisons.common import Comparison
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table

COLUMNS = ["estimator", "ECE ↓", "Brier ↓", "AUROC ↑", "STB ↑", "SST ↑", "STB share of inputs", "SST share of inputs"]


def draw(n: int, m: int, seed: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(corr as 0/1 floats (n x m), estimator -> confidences (n x m)) of 002 §3.2."""
    rng = np.random.default_rng(seed)
    d = rng.uniform(size=n)
    corr = (rng.uniform(size=(n, m)) < (1 - d)[:, None]).astype(float)
    rand = (rng.uniform(size=(n, m)) < (1 - d)[:, None]).astype(float)
    return corr, {"f_oracle": corr, "f_constant": np.repeat((1 - d)[:, None], m, axis=1), "f_random": rand,
                  "f_prior": np.full((n, m), 0.5)}


def max_group(corr: np.ndarray) -> np.ndarray:
    """Boolean (n x m) mask of Y^max with two groups (correct / wrong): the larger group, on a tie the
    group of the first generation (metrics/robustness.py: the first of the largest in order of appearance)."""
    k = corr.sum(axis=1, keepdims=True)
    m = corr.shape[1]
    label = np.where(k > m - k, 1.0, np.where(k < m - k, 0.0, corr[:, :1]))
    return corr == label


def stability_sensitivity(conf: np.ndarray, corr: np.ndarray) -> tuple[float, float, float, float]:
    """(A-STB, A-SST, share of inputs qualifying for each) with the two correctness groups, vectorised
    (the same values as metrics.robustness.answer_stability / answer_sensitivity: population Std, Y^min
    the other group, only qualifying inputs averaged)."""
    big = max_group(corr)
    nb = big.sum(axis=1)
    ok_stb = nb > 1
    mean = (conf * big).sum(axis=1) / np.maximum(nb, 1)
    std = np.sqrt((((conf - mean[:, None]) ** 2) * big).sum(axis=1) / np.maximum(nb, 1))
    small = ~big
    ns = small.sum(axis=1)
    ok_sst = ns > 0
    diff = np.abs(conf[:, :, None] - conf[:, None, :])  # n x m x m
    pair_mm = (big[:, :, None] & big[:, None, :])
    pair_ms = (big[:, :, None] & small[:, None, :])
    d_mm = (diff * pair_mm).sum(axis=(1, 2)) / np.maximum(nb * nb, 1)
    d_ms = (diff * pair_ms).sum(axis=(1, 2)) / np.maximum(nb * ns, 1)
    stb = 1.0 - float(std[ok_stb].mean()) if ok_stb.any() else float("nan")
    sst = float(np.abs(d_ms - d_mm)[ok_sst].mean()) if ok_sst.any() else float("nan")
    return stb, sst, float(ok_stb.mean()), float(ok_sst.mean())


def simulation(rd: RunData, name: str, c) -> Comparison:
    out = Comparison(name, "simulation", c.audit, shape="simulation")
    t = Table(name, f"Simulation of §3.2 with N = {c.n:,} inputs and M = {c.m} generations each, seed {c.seed} "
              f"({name}; study 002 Table 1)", list(COLUMNS))
    corr, preds = draw(c.n, c.m, c.seed)
    z = corr.ravel()
    for est, conf in preds.items():
        flat = conf.ravel()
        stb, sst, s1, s2 = stability_sensitivity(conf, corr)
        t.add(est, ece(flat, z, bins=c.bins, binning="equal_mass"), brier(flat, z), auroc(flat, z), stb, sst, s1, s2)
    t.notes.append(f"d_i ~ U[0, 1], corr_i^(m) ~ Bernoulli(1 - d_i), f_random ~ Bernoulli(1 - d_i) independently, "
                   f"f_constant = 1 - d_i, f_prior = 0.5 (002 §3.2); numpy default_rng({c.seed}) draws d, corr, f_random "
                   "in that order.")
    t.notes.append(f"ECE: {c.bins} equal-mass bins over the N x M generations; Brier and AUROC over the same. STB / SST: "
                   "002 eqs. 4-7 with the generations of one correctness as one meaning (002 footnote 1), averaged "
                   "over the inputs that qualify (their shares in the last two columns).")
    out.tables.append(t)
    out.summary.append(f"simulation of 002 §3.2: N = {c.n}, M = {c.m}, seed {c.seed}")
    return out
