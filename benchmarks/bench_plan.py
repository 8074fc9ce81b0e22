"""Planning speed and request deduplication: in-process `auditc plan` on every study spec and twin.

For each spec (default: specs/*.audit and examples/s*_twin.audit) it times ``compile_spec`` and
``build_plan(spec, data_root=...)`` (the work `auditc plan` does before printing), and reports
cells, the naive request count (every cell issuing its own requests), the deduplicated count
(unique stage-1 requests + stage-2 requests counted per item and protocol) and whether the plan
is an estimate (a dataset not available locally). Issue 4's benchmark 1 reads "requests
executed vs naive requests" from these columns.

For specs whose models are all embedded it also estimates the CPU run time of `auditc run` from
the plan, with the rates the project uses for its 2-core CI machine: about 15 prompts/s for
prompt processing (every request) plus about 250 tokens/s for generation (each generate request
at its full token budget, so this is an upper bound).

Each spec is measured in two fresh processes, so peak memory is the spec's own: the in-process
figures (``compile_spec`` + ``build_plan(..., lean=True)``, the plan `auditc plan` builds, with its
peak RSS) and the whole command (``python -m auditlang.cli plan SPEC --data-root DIR``: wall, CPU
of the process, peak RSS). ``--full`` plans in full instead (the Request objects and per-item
units `auditc run` holds). ``--baseline DIR`` measures the same specs with the auditlang package of
another checkout (e.g. ``git archive COMMIT | tar -x -C DIR``), alternating with this one, and adds a
table of ratios (this / baseline) measured in the same session.

Usage:

    python benchmarks/bench_plan.py [--data-root ../shared/data] [--no-data] [--full] [--baseline DIR]
        [SPEC ...] [--write-readme]

``--write-readme`` replaces (or appends) the ``## Plan`` section of benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = Path(os.environ.get("BENCH_PLAN_CODE", ROOT))  # the checkout whose auditlang is measured (--baseline)
sys.path.insert(0, str(CODE))

from auditlang.core.diagnostics import CompileError  # noqa: E402
from auditlang.plan.model import Plan  # noqa: E402
from auditlang.plan.planner import build_plan  # noqa: E402
from auditlang.resolve import compile_spec  # noqa: E402
from auditlang.resolve.spec import Spec  # noqa: E402

README = ROOT / "benchmarks" / "README.md"
SECTION = "## Plan"
DATA = (ROOT.parent / "shared" / "data").resolve()
PROMPTS_PER_S = 15.0  # CPU prompt processing of the embedded models (2 cores)
TOKENS_PER_S = 250.0  # CPU generation of the embedded models (2 cores)
DEFAULT_VERBAL_TOKENS = 8


@dataclass
class PlanFigures:
    spec: str
    compile_s: float
    plan_s: float
    plan_cpu_s: float  # process CPU time of build_plan (the figure to compare on a shared machine)
    cells: int
    naive: int
    unique: int
    stage1: int
    deferred: int
    estimated: bool
    generated_tokens: int
    cpu_run_s: float | None  # None when some model is not embedded
    note: str = ""
    plan_rss_mb: float = 0.0  # peak RSS of the process that compiled and planned (in-process figures)
    cmd_wall_s: float = 0.0  # the whole `auditc plan SPEC` command (its own process)
    cmd_cpu_s: float = 0.0
    cmd_rss_mb: float = 0.0

    @property
    def shared_pct(self) -> float:
        return 100.0 * (self.naive - self.unique) / self.naive if self.naive else 0.0


def generated_tokens(spec: Spec, plan: Plan) -> int:
    """Upper bound on generated tokens: stage-1 budgets plus stage-2 generate budgets."""
    total = int(plan.token_estimate.get("generated_tokens_max", 0))
    for d in plan.deferred:
        if d["kind"] == "generate":
            src = spec.objects.get(d["source"])
            budget = getattr(src.value, "max_tokens", None) if src is not None else None
            total += d["count"] * int(budget or DEFAULT_VERBAL_TOKENS)
        elif d["kind"] == "constrained_choice":
            total += d["count"]
    return total


def cpu_run_seconds(spec: Spec, plan: Plan) -> float | None:
    """Estimated `auditc run` time on the 2-core CPU machine, or None if a model is not embedded."""
    if any(o.ctor != "embedded" for o in spec.of_kind("model").values()):
        return None
    return plan.unique_request_count / PROMPTS_PER_S + generated_tokens(spec, plan) / TOKENS_PER_S


def _build(spec: Spec, data_root: Path, load_data: bool, full: bool) -> Plan:
    if full:
        return build_plan(spec, data_root=str(data_root), load_data=load_data)
    try:
        return build_plan(spec, data_root=str(data_root), load_data=load_data, lean=True)
    except TypeError:  # a checkout from before lean plans (--baseline): its only plan
        return build_plan(spec, data_root=str(data_root), load_data=load_data)


def _stage1(plan: Plan) -> int:
    return plan.stage1_exact_count if hasattr(plan, "stage1_exact_count") else len(plan.requests)


def measure(path: Path, data_root: Path, load_data: bool = True, full: bool = False) -> PlanFigures:
    """Compile and plan one spec, timing both steps (wall clock).

    A plan with data that fails at plan time (e.g. a hub dataset that cannot be loaded offline)
    is re-planned from declared sizes, and the row says so.
    """
    t0 = time.perf_counter()
    spec = compile_spec(path)
    t1 = time.perf_counter()
    compile_s = t1 - t0
    c1 = time.process_time()
    note = ""
    try:
        plan = _build(spec, data_root, load_data, full)
    except CompileError as e:
        if not load_data:
            raise
        first = e.bag.errors[0]
        note = f"plan with data failed ({first.code}: {first.message}); figures from declared sizes"
        t1 = time.perf_counter()
        c1 = time.process_time()
        plan = _build(spec, data_root, False, full)
    t2 = time.perf_counter()
    c2 = time.process_time()
    return PlanFigures(
        spec=str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path),
        compile_s=compile_s, plan_s=t2 - t1, plan_cpu_s=c2 - c1, cells=len(plan.cells), naive=plan.naive_request_count,
        unique=plan.unique_request_count, stage1=_stage1(plan), deferred=plan.deferred_count,
        estimated=plan.estimated, generated_tokens=generated_tokens(spec, plan), cpu_run_s=cpu_run_seconds(spec, plan),
        note=note, plan_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )


def _run(cmd: list[str], code: Path, out=subprocess.DEVNULL) -> tuple[float, float, float, int, bytes]:
    """(wall s, CPU s, peak RSS MB, exit status, stdout) of one child process."""
    env = dict(os.environ, PYTHONPATH=str(code), BENCH_PLAN_CODE=str(code))
    t0 = time.perf_counter()
    # run from the measured checkout: `python -m` puts the working folder first on sys.path
    proc = subprocess.Popen(cmd, env=env, stdout=out, cwd=code)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    data = proc.stdout.read() if proc.stdout else b""
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), data


def measure_fresh(path: Path, data_root: Path, load_data: bool, full: bool, code: Path) -> PlanFigures:
    """:func:`measure` in a fresh process (its own peak RSS), then the whole `auditc plan` command."""
    path, data_root = path.resolve(), data_root.resolve()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(path), "--data-root", str(data_root)]
    cmd += (["--no-data"] if not load_data else []) + (["--full"] if full else [])
    *_, rc, data = _run(cmd, code, out=subprocess.PIPE)
    if rc != 0:
        raise SystemExit(f"planning {path} failed (exit {rc})")
    r = PlanFigures(**json.loads(data.decode().strip().splitlines()[-1]))
    cli = [sys.executable, "-m", "auditlang.cli", "plan", str(path), "--data-root", str(data_root)]
    r.cmd_wall_s, r.cmd_cpu_s, r.cmd_rss_mb, rc, _ = _run(cli + ([] if load_data else ["--no-data"]), code)
    if rc != 0:
        r.note = (r.note + "; " if r.note else "") + f"`auditc plan` exited {rc}"
    return r


def default_specs() -> list[Path]:
    return sorted((ROOT / "specs").glob("*.audit")) + sorted((ROOT / "examples").glob("s*_twin.audit"))


def table(rows: list[PlanFigures]) -> str:
    head = ("| spec | compile s | plan wall s | plan CPU s | plan peak RSS MB | `auditc plan` wall s | CPU s | peak RSS MB "
            "| cells | naive requests | deduplicated | shared | estimated "
            "| generated tokens ≤ | CPU run estimate |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    body = []
    for r in rows:
        run = f"{r.cpu_run_s / 60:.1f} min" if r.cpu_run_s is not None else "—"
        # A plan without any rendered prompt has no stage-1 requests to deduplicate: the
        # deduplicated count would be meaningless there.
        dedup, shared = (f"{r.unique:,}", f"{r.shared_pct:.1f} %") if r.stage1 else ("n/a", "n/a")
        body.append(f"| `{r.spec}` | {r.compile_s:.2f} | {r.plan_s:.1f} | {r.plan_cpu_s:.1f} | {r.plan_rss_mb:,.0f} "
                    f"| {r.cmd_wall_s:.1f} | {r.cmd_cpu_s:.1f} | {r.cmd_rss_mb:,.0f} | {r.cells:,} | {r.naive:,} | {dedup} "
                    f"| {shared} | {'yes' if r.estimated else 'no'} | {r.generated_tokens:,} | {run} |")
    notes = [f"* `{r.spec}`: {r.note}" for r in rows if r.note]
    return head + "\n".join(body) + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "")


def ratio_table(rows: list[PlanFigures], base: list[PlanFigures], label: str) -> str:
    """This checkout against the baseline, per spec (figures of one session, same machine)."""
    head = (f"| spec | plan CPU s ({label} → now) | ratio | plan peak RSS MB | ratio | `auditc plan` wall s | ratio "
            "| `auditc plan` CPU s | ratio | `auditc plan` peak RSS MB | ratio | same counts |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    body = []
    for r, b in zip(rows, base):
        def pair(x: float, y: float, fmt: str) -> str:
            return f"{format(x, fmt)} → {format(y, fmt)} | {y / x:.2f}×" if x else f"{format(x, fmt)} → {format(y, fmt)} | —"
        same = (r.cells, r.naive, r.unique, r.stage1, r.deferred) == (b.cells, b.naive, b.unique, b.stage1, b.deferred)
        body.append(f"| `{r.spec}` | {pair(b.plan_cpu_s, r.plan_cpu_s, '.1f')} | {pair(b.plan_rss_mb, r.plan_rss_mb, ',.0f')} "
                    f"| {pair(b.cmd_wall_s, r.cmd_wall_s, '.1f')} | {pair(b.cmd_cpu_s, r.cmd_cpu_s, '.1f')} "
                    f"| {pair(b.cmd_rss_mb, r.cmd_rss_mb, ',.0f')} | {'yes' if same else 'NO'} |")
    return head + "\n".join(body) + "\n"


def load_average() -> str:
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


NOTES = "\n### Notes"


def write_section(text: str) -> None:
    """Replace the ``## Plan`` section (or append it); a hand-written ``### Notes`` part is kept."""
    old = README.read_text(encoding="utf-8") if README.exists() else "# Benchmarks\n"
    start = old.find(SECTION + "\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        nxt = old.find("\n## ", start + len(SECTION))
        end = len(old) if nxt < 0 else nxt
        notes_at = old.find(NOTES, start, end)
        notes = old[notes_at:end].strip("\n") if notes_at >= 0 else ""
        new = old[:start] + text.rstrip("\n") + ("\n\n" + notes if notes else "") + "\n" + ("" if nxt < 0 else old[nxt:])
    README.write_text(new.rstrip("\n") + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", type=Path, help="spec files (default: specs/*.audit, examples/s*_twin.audit)")
    ap.add_argument("--data-root", type=Path, default=DATA)
    ap.add_argument("--no-data", action="store_true", help="plan from declared sample sizes only")
    ap.add_argument("--full", action="store_true", help="plan in full (what `auditc run` holds), not lean")
    ap.add_argument("--baseline", type=Path, help="another checkout's root: measure its auditlang too (ratios)")
    ap.add_argument("--write-readme", action="store_true")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # internal: one spec, JSON on stdout
    args = ap.parse_args(argv)
    if args.child:
        os.environ.setdefault("AUDITLANG_DATA_ROOT", str(args.data_root))
        import auditlang

        got = measure(args.child, args.data_root, load_data=not args.no_data, full=args.full)
        if not Path(auditlang.__file__).resolve().is_relative_to(CODE.resolve()):
            raise SystemExit(f"measured {auditlang.__file__}, not the checkout {CODE}")
        print(json.dumps(asdict(got)))
        return 0
    if not args.no_data and not args.data_root.is_dir():
        ap.error(f"data root {args.data_root} not found; pass --data-root DIR or --no-data")
    # Study 001's off-type / plausible-wrong answers load their dataset pool through the
    # AUDITLANG_DATA_ROOT variable (the planner does not hand the loaded items over yet).
    os.environ.setdefault("AUDITLANG_DATA_ROOT", str(args.data_root))
    rows, base = [], []
    loads = []
    for path in args.specs or default_specs():
        load_before = load_average()
        loads.append(os.getloadavg()[0])
        if args.baseline:
            b = measure_fresh(path, args.data_root, not args.no_data, args.full, args.baseline.resolve())
            base.append(b)
            print(f"  baseline {b.spec}: plan CPU {b.plan_cpu_s:.1f} s, peak {b.plan_rss_mb:,.0f} MB; auditc plan "
                  f"{b.cmd_wall_s:.1f} s wall, {b.cmd_cpu_s:.1f} s CPU, peak {b.cmd_rss_mb:,.0f} MB", flush=True)
        r = measure_fresh(path, args.data_root, not args.no_data, args.full, CODE)
        rows.append(r)
        print(f"{r.spec}: compile {r.compile_s:.2f} s, plan {r.plan_s:.1f} s (CPU {r.plan_cpu_s:.1f} s, peak {r.plan_rss_mb:,.0f} MB); "
              f"auditc plan {r.cmd_wall_s:.1f} s wall, {r.cmd_cpu_s:.1f} s CPU, peak {r.cmd_rss_mb:,.0f} MB; {r.cells:,} cells, "
              f"naive {r.naive:,} -> deduplicated {r.unique:,} ({r.shared_pct:.1f} % shared){' (estimated)' if r.estimated else ''}; "
              f"{r.note + '; ' if r.note else ''}"
              f"load average before: {load_before}", flush=True)
        loads.append(os.getloadavg()[0])
    text = table(rows)
    if base:
        text += (f"\nAgainst the baseline `{args.baseline}` (same session, alternating per spec; 1-minute load average "
                 f"{min(loads):.1f}–{max(loads):.1f}):\n\n" + ratio_table(rows, base, "baseline"))
    print(text)
    if args.write_readme:
        import numpy  # noqa: F401  (only for the version line)

        intro = (f"{SECTION}\n\n`benchmarks/bench_plan.py` times the in-process work of `auditc plan` "
                 f"(`compile_spec` + `build_plan`{'' if args.full else '(lean=True)'}) and the whole command "
                 "(`python -m auditlang.cli plan SPEC`, its own process: wall, CPU, peak RSS) on every study spec and twin, "
                 f"{'without data (declared sizes)' if args.no_data else 'with data from ../shared/data'}, and "
                 "reports naive vs deduplicated request counts (issue 4, benchmark 1). Naive = every cell "
                 "issues its own requests; deduplicated = unique stage-1 requests + stage-2 requests (built "
                 "from stage-1 outputs, counted per item and protocol). The CPU run estimate (embedded models "
                 f"only) is requests / {PROMPTS_PER_S:g} per s + generated tokens / {TOKENS_PER_S:g} per s at full "
                 "budgets, an upper bound. A plan that reads no data (`estimated` with no rendered prompt) "
                 "counts cells and naive requests from declared sizes but has nothing to deduplicate (n/a). "
                 "`auditc plan` builds a lean plan: every request is rendered and hashed, but only its id is kept "
                 "(for deduplication) with counts per model and kind; `auditc run` builds the full plan.\n\n"
                 f"Measured {time.strftime('%Y-%m-%d')} on the project's 2-core CPU machine ({platform.machine()}, "
                 f"Python {platform.python_version()}); load average {load_average()} at the end of the run "
                 "(planning is single-threaded: a load above 1 means other jobs shared the machine and "
                 "inflated the wall times).\n\n")
        write_section(intro + text)
        print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
