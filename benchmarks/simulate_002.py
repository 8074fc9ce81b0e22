"""Re-run the illustrative simulation of Study 002 section 3.2 (Table 1) with auditlang.metrics.

Setup (002 section 3.2): N inputs, M generations each; difficulty d_i ~ U[0, 1];
corr_i^(m) ~ Bernoulli(1 - d_i). Estimators:
    oracle    f = corr_i^(m)
    constant  f = 1 - d_i
    prior     f = 0.5
    random    f ~ Bernoulli(1 - d_i), drawn independently of corr
ECE (10 equal-width bins), Brier and AUROC are computed over all N*M generations; A-STB and A-SST
(002 eqs. 4-5) per input, with footnote 1's assumption that generations with the same correctness
share one meaning (two semantic groups: correct / incorrect).

Usage:  python benchmarks/simulate_002.py [--n 100000] [--m 10] [--seed 0]

Comparison with the paper (this script: N = 100,000, M = 10, seed 0; paper value in brackets):

    estimator   ECE           Brier         AUROC         STB           SST
    oracle      0.000 [0.00]  0.000 [0.00]  1.000 [1.00]  1.000 [1.00]  1.000 [1.00]
    constant    0.001 [0.01]  0.167 [0.17]  0.833 [0.83]  1.000 [1.00]  0.000 [0.00]
    random      0.334 [0.33]  0.334 [0.33]  0.666 [0.67]  0.672 [0.72]  0.120 [0.18]
    prior       0.000 [0.00]  0.250 [0.25]  0.500 [0.50]  1.000 [1.00]  0.000 [0.00]

ECE, Brier and AUROC agree with Table 1 for every estimator (the constant estimator's ECE is
10-bin binning noise near zero: 0.001 here, 0.01 printed). STB and SST agree for oracle,
constant and prior but NOT for the random estimator (0.672 vs 0.72, 0.120 vs 0.18). The
definitions used are eqs. 4-7 exactly as printed, which reproduce the paper's own worked cases in
Table 10 (see tests/metrics_studies/test_robustness.py). Variants tried without matching 0.72 /
0.18: ddof = 1, std over all M answers, std over both groups, Delta without self-pairs, the
correct group as Y^max, a uniform random estimator. Smaller M moves the random row towards the
paper (M = 5: 0.733 / 0.173; M = 6: 0.717 / 0.157, N = 20,000), but no M matches both numbers.
The gap is unexplained by the printed formulas; the paper's simulation code is not available.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from auditlang.metrics.calibration import brier, ece  # noqa: E402
from auditlang.metrics.discrimination import auroc  # noqa: E402
from auditlang.metrics.robustness import answer_sensitivity, answer_stability  # noqa: E402

PAPER = {  # 002 Table 1
    "oracle": (0.00, 0.00, 1.00, 1.00, 1.00),
    "constant": (0.01, 0.17, 0.83, 1.00, 0.00),
    "random": (0.33, 0.33, 0.67, 0.72, 0.18),
    "prior": (0.00, 0.25, 0.50, 1.00, 0.00),
}


def simulate(n: int, m: int, seed: int) -> dict[str, tuple[float, ...]]:
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.0, 1.0, size=n)
    corr = (rng.uniform(size=(n, m)) < (1.0 - d)[:, None]).astype(float)
    estimators = {
        "oracle": corr,
        "constant": np.repeat((1.0 - d)[:, None], m, axis=1),
        "random": (rng.uniform(size=(n, m)) < (1.0 - d)[:, None]).astype(float),
        "prior": np.full((n, m), 0.5),
    }
    groups = corr.astype(int).tolist()  # footnote 1: same correctness = same meaning
    out = {}
    for name, conf in estimators.items():
        c, z = conf.ravel(), corr.ravel()
        rows = conf.tolist()
        out[name] = (
            ece(c, z, bins=10),
            brier(c, z),
            auroc(c, z),
            answer_stability(rows, groups).value,
            answer_sensitivity(rows, groups).value,
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--m", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = simulate(args.n, args.m, args.seed)
    print(f"002 section 3.2 simulation: N={args.n} M={args.m} seed={args.seed}  (paper value in brackets)")
    print(f"{'estimator':<10}" + "".join(f"{h:>15}" for h in ("ECE", "Brier", "AUROC", "STB", "SST")))
    for name, vals in res.items():
        cells = "".join(f"{v:>8.3f} [{p:.2f}]" for v, p in zip(vals, PAPER[name], strict=False))
        print(f"{name:<10}{cells}")
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
