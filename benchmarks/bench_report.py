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

With ``--against OLD_CHECKOUT`` it times the whole command instead (issue 36): ``auditc report RUN_DIR``
in fresh processes (``bench_phases.py``: wall and CPU per phase: the run read back, the run data, the
comparisons, checklist, disclosure, LaTeX tables, sample browser, HTML and figures), alternating
between OLD_CHECKOUT's auditlang and this one's, each on its own copy of RUN_DIR (figure cache
removed, so both draw every figure; ``PYTHONHASHSEED=0``), and compares the two report folders
file by file (sha256). ``--s000 DIR`` first builds the run directory of the session-15 GPU runs
on the CPU: the s000 design at 200 items per dataset, 16,000 requests, vLLM-shaped synthetic
results (``bench_fixed_costs.py --limit 200 --keep DIR``).

Usage (from the repository root):

    python benchmarks/bench_report.py RUN_DIR [--repeats 3] [--workers 2]
    python benchmarks/bench_report.py --synthetic /tmp/synth   # tests/report's synthetic run, built there
    git worktree add /tmp/old main   # the code to compare against
    python benchmarks/bench_report.py --s000 /tmp/s000run --against /tmp/old [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
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
    ap.add_argument("--against", metavar="OLD_CHECKOUT", type=Path,
                    help="time `auditc report` end to end and per phase, OLD_CHECKOUT's code against this one's")
    ap.add_argument("--s000", metavar="DIR", type=Path,
                    help="with --against: build the s000 run directory (200 items per dataset) in DIR and use it")
    args = ap.parse_args()
    if args.against is not None:
        if args.s000 is not None:
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_fixed_costs.py"), "--limit", "200",
                            "--keep", str(args.s000)], check=True, stdout=subprocess.DEVNULL)
        run_dir = args.s000 or (Path(args.run_dir) if args.run_dir else None)
        if run_dir is None:
            ap.error("--against needs a run directory or --s000 DIR")
        return against(run_dir, args.against.resolve(), args.repeats)
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


def _num(x: float | None, width: int) -> str:
    return f"{x:{width}.2f}" if x is not None else "-".rjust(width)


def _report_files(report: Path) -> dict[str, str]:
    return {p.relative_to(report).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(report.rglob("*"))
            if p.is_file() and ".figures-cache" not in p.parts}


def _one_report(tree: Path, src: Path, work: Path) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """``auditc report`` of a fresh copy of ``src`` with ``tree``'s auditlang: phase -> (wall, CPU), files."""
    run = work / "run"  # the same folder name for both trees: the report names it
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(src, run)
    shutil.rmtree(run / "report" / ".figures-cache", ignore_errors=True)
    out = work / "phases.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_phases.py"), "--json", str(out), "--",
                    "report", str(run)], check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    phases = {p["phase"]: (p["wall_s"], p["cpu_s"]) for p in json.loads(out.read_text(encoding="utf-8"))["phases"]}
    return phases, _report_files(run / "report")


def against(run_dir: Path, old: Path, repeats: int) -> int:
    """Issue 36: `auditc report` end to end and per phase, ``old``'s code against this checkout's."""
    trees = {"old": old, "new": ROOT}
    times: dict[str, list[dict[str, tuple[float, float]]]] = {k: [] for k in trees}
    files: dict[str, dict[str, str]] = {}
    print(f"auditc report {run_dir}: old {old}, new {ROOT}; {os.cpu_count()} CPUs; {repeats} runs each, alternating")
    with tempfile.TemporaryDirectory(prefix="bench_report_") as td:
        for k in range(repeats):
            for name, tree in trees.items():
                work = Path(td) / name
                work.mkdir(exist_ok=True)
                phases, files[name] = _one_report(tree, run_dir, work)
                times[name].append(phases)
                total = phases["command total"]
                print(f"  {k + 1} {name}  wall {total[0]:6.2f} s   CPU {total[1]:6.2f} s", flush=True)
    names = [n for n in times["new"][0] if n not in ("compile", "read data", "plan")]
    names += [n for n in times["old"][0] if n not in names and n not in ("compile", "read data", "plan")]
    print(f"{'phase (medians)':<28} {'old wall':>9} {'new wall':>9} {'old CPU':>8} {'new CPU':>8} {'new/old CPU':>12}")
    for n in names:
        med = {t: [statistics.median(r[n][i] for r in times[t]) if all(n in r for r in times[t]) else None
                   for i in (0, 1)] for t in trees}
        ratio = med["new"][1] / med["old"][1] if med["old"][1] and med["new"][1] is not None else None
        print(f"{n:<28} {_num(med['old'][0], 9)} {_num(med['new'][0], 9)} {_num(med['old'][1], 8)} "
              f"{_num(med['new'][1], 8)} {_num(ratio, 12)}")
    differ = sorted(f for f in files["old"].keys() | files["new"].keys() if files["old"].get(f) != files["new"].get(f))
    print(f"{len(files['new'])} report files; byte-identical: {not differ}" + (f"; differ: {', '.join(differ)}" if differ else ""))
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
