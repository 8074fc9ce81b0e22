"""Seed auditlang/plan/throughput.json (the table `auditc plan --gpu` estimates GPU time from)
from the issue-36 H200 runs in benchmarks/results/issue36/ (issue 36).

Each run is the s000 design through `auditc run` on a Llama-shaped random-init checkpoint (every
answer runs to max_tokens, so the plan's generated-token bound is the work done). One run gives
one equation, engine seconds = prompt / prefill + generated / decode + requests x per-request, so
the prefill rate is set from a measured MFU (bench_mfu.py, issue 16: the hf engine's bf16 scoring
forward at 0.305 MFU for the 1B shape and 0.455 for the 8B shape on a 989.4 TFLOP/s card) and, for
vLLM, 1.4x that MFU (an assumption: fused kernels and flash attention; not measured) on the tokens
it computes (its prefix cache computed 31 % of the prompt tokens in these runs: prefill_stats). At
the measured sizes the split only divides the same measured seconds; it matters between and
beyond them. The per-request cost is vLLM's rendering + result building measured
in the same run (hf: inside its forwards); the decode rate is what remains.

    python benchmarks/seed_throughput.py    # rewrites auditlang/plan/throughput.json
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "benchmarks" / "results" / "issue36"
PEAK = 989.4e12
# `auditc plan` of benchmarks/gpu_task/s000_smollm2_vllm.audit.in (the same requests as the hf spec)
# with --data-root ../shared/data: stage 1 + follow-ups, prompt tokens at chars/4, generated at budget
PLANNED = {100: {"prompt_tokens": 361357 + 2200000, "generated_tokens_max": 192000 + 40500, "requests": 8000},
           200: {"prompt_tokens": 728084 + 4411000, "generated_tokens_max": 384000 + 81000, "requests": 16000}}
HF_MFU = {1.07: 0.305, 7.38: 0.455}
VLLM_MFU_OVER_HF = 1.4  # assumed, see above


def load(name: str) -> dict:
    return json.loads((RES / f"{name}.json").read_text())


def row(engine: str, size: float, items: int, start: float, warm: float, engine_s: float, wall: float, per_req: float,
        prefill: float, source: str) -> dict:
    tok = PLANNED[items]
    rest = engine_s - tok["prompt_tokens"] / prefill - tok["requests"] * per_req
    return {"engine": engine, "gpu": "h200", "dtype": "bfloat16", "size_b": size, "prefill_tok_s": round(prefill),
            "decode_tok_s": round(tok["generated_tokens_max"] / rest), "per_request_s": round(per_req, 6),
            "start_s": round(start, 1), "start_warm_s": round(warm, 1), "overhead_s": round(wall - start - engine_s, 1),
            "measured": {"items_per_dataset": items, "engine_s": round(engine_s, 1), "wall_s": round(wall, 1), **tok},
            "source": source}


S15 = RES / "session15"


def eager_starts(shape: str) -> dict:
    """The eager start as `auditc run` pays it (engine core forked; session 15): on a fresh machine
    (the 8 B shape's first run: first-use imports and the Triton JIT of vLLM's warm-up kernels) and
    on a warm one. Session 14's eager runs spawned the core (the benchmark had imported torch) and
    are not used. The 1 B shape ran only after the 8 B runs, its first run with those caches warm:
    its fresh-machine start is assumed to be its warm start plus the 8 B shape's fresh-minus-warm."""
    first, warm = (json.loads((S15 / f"vllm_{shape}_200_{t}.json").read_text())["engine_start_s"] for t in "ab")
    if shape != "8b":
        big_first, big_warm = (json.loads((S15 / f"vllm_8b_200_{t}.json").read_text())["engine_start_s"] for t in "ab")
        first = warm + big_first - big_warm
    return {"start_eager_s": round(first, 1), "start_eager_warm_s": round(warm, 1)}


def main() -> None:
    rows = []
    for shape, size, items in (("1b", 1.07, 200), ("8b", 7.38, 100)):
        cold, warm, eager = (load(f"vllm_{shape}_{items}_{t}") for t in ("cold", "warm", "eager"))
        ratio = cold["prefill_stats"]["computed_tokens"] / cold["prefill_stats"]["prompt_tokens"]
        prefill = VLLM_MFU_OVER_HF * HF_MFU[size] * PEAK / (2 * cold["random_init"]["parameters"]) / ratio
        per_req = sum((cold["phases"][p]["wall_s"] + warm["phases"][p]["wall_s"]) / 2
                      for p in ("vllm: render+tokenize", "vllm: results")) / PLANNED[items]["requests"]
        engine_s = (cold["inside_vllm_s"] + warm["inside_vllm_s"]) / 2
        r = row("vllm", size, items, cold["engine_start_s"], warm["engine_start_s"], engine_s, cold["auditc_run_wall_s"],
                per_req, prefill, f"bench_vllm_gpu.py --random-init {shape} --limit {items}: vllm_{shape}_{items}_cold/warm.json")
        r["engine_eager_s"] = eager["inside_vllm_s"]
        r.update(eager_starts(shape))
        rows.append(r)
        hf = load(f"hf_{shape}_{items}")
        start = hf["engine_load_s"] + hf["phases"].get("engine fingerprint", {}).get("wall_s", 0.0)  # + hashing the weights
        prefill = HF_MFU[size] * PEAK / (2 * hf["random_init"]["parameters"])
        rows.append(row("hf", size, items, start, start, hf["engine_run_s"], hf["wall_s"], 0.0, prefill,
                        f"bench_gpu_spec.py --random-init {shape} --limit {items} --no-plain: hf_{shape}_{items}.json"))
    cold = load("vllm_1b_200_cold")
    table = {
        "format": 1,
        "provenance": {
            "benchmark": "benchmarks/seed_throughput.py from benchmarks/results/issue36 (issue 36)",
            "date": "2026-12-02", "card": "NVIDIA H200 (one, 143,771 MiB), 16 CPU cores",
            "versions": {"vllm": cold["vllm"], "torch": cold["torch"], "transformers": "5.17.0",
                         "model_runner": cold["model_runner"]},
            "workload": "study-000 design (benchmarks/gpu_task/s000_smollm2_*.audit) through auditc run, bf16, "
                        "Llama-shaped random-init checkpoints with SmolLM2's tokenizer: every answer to max_tokens",
            "prefill": f"set from MFU (hf {HF_MFU}, vllm {VLLM_MFU_OVER_HF}x hf (assumed) on computed tokens; {PEAK:.4g} FLOP/s peak); "
                       "decode is what remains of the measured engine seconds",
            "start_s": "cold (a fresh compile cache); start_warm_s: the same machine's second run",
            "start_eager_s": "vllm enforce_eager, engine core forked (session 15, results/issue36/session15): a fresh "
                             "machine's first run; start_eager_warm_s: the second. 1.07 B fresh: assumed (warm + the "
                             "7.38 B shape's fresh-minus-warm)",
            "one run each": True,
        },
        "rows": rows,
    }
    out = ROOT / "auditlang" / "plan" / "throughput.json"
    out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(out)
    for r in rows:
        print(r["engine"], r["size_b"], r["prefill_tok_s"], r["decode_tok_s"], r["per_request_s"], r["start_s"], r["overhead_s"])


if __name__ == "__main__":
    main()
