"""Wall time of `build_report` (what `auditc run` ends with and `auditc report` runs) on one run
directory, three ways in the same process, alternating, ``--repeats`` times each:

- serial: every figure drawn and rendered in this process (``$AUDITLANG_FIGURE_WORKERS=1``, what
  a host with fewer than 4 usable cores does);
- forked: the figures rendered in ``--workers`` forked workers, the build waiting for them before
  it goes on (how the report used its workers before the overlap);
- overlapped: the same workers, rendering while the build computes the comparisons, the tables,
  the checklist and the disclosure (the current code on a host with cores to spare).

The figure cache (``report/.figures-cache``) is removed before every build, so every build draws
and renders its figures. Prints each build's wall and main-process CPU seconds, the medians and the
ratios of the medians. Every build writes the same files (tests/report/test_figures_overlap.py).

Usage (from the repository root):

    python benchmarks/bench_report.py RUN_DIR [--repeats 3] [--workers 2]
    python benchmarks/bench_report.py --synthetic /tmp/synth   # tests/report's synthetic run, built there
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(args: argparse.Namespace):
    if args.synthetic:
        sys.path.insert(0, str(ROOT / "tests" / "report"))
        from report_fixtures import build_run  # the report tests' synthetic run directory

        tmp = Path(args.synthetic)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return build_run(tmp)
    from auditlang.api import load_run

    run = load_run(Path(args.run_dir))
    return run.spec, run.plan, Path(args.run_dir)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", nargs="?", help="a run directory (auditc run --no-report is enough)")
    ap.add_argument("--synthetic", metavar="DIR", help="build tests/report's synthetic run in DIR and use it")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="figure workers of the forked and overlapped builds")
    args = ap.parse_args()
    if not args.run_dir and not args.synthetic:
        ap.error("give a run directory or --synthetic DIR")

    from auditlang.core.hashing import sha256_file
    from auditlang.report import build_report, figures
    from auditlang.store.rundir import FIGURE_CACHE_DIR

    spec, plan, run_dir = _load(args)
    real_start = figures.start_figures

    def start_and_wait(rd, comps):  # the build waits for the workers before it goes on
        rendering = real_start(rd, comps)
        rendering.result()
        return rendering

    modes = {"serial": (1, real_start), "forked": (args.workers, start_and_wait),
             "overlapped": (args.workers, real_start)}
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    files: dict[str, dict[str, str]] = {}
    print(f"run directory {run_dir}: {len(plan.cells)} cells; {os.cpu_count()} CPUs; "
          f"workers {args.workers}; {args.repeats} builds per mode, alternating")
    for k in range(args.repeats):
        for mode, (workers, start) in modes.items():
            os.environ[figures.FIGURE_WORKERS_ENV] = str(workers)
            figures.start_figures = start
            shutil.rmtree(run_dir / "report" / FIGURE_CACHE_DIR, ignore_errors=True)
            w0, c0 = time.perf_counter(), time.process_time()
            out = build_report(spec, plan, run_dir)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            times[mode].append((wall, cpu))
            print(f"  {k + 1} {mode:<10} wall {wall:6.2f} s   main-process CPU {cpu:6.2f} s", flush=True)
            files[mode] = {p.relative_to(out).as_posix(): sha256_file(p) for p in sorted(out.rglob("*"))
                           if p.is_file() and FIGURE_CACHE_DIR not in p.parts}
    figures.start_figures = real_start
    n_figs = sum(name.startswith("figures/") and name.endswith(".png") for name in files["serial"])
    same = all(f == files["serial"] for f in files.values())
    print(f"{n_figs} figures; every mode wrote the same files: {same}")
    med = {m: statistics.median(w for w, _ in t) for m, t in times.items()}
    for m, t in times.items():
        print(f"median {m:<10} wall {med[m]:6.2f} s   main-process CPU {statistics.median(c for _, c in t):6.2f} s")
    print(f"ratio overlapped / serial  {med['overlapped'] / med['serial']:.2f}")
    print(f"ratio overlapped / forked  {med['overlapped'] / med['forked']:.2f}")
    print(f"ratio forked / serial      {med['forked'] / med['serial']:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
