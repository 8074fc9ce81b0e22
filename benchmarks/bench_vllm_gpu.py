"""A spec through `auditc run` on vLLM, then the same vLLM work as one plain batch, one process.

1. ``auditc run SPEC`` in this process (``auditlang.cli.main``: compile, plan, every stage through
   the executor and the journal, scoring, metrics, report). Records the engine start, the time
   inside vLLM (the engine's ``run`` generators, i.e. vLLM stepping plus result building), and
   every job the engine handed vLLM (prompt ids and ``SamplingParams``).
2. When the run closes the engine (after its model's last stage, before scoring, as in any run),
   a plain vLLM script of the same work runs first on the same loaded ``LLM`` (its prefix cache
   reset first): ONE ``llm.generate`` over every recorded job (two on Model Runner V1, whose steps
   must not mix ``logprob_token_ids`` with top-k windows), the way a user who knew the requests
   would write it. Then the engine really closes, so scoring and the report run as in a plain
   ``auditc run`` (vLLM's client threads gone); the time spent in this step is subtracted from
   the run's wall time.
3. Every greedy generation of the two is compared token by token.

Prints a table and one JSON line (``--json-out`` writes it). Targets (issue 22): time inside vLLM
<= 1.15x the plain batch; ``auditc run`` wall <= plain + engine start + 15 %.

Usage (repository root; vLLM installed; data from ../shared/data):
    python benchmarks/bench_vllm_gpu.py SPEC --data-root ../shared/data [--out DIR] [--limit N] [--json-out F]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditlang.engines import vllm_engine as ve  # noqa: E402
from auditlang.engines import vllm_stream  # noqa: E402


class Recorder:
    """Wraps the vLLM engine the run loads: start time, time inside ``run``, the jobs; ``before_close``
    (the plain batch) runs on the first engine when the run closes it, timed apart (``hook_s``)."""

    def __init__(self) -> None:
        self.engines: list[Any] = []
        self.start_s = 0.0
        self.run_s = 0.0
        self.vllm_calls_s = 0.0  # inside LLMEngine.step / add_request only
        self.calls: list[dict[str, Any]] = []
        self.jobs: list[tuple[list[int], Any]] = []
        self.greedy: dict[tuple[int, ...], list[int]] = {}
        self.before_close: Any = None
        self.hook_s = 0.0
        self.close_s = 0.0
        self.closed = 0
        self.ready_at: list[float] = []

    def install(self) -> None:
        rec = self
        init, run, close, stream = ve.VLLMEngine.__init__, ve.VLLMEngine.run, ve.VLLMEngine.close, vllm_stream.stream

        def patched_init(engine: Any, *a: Any, **k: Any) -> None:
            t0 = time.perf_counter()
            init(engine, *a, **k)
            rec.start_s += time.perf_counter() - t0
            rec.ready_at.append(time.perf_counter())  # the command's start to engine ready
            rec.engines.append(engine)
            core = engine.llm.llm_engine
            for name in ("step", "add_request"):  # time inside vLLM's own calls
                fn = getattr(core, name)

                def timed(*a: Any, _fn: Any = fn, **k: Any) -> Any:
                    t = time.perf_counter()
                    try:
                        return _fn(*a, **k)
                    finally:
                        rec.vllm_calls_s += time.perf_counter() - t
                setattr(core, name, timed)

        def patched_run(engine: Any, requests: Any) -> Any:
            """The engine's generator, timed while it runs (the executor's commits and the
            follow-ups it adds to the feed happen between results, outside this time, except
            at a refill when vLLM has nothing in flight: phase 'feed refill')."""
            t0 = time.perf_counter()
            it = run(engine, requests)
            busy = time.perf_counter() - t0
            kinds: Counter = Counter()
            errors = 0
            try:
                while True:
                    t1 = time.perf_counter()
                    try:
                        res = next(it)
                    except StopIteration:
                        busy += time.perf_counter() - t1
                        break
                    busy += time.perf_counter() - t1
                    kinds[res.kind] += 1
                    errors += res.error is not None
                    yield res
            finally:
                rec.run_s += busy
                rec.calls.append({"n": sum(kinds.values()), "s": round(busy, 3), "kinds": dict(kinds), "errors": errors})

        def patched_stream(llm: Any, vllm: Any, jobs: Any, **kw: Any) -> Any:
            for j in jobs:
                rec.jobs.append((j.prompt, j.params))  # not copied: the engine never changes them after adding
            if kw.get("more") is not None:  # jobs of follow-ups that join the stream
                def more(idle: bool, _more: Any = kw["more"]) -> Any:
                    new = _more(idle)
                    rec.jobs.extend((j.prompt, j.params) for j in new)
                    return new
                kw["more"] = more
            for job, out in stream(llm, vllm, jobs, **kw):
                if not isinstance(out, Exception) and job.params.temperature == 0 and job.params.max_tokens > 1:
                    rec.greedy[_key(job.prompt, job.params)] = list(out.outputs[0].token_ids)
                yield job, out

        ve.VLLMEngine.__init__ = patched_init  # type: ignore[method-assign]
        ve.VLLMEngine.run = patched_run  # type: ignore[method-assign]
        def patched_close(engine: Any) -> None:
            if rec.before_close is not None and engine is rec.engines[0] and not rec.closed:
                t = time.perf_counter()
                rec.before_close(engine)
                rec.hook_s += time.perf_counter() - t
            rec.closed += 1
            t = time.perf_counter()
            close(engine)
            rec.close_s += time.perf_counter() - t

        ve.VLLMEngine.close = patched_close  # type: ignore[method-assign]
        ve.vllm_stream.stream = patched_stream  # type: ignore[attr-defined]


def _key(prompt: list[int], params: Any) -> tuple[int, ...]:
    return (*prompt, -1, int(params.max_tokens), int(params.logprobs or 0))


class _J:
    def __init__(self, prompt: list[int], params: Any) -> None:
        self.prompt, self.params = prompt, params


def plain_batch(engine: Any, jobs: list[tuple[list[int], Any]]) -> tuple[float, dict[tuple[int, ...], list[int]], int]:
    """One ``llm.generate`` over every job (per phase); returns seconds, greedy ids, generated tokens."""
    from vllm import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    llm = engine.llm
    llm.reset_prefix_cache()
    # the plain script: the one-token windows in one generate, everything else in another
    # (on Model Runner V1 the logprob_token_ids requests in a third)
    groups = vllm_stream.phases([_J(p, s) for p, s in jobs], engine.model_runner() == "v2")
    groups = [[(j.prompt, j.params) for j in g] for g in groups]
    greedy: dict[tuple[int, ...], list[int]] = {}
    tokens = 0
    t0 = time.perf_counter()
    for group in groups:
        if not group:
            continue
        params = []
        for _, p in group:
            p = copy.deepcopy(p)
            p.output_kind = RequestOutputKind.FINAL_ONLY
            params.append(p)
        outs = llm.generate([TokensPrompt(prompt_token_ids=g[0]) for g in group], params, use_tqdm=False)
        for (prompt, p), out in zip(group, outs):
            ids = list(out.outputs[0].token_ids)
            tokens += len(ids)
            if p.temperature == 0 and p.max_tokens > 1:
                greedy[_key(prompt, p)] = ids
    return time.perf_counter() - t0, greedy, tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("--data-root", default="../shared/data")
    ap.add_argument("--out")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--json-out")
    ap.add_argument("--dump-jobs", help="pickle the recorded jobs [(prompt ids, SamplingParams)] here (probe_vllm_start.py)")
    ap.add_argument("--random-init", choices=["1b", "8b"], help="run the spec's first model as a Llama-shaped "
                    "checkpoint of this size built on the GPU (random weights, SmolLM2's tokenizer; random_init.py)")
    ap.add_argument("--tokenizer", help="with --random-init: a checkpoint dir to take the tokenizer from "
                    "(default: the embedded SmolLM2)")
    args = ap.parse_args()
    random_init_info = None
    if args.random_init:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import random_init

        ckpt, random_init_info = random_init.build_isolated(args.random_init, tokenizer=args.tokenizer)  # no torch here
        args.spec = str(random_init.spec_for(args.spec, ckpt, random_init_info))
        print(f"random-init {args.random_init}: {random_init_info['parameters_b']} B parameters at {ckpt}; spec {args.spec}",
              flush=True)
    from auditlang.cli import main as cli_main

    rec = Recorder()
    rec.install()
    plain: dict[str, Any] = {}

    def before_close(engine: Any) -> None:
        """The plain batch of the recorded jobs on this engine's LLM, before the run closes it."""
        plain["calls_s"] = rec.vllm_calls_s  # before the plain batch, whose steps go through the same wrapper
        if args.dump_jobs:
            import pickle

            with open(args.dump_jobs, "wb") as f:
                pickle.dump(rec.jobs, f)
        plain["s"], plain["greedy"], plain["tokens"] = plain_batch(engine, rec.jobs)
        plain["fp"] = engine.fingerprint()
        plain["prefill_stats"] = engine.prefill_stats.as_dict()

    rec.before_close = before_close
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_phases  # per-phase wall/CPU of the run (compile, plan, execute, score, report, ...)

    for sub in ("plan", "run", "report"):
        __import__(f"auditlang.cli.{sub}")
    bench_phases.install()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_vllm_")) / "run"
    if out.exists():
        shutil.rmtree(out)
    cmd = ["run", args.spec, "--out", str(out), "--data-root", args.data_root, "--display", "plain"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    t0 = time.perf_counter()
    rc = cli_main(cmd)
    wall = time.perf_counter() - t0 - rec.hook_s  # the plain batch ran inside, in the deferred close
    if not rec.engines or "s" not in plain:
        print("no vLLM engine was loaded and closed", file=sys.stderr)
        return 1
    calls_s = plain["calls_s"]
    plain_s, plain_greedy, plain_tokens = plain["s"], plain["greedy"], plain["tokens"]
    same = sum(1 for k, v in rec.greedy.items() if plain_greedy.get(k) == v)
    diff = [k for k, v in rec.greedy.items() if plain_greedy.get(k) != v]
    fp = plain["fp"]
    info = {
        "spec": args.spec, "exit_code": rc, "device": fp.get("device"), "vllm": fp.get("vllm"), "torch": fp.get("torch"),
        "dtype": fp.get("dtype"), "model_runner": fp.get("model_runner"), "prefix_caching": fp.get("prefix_caching"),
        "auditc_run_wall_s": round(wall, 1), "engine_start_s": round(rec.start_s, 1),
        "command_to_engine_ready_s": round(rec.ready_at[0] - t0, 1), "inside_vllm_s": round(rec.run_s, 1),  # the engine's run generators: vLLM + rendering + results
        "engine_run_calls": rec.calls, "jobs": len(rec.jobs),
        "jobs_by_shape": dict(Counter(f"max_tokens={p.max_tokens},logprobs={p.logprobs},ids={bool(getattr(p, 'logprob_token_ids', None))}"
                                      for _, p in rec.jobs).most_common(8)),
        "plain_batch_s": round(plain_s, 1), "plain_generated_tokens": plain_tokens,
        "inside_vllm_over_plain": round(rec.run_s / plain_s, 3) if plain_s else None,
        "vllm_calls_s": round(calls_s, 1),
        "vllm_calls_over_plain": round(calls_s / plain_s, 3) if plain_s else None,
        "wall_over_plain_plus_start": round(wall / (plain_s + rec.start_s), 3) if plain_s else None,
        "greedy_compared": len(rec.greedy), "greedy_identical": same,
        "first_difference": list(diff[0][-3:]) if diff else None,
        "prefill_stats": plain["prefill_stats"], "plain_step_s": round(rec.hook_s, 1),
        "engine_close_s": round(rec.close_s, 2),  # the engines' close() calls (vllm_release: no wait for the core's exit)
        "phases": {n: {k: round(v, 2) for k, v in st.items()} for n, st in bench_phases.STATS.items()},
        "note": "phase 'execute' (wall) includes plain_step_s, the plain batch run inside the deferred close",
        "random_init": random_init_info,
        # how vLLM started its engine core: forked (its default) or spawned (torch imported before vLLM)
        "engine_core_start": os.environ.get("VLLM_WORKER_MULTIPROC_METHOD") or "fork (vLLM's default)",
        "torch_before_vllm": bool(ve._TORCH_BEFORE_VLLM and ve._TORCH_BEFORE_VLLM[0]),
    }
    print(f"auditc run wall {wall:.1f}s (engine start {rec.start_s:.1f}s, inside vLLM {rec.run_s:.1f}s in {len(rec.calls)} run calls); "
          f"plain batch {plain_s:.1f}s; inside/plain {info['inside_vllm_over_plain']}x; "
          f"greedy identical {same}/{len(rec.greedy)}")
    for n, st in bench_phases.STATS.items():
        print(f"  phase {n:<26} calls {int(st['calls']):>5}  wall {st['wall_s']:8.2f}s  CPU {st['cpu_s']:8.2f}s")
    print(json.dumps(info))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(info, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
