"""Benchmark: percentile bootstrap of a 125-cell x 10-metric audit (500 examples per cell).

Times ``auditlang.metrics.bootstrap_many`` (B=1000, seed=42) on the whole job and
``scipy.stats.bootstrap(method="percentile", paired=True, vectorized=False)`` on the same metrics
and resamples count for the first ``--scipy-cells`` cells (scaled linearly to 125 cells; pass
``--scipy-cells 125`` to time scipy on everything). Also reports how far the two sets of
interval ends lie apart on the cells both ran (Monte-Carlo difference, different random draws).

    python benchmarks/bench_bootstrap.py [--cells 125] [--n 500] [--B 1000] [--scipy-cells 4]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np
import scipy
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from auditlang.metrics import bootstrap_many  # noqa: E402
from auditlang.metrics.registry import METRICS  # noqa: E402

METRIC_SET = {
    "accuracy": "accuracy",
    "ece": "ece",
    "ece_equal_mass": ("ece", {"binning": "equal_mass"}),
    "mce": "mce",
    "brier": "brier",
    "nll": "nll",
    "ks_ce": "ks_ce",
    "auroc": "auroc",
    "aurc": "aurc",
    "selective_accuracy@0.8": ("selective_accuracy", {"coverage": 0.8}),
}


def synthetic_audit(cells: int, n: int, seed: int = 2024) -> dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]]:
    """``cells`` cells keyed like (model, dataset, variant); a third of them with verbal-style ties."""
    rng = np.random.default_rng(seed)
    out = {}
    for k in range(cells):
        key = (k // 25, (k // 5) % 5, k % 5)
        conf = rng.beta(rng.uniform(1.5, 5.0), rng.uniform(0.8, 2.0), n)
        if k % 3 == 0:
            conf = np.round(conf, 1)  # verbal confidences cluster on the 0.1 grid
        correct = (rng.uniform(size=n) < conf ** rng.uniform(1.0, 2.5)).astype(float)
        out[key] = (conf, correct)
    return out


def scipy_job(cells: dict, B: int, seed: int) -> dict:
    out = {}
    for key, (conf, correct) in cells.items():
        for label, choice in METRIC_SET.items():
            name, kw = (choice, {}) if isinstance(choice, str) else choice
            fn = METRICS[name].fn
            if METRICS[name].inputs == "correct":
                data, stat = (correct,), (lambda y, fn=fn: fn(y))
            else:
                data, stat = (conf, correct), (lambda c, y, fn=fn, kw=kw: fn(c, y, **kw))
            res = stats.bootstrap(data, stat, n_resamples=B, paired=True, vectorized=False,
                                  method="percentile", random_state=seed)
            out[(key, label)] = (res.confidence_interval.low, res.confidence_interval.high)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=125)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--B", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--scipy-cells", type=int, default=4)
    args = ap.parse_args()

    audit = synthetic_audit(args.cells, args.n)
    w0, c0 = time.perf_counter(), time.process_time()
    ours = bootstrap_many(audit, METRIC_SET, B=args.B, seed=args.seed)
    t_ours, cpu_ours = time.perf_counter() - w0, time.process_time() - c0

    sub = dict(list(audit.items())[: args.scipy_cells])
    w0, c0 = time.perf_counter(), time.process_time()
    ref = scipy_job(sub, args.B, args.seed)
    scale = args.cells / max(len(sub), 1)
    t_scipy, cpu_scipy = (time.perf_counter() - w0) * scale, (time.process_time() - c0) * scale

    jobs = args.cells * len(METRIC_SET)
    extrap = " (extrapolated)" if len(sub) < args.cells else ""
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}")
    print(f"job: {args.cells} cells x {len(METRIC_SET)} metrics = {jobs} intervals, n={args.n}, B={args.B}, "
          f"percentile 95%; scipy timed on {len(sub)} cells")
    print("| implementation | wall s | CPU s |")
    print("|---|---|---|")
    print(f"| auditlang bootstrap_many | {t_ours:.2f} | {cpu_ours:.2f} |")
    print(f"| scipy.stats.bootstrap{extrap} | {t_scipy:.1f} | {cpu_scipy:.1f} |")
    print(f"speed-up: {t_scipy / t_ours:.0f}x wall, {cpu_scipy / cpu_ours:.0f}x CPU")
    print("max |interval end difference| vs scipy per metric (Monte-Carlo; different draws):")
    for label in METRIC_SET:
        gaps = [max(abs(ours[k].low - lo), abs(ours[k].high - hi)) for k, (lo, hi) in ref.items() if k[1] == label]
        print(f"  {label}: {max(gaps):.4f}")

if __name__ == "__main__":
    main()
