"""GPU time before any GPU is used: ``auditc plan --gpu KIND [--gpus N] [--executor ray]``.

From the plan's token estimate per model (``Plan.tokens_by_model``: prompt tokens at chars/4
and generated tokens at their budget, stage 1 and follow-ups) and a throughput table measured by
a benchmark (``throughput.json`` beside this module: per engine x GPU kind x dtype x model size,
prefill and decode tokens/s, a per-request cost, the engine start cold and warm, and the run's
own work outside the engine), each model's estimate is::

    gpu_s  = prompt / prefill_tok_s + generated / decode_tok_s + requests * per_request_s
    wall_s = start_s (cold) + gpu_s + overhead_s

A vllm model that starts with ``enforce_eager`` (written in the spec, or chosen by the rule at the
end of this module when the spec leaves it unset) takes the eager start of its row
(``start_eager_s`` / ``start_eager_warm_s``) and its GPU time scaled by the measured eager/compiled
engine seconds (``engine_eager_s`` / ``measured.engine_s``), where the row has them.

Rates for a size between two measured sizes are interpolated in log-log; beyond the largest
(smallest) measured size they scale with size (1/size); the start and overhead come from the
nearest measured size. A GPU kind the table has no row for is estimated from the H200's rows and
says so. Models run in turn on one GPU (``auditc run``); with ``--executor ray`` on N GPUs they
are packed longest first (the schedule length is the largest GPU's sum). Generated tokens are an
upper bound (every answer to its budget), so the estimate is one too for models that stop early.

``--throughput-from RUN_DIR`` refreshes the rows from a pilot run (run.json ``timing``: each
model's measured start and engine seconds on its GPU, and the token estimate it ran): start and
decode rate are replaced for that engine, GPU kind, dtype and size. This module imports no engine.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("throughput.json")
DEFAULT_GPU = "h200"
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def load_table(path: Path | None = None) -> dict[str, Any]:
    return json.loads((path or TABLE).read_text(encoding="utf-8"))


def gpu_kind(device: str | None) -> str | None:
    """``cuda:NVIDIA H200`` (an engine fingerprint's device) -> ``h200``; None off a GPU."""
    if not device or "cuda" not in device:
        return None
    name = device.split(":", 1)[-1].lower()
    for kind in ("h200", "h100", "a100", "l40s", "l4", "b200", "a10g"):
        if kind in name:
            return kind
    return name.replace("nvidia", "").strip().replace(" ", "-") or None


@dataclass
class ModelEstimate:
    model: str
    engine: str
    size_b: float | None
    start_s: float
    start_warm_s: float
    gpu_s: float
    overhead_s: float
    basis: str  # which rows, and what was assumed
    enforce_eager: bool | None = None  # vllm: whether the estimate is of an eager start (None: not vllm)

    @property
    def wall_s(self) -> float:
        return self.start_s + self.gpu_s + self.overhead_s

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "engine": self.engine, "size_b": self.size_b, "start_s": round(self.start_s, 1),
                "start_warm_s": round(self.start_warm_s, 1), "gpu_s": round(self.gpu_s, 1),
                "overhead_s": round(self.overhead_s, 1), "wall_s": round(self.wall_s, 1), "basis": self.basis,
                "enforce_eager": self.enforce_eager}


def _rows(table: dict[str, Any], engine: str, gpu: str, dtype: str | None) -> tuple[list[dict[str, Any]], str]:
    rows = [r for r in table["rows"] if r["engine"] == engine]
    note = ""
    on_gpu = [r for r in rows if r["gpu"] == gpu]
    if not on_gpu:
        on_gpu = [r for r in rows if r["gpu"] == DEFAULT_GPU]
        note = f"; no {gpu} row: {DEFAULT_GPU} figures"
    typed = [r for r in on_gpu if dtype and r.get("dtype") == dtype]
    if dtype and not typed and on_gpu:
        note += f"; no {dtype} row: {on_gpu[0].get('dtype')} figures"
    return sorted(typed or on_gpu, key=lambda r: r["size_b"]), note


def _interp(rows: list[dict[str, Any]], size: float, key: str) -> float:
    """A rate at ``size``: log-log between the measured sizes around it, 1/size beyond them."""
    if len(rows) == 1 or size <= rows[0]["size_b"]:
        r = rows[0]
        return r[key] * r["size_b"] / size
    if size >= rows[-1]["size_b"]:
        r = rows[-1]
        return r[key] * r["size_b"] / size
    for lo, hi in zip(rows, rows[1:]):
        if lo["size_b"] <= size <= hi["size_b"]:
            t = (math.log(size) - math.log(lo["size_b"])) / (math.log(hi["size_b"]) - math.log(lo["size_b"]))
            return math.exp(math.log(lo[key]) + t * (math.log(hi[key]) - math.log(lo[key])))
    raise AssertionError("unreachable")


def estimate_model(table: dict[str, Any], model: str, engine: str, size_b: float | None, dtype: str | None,
                   tokens: dict[str, int], gpu: str = DEFAULT_GPU, eager: bool | None = None) -> ModelEstimate | None:
    """One model's estimate, or None when the table has no row for its engine (openai, dryrun).
    ``eager``: a vllm model's ``enforce_eager`` as written; None: the rule (:data:`EAGER_BELOW_S`)."""
    dtype = DTYPES.get(dtype or "", dtype)
    rows, note = _rows(table, engine, gpu, dtype)
    if not rows:
        return None
    assumed = ""
    if size_b is None:
        size_b_used = rows[0]["size_b"]
        assumed = f"; size not declared (size=): {size_b_used} B assumed"
    else:
        size_b_used = float(size_b)
    nearest = min(rows, key=lambda r: abs(math.log(r["size_b"] / size_b_used)))
    prompt = tokens.get("prompt_tokens", 0) + tokens.get("followup_prompt_tokens", 0)
    gen = tokens.get("generated_tokens_max", 0) + tokens.get("followup_generated_max", 0)
    reqs = tokens.get("requests", 0) + tokens.get("followup_requests", 0)
    gpu_s = (prompt / _interp(rows, size_b_used, "prefill_tok_s") + gen / _interp(rows, size_b_used, "decode_tok_s")
             + reqs * nearest.get("per_request_s", 0.0))
    sizes = ", ".join(f"{r['size_b']} B" for r in rows)
    basis = f"{engine} on {rows[0]['gpu']} ({rows[0].get('dtype')}; measured at {sizes}){note}{assumed}"
    start, warm = float(nearest["start_s"]), float(nearest.get("start_warm_s", nearest["start_s"]))
    if engine == "vllm":
        eager = gpu_s < EAGER_BELOW_S if eager is None else bool(eager)
        if eager and "start_eager_s" in nearest:
            start = float(nearest["start_eager_s"])
            warm = float(nearest.get("start_eager_warm_s", start))
            compiled_s = (nearest.get("measured") or {}).get("engine_s")
            if nearest.get("engine_eager_s") and compiled_s:
                gpu_s *= float(nearest["engine_eager_s"]) / float(compiled_s)
            basis += "; enforce_eager: the eager start and engine time"
    else:
        eager = None
    return ModelEstimate(model, engine, size_b, start, warm, gpu_s, float(nearest.get("overhead_s", 0.0)), basis, eager)


def schedule(estimates: list[ModelEstimate], gpus: int, executor: str | None) -> dict[str, Any]:
    """Total wall: models in turn on one GPU, or packed longest first on ``gpus`` (``--executor
    ray``: one model per GPU at a time, each GPU pays its models' starts)."""
    if executor != "ray" or gpus <= 1:
        return {"executor": executor or "local", "gpus": 1, "wall_s": round(sum(e.wall_s for e in estimates), 1),
                "per_gpu": [[e.model for e in estimates]]}
    load = [0.0] * gpus
    per: list[list[str]] = [[] for _ in range(gpus)]
    for e in sorted(estimates, key=lambda e: -e.wall_s):
        i = min(range(gpus), key=lambda k: load[k])
        load[i] += e.wall_s
        per[i].append(e.model)
    return {"executor": "ray", "gpus": gpus, "wall_s": round(max(load), 1), "per_gpu": per,
            "gpu_s_total": round(sum(e.gpu_s for e in estimates), 1)}


def refresh(table: dict[str, Any], run_info: dict[str, Any], source: str) -> tuple[dict[str, Any], list[str]]:
    """The table with rows replaced from a pilot run's run.json ``timing`` (what changed, as lines):
    for each model measured on a GPU, its row (engine, GPU kind, dtype, size) takes the measured
    start and a decode rate that reproduces the measured engine seconds, keeping the prefill rate."""
    out = {**table, "rows": [dict(r) for r in table["rows"]]}
    changed: list[str] = []
    for mid, t in (run_info.get("timing") or {}).items():
        gpu, size = gpu_kind(t.get("device")), t.get("size_b")
        if gpu is None or not size or not t.get("engine_s"):
            continue
        rows, _ = _rows(out, t["engine"], gpu, t.get("dtype"))
        if not rows:
            continue
        tok = t.get("tokens") or {}
        prompt = tok.get("prompt_tokens", 0) + tok.get("followup_prompt_tokens", 0)
        gen = tok.get("generated_tokens_max", 0) + tok.get("followup_generated_max", 0)
        reqs = tok.get("requests", 0) + tok.get("followup_requests", 0)
        nearest = min(rows, key=lambda r: abs(math.log(r["size_b"] / size)))
        prefill = _interp(rows, size, "prefill_tok_s")
        rest = t["engine_s"] - prompt / prefill - reqs * nearest.get("per_request_s", 0.0)
        decode = gen / rest if rest > 0 and gen else _interp(rows, size, "decode_tok_s")
        row = {"engine": t["engine"], "gpu": gpu, "dtype": t.get("dtype"), "size_b": size, "prefill_tok_s": prefill,
               "decode_tok_s": decode, "per_request_s": nearest.get("per_request_s", 0.0), "start_s": t["start_s"],
               "start_warm_s": t["start_s"], "overhead_s": nearest.get("overhead_s", 0.0), "source": source}
        out["rows"] = [r for r in out["rows"] if not (r["engine"] == row["engine"] and r["gpu"] == gpu
                                                      and r.get("dtype") == row["dtype"] and r["size_b"] == size)] + [row]
        changed.append(f"{mid}: {t['engine']} on {gpu} at {size} B: start {t['start_s']:.1f} s, engine {t['engine_s']:.1f} s "
                       f"-> decode {decode:,.0f} tok/s")
    return out, changed


# vLLM's enforce_eager when the spec leaves it unset (issue 36): eager when the model's estimated GPU
# time on the H200 rows is under this. Measured there (benchmarks/README.md "Issue 36"): eager started
# in 38.7-40.0 s against 60.4-82.9 s compiled cold and 42.0-50.1 s warm, and ran the same work in
# 0.96-1.09x the compiled engine's time; so compiling pays back (at ~9 % faster decoding for a 7.38 B
# model, 22 s more start cold) only past a few minutes of GPU work.
EAGER_BELOW_S = 240.0


def eager_for(engine: str, size_b: float | None, dtype: str | None, tokens: dict[str, int] | None,
              table: dict[str, Any] | None = None) -> tuple[bool, float] | None:
    """``(enforce_eager, estimated GPU seconds)`` for a vllm model whose spec leaves enforce_eager
    unset, or None when there is nothing to estimate from (not vllm, no token estimate)."""
    if engine != "vllm" or not tokens:
        return None
    est = estimate_model(table or load_table(), "", engine, size_b, dtype, tokens, eager=False)  # the compiled engine's time
    if est is None:
        return None
    return est.gpu_s < EAGER_BELOW_S, est.gpu_s
