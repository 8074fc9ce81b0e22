"""CPU time, wall time and peak RSS per phase of one `auditc` command, run in this process.

Wraps the pipeline's stage functions (compile, read data, plan, store inputs, engine load and its
parts, execute, score, report and figures) and reports, per phase, the calls, the CPU seconds
(process time, inclusive of nested phases), the wall seconds and the peak RSS when it ended.
"start-up" is the time to import auditlang's CLI before the command starts. Used for issue 27's
fixed costs: `auditc plan` at study scale, run start-up, an unchanged rerun, a report.

Usage (from the repository root):

    python benchmarks/bench_phases.py [--json FILE] -- plan specs/s002_language_variations.audit --data-root ../shared/data
    python benchmarks/bench_phases.py -- run examples/quickstart.audit --limit 5 --out runs/q5
    python benchmarks/bench_phases.py -- report runs/q5

Compare two checkouts by running the script of each (``PYTHONPATH=CHECKOUT``) alternately: A/B/A/B.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import resource
import sys
import time
from pathlib import Path

T0_CPU, T0_WALL = time.process_time(), time.perf_counter()

# phase -> "module:qualname" targets (the first that exists per entry is wrapped)
PHASES: list[tuple[str, str]] = [
    ("compile", "auditlang.resolve:compile_spec"),
    ("plan", "auditlang.plan.planner:Planner.build"),
    ("read data", "auditlang.data.loader:load_dataset"),
    ("store inputs", "auditlang.store.inputs:save_inputs"),
    ("execute", "auditlang.execute.runner:execute_plan"),
    ("engine load", "auditlang.execute.runner:_load"),
    ("import torch+transformers", "auditlang.engines.hfstack:import_hf_stack"),
    ("tokenizer", "auditlang.engines.hf:_load_tokenizer"),
    ("model weights", "auditlang.engines.hf:_load_model"),
    ("engine fingerprint", "auditlang.engines.hf:HFEngine.fingerprint"),
    ("import vllm", "auditlang.engines.vllm_engine:import_vllm"),
    ("vllm: import LLM stack", "auditlang.engines.vllm_engine:VLLMEngine._import_llm_stack"),
    ("vllm: config", "auditlang.engines.vllm_engine:VLLMEngine._load_config"),
    ("vllm: tokenizer (thread beside LLM())", "auditlang.engines.vllm_engine:VLLMEngine._load_tokenizer"),
    ("vllm: tokenizer wait after LLM()", "auditlang.engines.vllm_tokload:TokenizerLoad.get"),
    ("weights sha256 (wait for the child)", "auditlang.engines.weight_hash:WeightHash.get"),
    ("vllm: LLM()", "auditlang.engines.vllm_engine:VLLMEngine._make_llm"),
    ("vllm: fingerprint", "auditlang.engines.vllm_engine:VLLMEngine.fingerprint"),
    ("vllm: render+tokenize", "auditlang.engines.vllm_engine:VLLMEngine.encode_all"),
    ("vllm: results", "auditlang.engines.vllm_engine:VLLMEngine._finish"),
    ("stage-2 requests", "auditlang.plan.stage2:stage2_requests"),
    ("stage-2 requests per item", "auditlang.plan.stage2:Stage2Stream.add"),
    ("feed refill", "auditlang.core.engine:Feed.refill"),
    ("journal commit", "auditlang.store.journal:Journal.put_results"),
    ("write records", "auditlang.store.records:write_records"),
    ("score", "auditlang.score.stage:score_and_write"),
    ("score: records", "auditlang.score.stage:score_cells"),
    ("score: records in workers", "auditlang.score.stage:score_parallel"),
    ("score: cell metrics", "auditlang.score.cellmetrics:cell_table"),
    ("load run", "auditlang.api:load_run"),
    ("report", "auditlang.report:build_report"),
    ("report: run data", "auditlang.report.rundata:load_run"),
    ("report: comparisons", "auditlang.report.comparisons:compute_all"),
    ("report: checklist", "auditlang.report.checklist:build_checklist"),
    ("report: disclosure", "auditlang.report.disclosure:disclosure_tables"),
    ("report: LaTeX tables", "auditlang.report.textables:fragment"),
    ("report: samples", "auditlang.report.samples:write_samples"),
    ("report: samples wait", "auditlang.report.samples:SamplesBuild.finish"),
    ("report: html", "auditlang.report.html:render_html"),
    ("report: figures start", "auditlang.report:_Figures.__init__"),
    ("report: figures wait", "auditlang.report:_Figures.result"),
    ("figures", "auditlang.report.figures:all_figures"),
]

STATS: dict[str, dict[str, float]] = {}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _wrap(name: str, fn):
    @functools.wraps(fn)
    def timed(*a, **k):
        c, w = time.process_time(), time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            s = STATS.setdefault(name, {"calls": 0, "cpu_s": 0.0, "wall_s": 0.0, "peak_mb": 0.0})
            s["calls"] += 1
            s["cpu_s"] += time.process_time() - c
            s["wall_s"] += time.perf_counter() - w
            s["peak_mb"] = _peak_mb()
    timed.__bench_phase__ = True
    return timed


def install() -> None:
    """Wrap every target; module-level names bound by ``from X import f`` elsewhere are rebound."""
    originals = {}
    for name, target in PHASES:
        mod_name, qual = target.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        owner, attr = mod, qual
        if "." in qual:
            cls, attr = qual.split(".", 1)
            owner = getattr(mod, cls, None)
        fn = getattr(owner, attr, None) if owner is not None else None
        if fn is None or getattr(fn, "__bench_phase__", False):
            continue
        w = _wrap(name, fn)
        setattr(owner, attr, w)
        if owner is mod:
            originals[id(fn)] = (fn, w)
    for m in list(sys.modules.values()):  # `from mod import fn` copies made before the wrap
        if not getattr(m, "__name__", "").startswith("auditlang"):
            continue
        for k, v in list(vars(m).items()):
            hit = originals.get(id(v))
            if hit is not None and hit[0] is v:
                setattr(m, k, hit[1])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, cmd = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else ([], argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = ap.parse_args(ours)
    from auditlang import cli  # the CLI as `auditc` imports it

    for sub in ("plan", "run", "report"):
        importlib.import_module(f"auditlang.cli.{sub}")
    importlib.import_module("auditlang.api")
    startup = (time.process_time() - T0_CPU, time.perf_counter() - T0_WALL, _peak_mb())
    install()
    c, w = time.process_time(), time.perf_counter()
    try:
        rc = cli.main(cmd)
    except SystemExit as e:
        rc = e.code
    total = (time.process_time() - c, time.perf_counter() - w, _peak_mb())
    rows = [("start-up (imports)", 1, *startup)]
    rows += [(n, int(s["calls"]), s["cpu_s"], s["wall_s"], s["peak_mb"]) for n, s in STATS.items()]
    rows.append(("command total", 1, *total))
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    print(f"\nauditc {' '.join(cmd)}  (exit {rc}; load average {load})", file=sys.stderr)
    print(f"{'phase':<28} {'calls':>5} {'CPU s':>8} {'wall s':>8} {'peak RSS MB':>12}", file=sys.stderr)
    for n, k, cpu, wall, rss in rows:
        print(f"{n:<28} {k:>5} {cpu:>8.2f} {wall:>8.2f} {rss:>12,.0f}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"command": cmd, "exit": rc, "load": load, "phases": [
            {"phase": n, "calls": k, "cpu_s": cpu, "wall_s": wall, "peak_mb": rss} for n, k, cpu, wall, rss in rows]},
            indent=1), encoding="utf-8")
    return 0 if rc in (0, None) else int(rc)


if __name__ == "__main__":
    raise SystemExit(main())
