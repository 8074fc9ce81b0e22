"""Estimate the wall time of a spec on a GPU cluster under the Ray executor (docs/scale-out.md).

Step 1 (``--summarize``, slow: plans the spec): per model, the unique stage-1 requests by kind
with prompt and generated-token estimates (the dry-run engine's ``ceil(chars/4)`` rule and each
request's full ``max_tokens`` budget), and the stage-2 follow-up counts of the plan; written to
a JSON summary. Step 2 (fast): a throughput model per model size turns each model's work into
GPU seconds, and a list-scheduling simulation of the Ray driver (units = model x item shard,
submitted model by model, each unit loading its engine, one GPU per unit for models up to the
tensor-parallel threshold) gives the wall time on G GPUs for several shard counts K.

Throughput model (per GPU, vLLM, bf16; see docs/scale-out.md for the assumptions):
  prefill tokens/s = min(PREFILL_CAP, PREFILL_EFF * FLOPS / (2 * params))
  decode tokens/s  = min(DECODE_CAP, BATCH * DECODE_EFF * HBM / (2 * params))   (bandwidth-bound)
  engine load s    = LOAD_FIXED + 2 * params / LOAD_BW                           (bf16 weights)

Usage:
  python benchmarks/simulate_scaleout.py --summarize specs/s000_multivariant_audit.audit \
      --data-root ../shared/data --summary benchmarks/results/scaleout_s000.json
  python benchmarks/simulate_scaleout.py --summary benchmarks/results/scaleout_s000.json --gpus 8
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

# H100 SXM figures (bf16 dense FLOP/s, HBM bytes/s) and efficiencies: assumptions, not measurements.
FLOPS, HBM = 989e12, 3.35e12
PREFILL_EFF, DECODE_EFF, BATCH = 0.35, 0.5, 256
PREFILL_CAP, DECODE_CAP = 60_000.0, 25_000.0  # engine overhead ceilings for small models (tokens/s)
LOAD_FIXED, LOAD_BW = 40.0, 2e9  # vLLM start-up (s) + weights from local disk / cache (bytes/s)
# Measured (benchmarks/README.md, "hf engine on a GPU": SmolLM2-135M, hf engine, one H200, bf16,
# batch 64): first-token scoring 1,783 prompts/s, greedy generation 3,078 tokens/s.
HF_SCORING, HF_GEN = 1783.0, 3078.0
RATES = "roofline"


def summarize(spec_path: str, data_root: str | None) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from auditlang.api import plan_spec
    from auditlang.engines.dryrun import estimate_tokens
    from auditlang.resolve import compile_spec
    from auditlang.resolve.models import model_config

    t0 = time.perf_counter()
    spec = compile_spec(spec_path)
    plan = plan_spec(spec, data_root)
    plan_s = time.perf_counter() - t0
    models: dict[str, dict] = {}
    for r in plan.requests:
        m = models.setdefault(r.model, {"requests": 0, "by_kind": defaultdict(int), "prompt_tokens": 0, "gen_tokens": 0})
        prompt, gen = estimate_tokens(r)
        m["requests"] += 1
        m["by_kind"][r.kind] += 1
        m["prompt_tokens"] += prompt
        m["gen_tokens"] += gen
    for d in plan.deferred:
        m = models.setdefault(d["model"], {"requests": 0, "by_kind": defaultdict(int), "prompt_tokens": 0, "gen_tokens": 0})
        m.setdefault("deferred", defaultdict(int))[d["kind"]] += d["count"]
    for mid, m in models.items():
        o = spec.get(mid).value
        m["size_b"] = getattr(o, "size", None)
        m["max_tokens"] = getattr(o, "max_tokens", None)
        m["engine"] = model_config(spec, mid, None).engine
        m["by_kind"] = dict(m["by_kind"])
        m["deferred"] = dict(m.get("deferred", {}))
    return {"spec": spec_path, "plan_hash": plan.hash, "plan_seconds": round(plan_s, 1),
            "stage1_requests": len(plan.requests), "deferred_requests": plan.deferred_count, "models": models}


def gpu_seconds(m: dict) -> tuple[float, float]:
    """(engine load s, work s) of one model on one GPU under the throughput model (``RATES``:
    "roofline", the vLLM model above; "measured-hf", the measured hf-engine rates of the
    135M model applied to every model: scoring requests / 1,783 per s + generated tokens /
    3,078 per s, which flatters models larger than 135M on the hf engine)."""
    params = float(m["size_b"] or 1.0) * 1e9
    if RATES == "measured-hf":
        gen_follow = sum(c for k, c in m["deferred"].items() if k == "generate") * float(m["max_tokens"] or 32)
        scoring = sum(c for k, c in m["by_kind"].items() if k != "generate") + sum(
            c for k, c in m["deferred"].items() if k != "generate")
        return LOAD_FIXED + 2 * params / LOAD_BW, scoring / HF_SCORING + (m["gen_tokens"] + gen_follow) / HF_GEN
    prefill = min(PREFILL_CAP, PREFILL_EFF * FLOPS / (2 * params))
    decode = min(DECODE_CAP, BATCH * DECODE_EFF * HBM / (2 * params))
    n1 = max(1, m["requests"])
    mean_prompt = m["prompt_tokens"] / n1
    follow = sum(m["deferred"].values())
    gen_follow = sum(c for k, c in m["deferred"].items() if k == "generate") * float(m["max_tokens"] or 32)
    # a follow-up's prompt holds the stage-1 prompt and the answer
    prompt_tokens = m["prompt_tokens"] + follow * (mean_prompt + float(m["max_tokens"] or 32))
    gen_tokens = m["gen_tokens"] + gen_follow
    return LOAD_FIXED + 2 * params / LOAD_BW, prompt_tokens / prefill + gen_tokens / decode


def simulate(summary: dict, gpus: int, shards: int, per_unit_load: bool = False) -> dict:
    """List scheduling in submission order (the driver starts the workers model by model; Ray
    places each on the first free GPU): makespan, GPU utilisation, and the busy seconds. A
    worker loads its model once and runs its share of the model's ``shards`` units; workers per
    model as in auditlang/scaleout/rayexec.py ``_replicas``: max(1, min(K, ceil(GPUs / models))).
    ``per_unit_load``: one engine load per unit instead (one Ray task per unit)."""
    units = []
    n_models = len(summary["models"])
    for mid, m in summary["models"].items():
        load, work = gpu_seconds(m)
        r = shards if per_unit_load else max(1, min(shards, math.ceil(gpus / n_models)))
        units += [(mid, load + work / r)] * r
    free = [0.0] * gpus
    heapq.heapify(free)
    busy = 0.0
    for _, dur in units:
        start = heapq.heappop(free)
        heapq.heappush(free, start + dur)
        busy += dur
    wall = max(free)
    return {"gpus": gpus, "shards": shards, "units": len(units), "wall_s": wall, "busy_s": busy,
            "utilisation": busy / (wall * gpus) if wall else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--summarize", metavar="SPEC", help="plan SPEC and write the per-model summary")
    ap.add_argument("--data-root")
    ap.add_argument("--summary", required=True, help="the JSON summary (written with --summarize, else read)")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--shards", type=int, nargs="*", default=[1, 2, 4, 8])
    ap.add_argument("--rates", choices=["roofline", "measured-hf"], default="roofline")
    a = ap.parse_args()
    global RATES
    RATES = a.rates
    if a.summarize:
        s = summarize(a.summarize, a.data_root)
        Path(a.summary).parent.mkdir(parents=True, exist_ok=True)
        Path(a.summary).write_text(json.dumps(s, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    s = json.loads(Path(a.summary).read_text(encoding="utf-8"))
    print(f"rates: {RATES}")
    print(f"{s['spec']}: {s['stage1_requests']:,} stage-1 requests + {s['deferred_requests']:,} follow-ups, "
          f"{len(s['models'])} models (plan {s.get('plan_seconds')} s)")
    print("| model | size B | stage-1 | follow-ups | prompt tok (M) | gen tok (M) | load s | work s (1 GPU) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    total = 0.0
    for mid, m in sorted(s["models"].items(), key=lambda kv: -gpu_seconds(kv[1])[1]):
        load, work = gpu_seconds(m)
        total += load + work
        print(f"| {mid} | {m['size_b']} | {m['requests']:,} | {sum(m['deferred'].values()):,} | "
              f"{m['prompt_tokens'] / 1e6:.1f} | {m['gen_tokens'] / 1e6:.2f} | {load:.0f} | {work:,.0f} |")
    print(f"\none GPU, one unit per model: {total / 3600:.2f} h")
    print("| GPUs | shards per model K | workers (one load each) | wall | GPU utilisation | wall, one load per unit |")
    print("|---:|---:|---:|---:|---:|---:|")
    for g in sorted({a.gpus, 2 * a.gpus, 4 * a.gpus}):
        for k in a.shards:
            r = simulate(s, g, k)
            t = simulate(s, g, k, per_unit_load=True)
            print(f"| {g} | {k} | {r['units']} | {r['wall_s'] / 60:.0f} min | {r['utilisation']:.0%} | "
                  f"{t['wall_s'] / 60:.0f} min |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
