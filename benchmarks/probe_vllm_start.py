"""vLLM start-up vs throughput, per engine configuration, each in a fresh process (issue 22).

A small model's audit on vLLM spends more time starting the engine (``import vllm``, the engine
core process, torch.compile, CUDA-graph capture) than executing its requests. This probe starts
one ``vllm.LLM`` per configuration in a fresh subprocess, with the keyword arguments auditlang's
vLLM engine passes (``auditlang/engines/vllm_engine.py`` ``_make_llm``), then runs the same jobs
as a plain batch (the jobs ``bench_vllm_gpu.py --dump-jobs`` recorded from a real ``auditc run``,
in the engine's phases: one-token windows first), and reports import, engine start and batch
seconds per configuration. The compile cache (``VLLM_CACHE_ROOT``) is whatever the environment
points at: run it after a ``bench_vllm_gpu.py`` run to measure warm starts.

Configurations (``--configs``, comma-separated):
  default        compile + CUDA graphs, engine core in its own process (auditlang's GPU default)
  inproc         the same, engine core in this process (``vllm(..., in_process=true)``)
  eager          no torch.compile, no CUDA graphs (``vllm(..., enforce_eager=true)``)
  eager-inproc   both

Usage (GPU machine, vLLM installed; on vLLM's CPU build only the in-process configurations start,
since the probe does not size the CPU KV cache as the engine does):
    python benchmarks/probe_vllm_start.py --model DIR --dtype float32 --jobs jobs.pkl \\
        [--configs default,inproc,eager,eager-inproc] [--fraction 0.33] [--json-out F]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import time

CONFIGS = {
    "default": ({}, {}),
    "inproc": ({}, {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}),
    "eager": ({"enforce_eager": True}, {}),
    "eager-inproc": ({"enforce_eager": True}, {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}),
}


def child(args: argparse.Namespace) -> None:
    """One configuration, in this (fresh) process: print one JSON line."""
    t0 = time.perf_counter()
    import vllm
    from vllm.sampling_params import RequestOutputKind

    t_import = time.perf_counter()
    extra, _ = CONFIGS[args.child]
    llm = vllm.LLM(model=args.model, tokenizer=args.model, dtype=args.dtype, seed=0, enable_prefix_caching=True,
                   enforce_eager=bool(extra.get("enforce_eager", False)), max_logprobs=256, generation_config="vllm")
    t_ready = time.perf_counter()
    with open(args.jobs, "rb") as f:
        jobs = pickle.load(f)
    windows = [(p, s) for p, s in jobs if s.max_tokens == 1 and s.logprobs]
    rest = [(p, s) for p, s in jobs if not (s.max_tokens == 1 and s.logprobs)]
    keep = lambda xs: xs[: max(1, int(len(xs) * args.fraction))]  # noqa: E731
    n = tokens = 0
    t1 = time.perf_counter()
    for group in (keep(windows), keep(rest)):
        if not group:
            continue
        params = []
        for _, sp in group:
            sp.output_kind = RequestOutputKind.FINAL_ONLY
            params.append(sp)
        outs = llm.generate([vllm.TokensPrompt(prompt_token_ids=p) for p, _ in group], params, use_tqdm=False)
        n += len(outs)
        tokens += sum(len(o.outputs[0].token_ids) for o in outs)
    t_done = time.perf_counter()
    print("PROBE " + json.dumps({"config": args.child, "import_s": round(t_import - t0, 2),
                                  "engine_start_s": round(t_ready - t_import, 2), "batch_s": round(t_done - t1, 2),
                                  "jobs": n, "generated_tokens": tokens,
                                  "total_s": round(t_done - t0, 2)}), flush=True)
    # Stop the engine-core process before leaving: an orphaned one keeps the parent's stdout pipe
    # open, and the parent waits on it forever (what happened to the first H200 probe).
    llm.llm_engine.engine_core.shutdown()
    os._exit(0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--jobs", required=True, help="pickle of [(prompt ids, SamplingParams)] (bench_vllm_gpu.py --dump-jobs)")
    ap.add_argument("--configs", default="default,inproc,eager,eager-inproc")
    ap.add_argument("--fraction", type=float, default=1.0, help="run this fraction of each phase's jobs")
    ap.add_argument("--json-out")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per configuration (default 240)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    rows = []
    for name in args.configs.split(","):
        _, env = CONFIGS[name]
        cmd = [sys.executable, __file__, "--child", name, "--model", args.model, "--dtype", args.dtype,
               "--jobs", args.jobs, "--fraction", str(args.fraction)]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            p = subprocess.CompletedProcess(cmd, -1, out, f"timed out after {args.timeout} s")
        wall = time.perf_counter() - t0
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("PROBE ")), None)
        row = json.loads(line[6:]) if line else {"config": name, "failed": (p.stderr or p.stdout)[-1500:]}
        row["process_wall_s"] = round(wall, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json_out:  # after every configuration: a later one that hangs loses nothing
            with open(args.json_out, "w") as f:
                json.dump({"model": args.model, "dtype": args.dtype, "fraction": args.fraction, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
