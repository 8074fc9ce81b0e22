"""`auditc run` as a whole vs a plain script sending the same unique requests to the same engine.

Issue 4, benchmark 2: "`auditc run` wall time vs a plain script sending the same unique requests
to the same engine in one batch (both hf and vllm on CPU). Target: overhead <= 10 %."

* **auditc run:** ``python -m auditlang.cli run SPEC --out DIR --no-progress [--engine E]`` in a
  fresh run folder: compile, plan, engine load, both stages through the executor and journal,
  scoring, bootstrap metrics, the report the spec asks for.
* **plain script:** ``python benchmarks/bench_run_overhead.py --plain REQUESTS CONFIG OUT`` (this
  file): imports the engine registry, loads the same engine with the same ModelConfig, sends
  every unique request that the ``auditc run`` executed in ONE ``engine.run`` call, and writes
  the results as JSON lines. The request list comes from the journal of an untimed warm-up
  ``auditc run``; it includes the stage-2 follow-ups, which a plain script could not know before
  stage 1 ran, so the plain side is an idealised lower bound.
* **plain script, per stage:** the same, in two ``engine.run`` calls (stage 1, then stage 2):
  what a plain script of a two-stage audit has to do.

Both sides are subprocesses with the same environment (offline hub, the same thread settings),
timed as wall and CPU time of the process tree, alternating which runs first. The engine load is
inside both timings. Usage (the vLLM side runs in the vLLM venv, with the repository on
PYTHONPATH)::

    /work/venv/bin/python benchmarks/bench_run_overhead.py --engine hf --repeats 3
    PYTHONPATH=. /work/venv-vllm/bin/python benchmarks/bench_run_overhead.py --engine vllm --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "benchmarks" / "overhead_task" / "small.audit"


def fail(msg: str) -> None:
    print(f"bench_run_overhead: error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def plain(requests_path: Path, config_path: Path, out_path: Path) -> int:
    """The plain script: load the engine, one ``engine.run`` call on every request, write results.
    ``requests_path`` may name several files joined by ``+``: one ``engine.run`` call per file
    (the per-stage variant: stage 1, then stage 2)."""
    sys.path.insert(0, str(REPO))
    from auditlang.core.engine import ModelConfig
    from auditlang.engines.registry import load_engine
    from auditlang.store.codec import request_from_json, result_to_json

    calls = [[request_from_json(line) for line in Path(f).read_text(encoding="utf-8").splitlines()]
             for f in str(requests_path).split("+")]
    reqs = [r for call in calls for r in call]
    engine = load_engine(ModelConfig(**json.loads(config_path.read_text(encoding="utf-8"))))
    try:
        results = [res for call in calls for res in engine.run(call)]
    finally:
        engine.close()
    with out_path.open("w", encoding="utf-8") as fh:
        for r in results:
            fh.write(result_to_json(r) + "\n")
    bad = sum(r.error is not None for r in results)
    print(f"plain: {len(results)} results for {len(reqs)} requests, {bad} errors")
    return 0 if len(results) == len(reqs) else 1


def env_for(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=str(REPO))
    if threads:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[k] = str(threads)
    return env


def timed(cmd: list[str], env: dict[str, str], log: Path) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as fh:
        rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        fail(f"{cmd[:4]} exited with {rc}; last output:\n{log.read_text(errors='replace')[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "load_before": load0, "load_after": os.getloadavg()[0]}


def journal_requests(run_dir: Path) -> tuple[list[str], dict[str, str]]:
    """Every request the run executed (JSON, journal order) and request id -> result JSON."""
    con = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        reqs = [r[0] for r in con.execute("SELECT request FROM requests ORDER BY rowid")]
        res = dict(con.execute("SELECT request_id, result FROM results"))
    finally:
        con.close()
    return reqs, res


def agreement(run_dir: Path, plain_out: Path) -> dict[str, int]:
    """How many results of the plain script equal the run's (generated texts, argmax label)."""
    from auditlang.store.codec import result_from_json

    _, stored = journal_requests(run_dir)
    same = total = 0
    for line in plain_out.read_text(encoding="utf-8").splitlines():
        p = result_from_json(line)
        a = result_from_json(stored[p.request_id])
        total += 1
        if p.samples is not None and a.samples is not None:
            same += [s.text for s in p.samples] == [s.text for s in a.samples]
        elif p.choice_logprobs and a.choice_logprobs:
            same += max(p.choice_logprobs, key=p.choice_logprobs.get) == max(a.choice_logprobs, key=a.choice_logprobs.get)
    return {"results": total, "same": same}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plain", nargs=3, metavar=("REQUESTS", "CONFIG", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--engine", choices=["hf", "vllm"], default="hf")
    ap.add_argument("--spec", type=Path, default=SPEC)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="auditc run --limit N (first N items per dataset)")
    ap.add_argument("--threads", type=int, default=None, help="OMP threads for both sides (default: the library's)")
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    if args.plain:
        return plain(*(Path(p) for p in args.plain))
    if args.repeats < 1:
        fail("--repeats must be >= 1")

    sys.path.insert(0, str(REPO))
    from auditlang.resolve import compile_spec
    from auditlang.resolve.models import model_config

    env = env_for(args.threads)
    work = Path(tempfile.mkdtemp(prefix=f"bench_run_overhead_{args.engine}_"))
    auditc = [sys.executable, "-m", "auditlang.cli", "run", str(args.spec), "--no-progress", "--engine", args.engine]
    if args.limit:
        auditc += ["--limit", str(args.limit)]
    try:
        # untimed warm-up: fills OS caches and yields the exact request list (stage 1 and 2)
        warm = timed(auditc + ["--out", str(work / "warmup")], env, work / "warmup.log")
        reqs, _ = journal_requests(work / "warmup")
        mids = sorted({json.loads(r)["model"] for r in reqs})
        if len(mids) != 1:
            fail(f"the spec must run one model (found {mids})")
        cfg = model_config(compile_spec(args.spec), mids[0], args.engine)
        (work / "requests.jsonl").write_text("\n".join(reqs) + "\n", encoding="utf-8")
        from auditlang.api import prepare

        stage1_ids = {r.id for r in prepare(str(args.spec), None, args.limit)[1].requests}
        stages = ([r for r in reqs if json.loads(r)["id"] in stage1_ids], [r for r in reqs if json.loads(r)["id"] not in stage1_ids])
        for k, part in enumerate(stages, 1):
            (work / f"stage{k}.jsonl").write_text("\n".join(part) + "\n", encoding="utf-8")
        per_stage = f"{work / 'stage1.jsonl'}+{work / 'stage2.jsonl'}" if stages[1] else str(work / "stage1.jsonl")
        (work / "config.json").write_text(json.dumps(asdict(cfg)), encoding="utf-8")
        print(f"{args.engine}: {len(reqs)} unique requests; warm-up auditc run {warm['wall_s']:.1f} s", flush=True)
        script = str(Path(__file__).resolve())
        rows: list[dict[str, Any]] = []
        for i in range(args.repeats):
            order = ["auditc", "plain", "plain_stages"]
            order = order if i % 2 == 0 else order[::-1]
            t: dict[str, dict[str, float]] = {}
            for side in order:
                if side == "auditc":
                    t[side] = timed(auditc + ["--out", str(work / f"run_{i}")], env, work / f"auditc_{i}.log")
                else:
                    src = str(work / "requests.jsonl") if side == "plain" else per_stage
                    cmd = [sys.executable, script, "--plain", src, str(work / "config.json"), str(work / f"{side}_{i}.jsonl")]
                    t[side] = timed(cmd, env, work / f"{side}_{i}.log")
            agree = agreement(work / f"run_{i}", work / f"plain_{i}.jsonl")
            row = {"repeat": i + 1, "order": " then ".join(order), **{f"{s}_{k}": v for s in t for k, v in t[s].items()},
                   "ratio_wall": t["auditc"]["wall_s"] / t["plain"]["wall_s"],
                   "ratio_cpu": t["auditc"]["cpu_s"] / t["plain"]["cpu_s"],
                   "ratio_wall_per_stage": t["auditc"]["wall_s"] / t["plain_stages"]["wall_s"], **agree}
            rows.append(row)
            print(f"repeat {i + 1} ({row['order']}): auditc run {t['auditc']['wall_s']:.1f} s (CPU {t['auditc']['cpu_s']:.1f}), "
                  f"plain one call {t['plain']['wall_s']:.1f} s (CPU {t['plain']['cpu_s']:.1f}), plain per stage "
                  f"{t['plain_stages']['wall_s']:.1f} s; ratio wall {row['ratio_wall']:.3f} (per stage "
                  f"{row['ratio_wall_per_stage']:.3f}), CPU {row['ratio_cpu']:.3f}; load {t[order[0]]['load_before']:.1f} -> "
                  f"{t[order[-1]]['load_after']:.1f}; same outputs {agree['same']}/{agree['results']}", flush=True)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    summary = {"engine": args.engine, "spec": str(args.spec), "limit": args.limit, "requests": len(reqs), "config": asdict(cfg),
               "median_ratio_wall": statistics.median(r["ratio_wall"] for r in rows),
               "median_ratio_cpu": statistics.median(r["ratio_cpu"] for r in rows),
               "median_ratio_wall_per_stage": statistics.median(r["ratio_wall_per_stage"] for r in rows), "repeats": rows}
    print(f"median over {len(rows)}: ratio wall {summary['median_ratio_wall']:.3f} (vs the per-stage plain script "
          f"{summary['median_ratio_wall_per_stage']:.3f}), CPU {summary['median_ratio_cpu']:.3f} (target <= 1.10)")
    if args.json_out:
        args.json_out.write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
