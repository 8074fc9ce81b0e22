"""The vLLM engine's start path, step by step, in a fresh process (issue 36, session 21).

Times what ``VLLMEngine.__init__`` does before the engine is ready, in its order: ``import vllm``,
the platform probe, the transformers tokenizer modules, ``vllm.LLM`` (vLLM's lazy import of its
entrypoint), our tokenizer load, then ``LLM()`` with the engine's arguments under cProfile (the
parent process only: the engine core runs in its forked child). Prints one line per step and the
top functions of ``LLM()`` by cumulative time; ``--json`` writes them. With ``--compare-tokenizer``
it checks that ``llm.get_tokenizer()`` encodes, renders the chat template and decodes as
``AutoTokenizer.from_pretrained`` does on sample prompts (the engine serves from vLLM's tokenizer
when they agree).

    python benchmarks/gpu_task/start_profile.py --model CKPT [--no-llm] [--json F] [--compare-tokenizer]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from typing import Any

STEPS: list[dict[str, Any]] = []


def step(name: str, fn: Any) -> Any:
    t, c = time.perf_counter(), time.process_time()
    value = fn()
    STEPS.append({"step": name, "wall_s": round(time.perf_counter() - t, 3), "cpu_s": round(time.process_time() - c, 3)})
    print(f"step {name:<44} wall {STEPS[-1]['wall_s']:7.3f} s  CPU {STEPS[-1]['cpu_s']:7.3f} s", flush=True)
    return value


SAMPLES = ["Is the sky blue?", " leading space and  double", "Ünïcödé — “quotes” 123,456.7", "A\nB\n\nC"]


def compare_tokenizers(ours: Any, theirs: Any) -> dict[str, Any]:
    """Whether vLLM's tokenizer gives our tokenizer's ids, chat renderings and token strings."""
    same = {"type_ours": type(ours).__name__, "type_vllm": type(theirs).__name__}
    same["encode"] = all(ours(s, add_special_tokens=sp)["input_ids"] == theirs(s, add_special_tokens=sp)["input_ids"]
                         for s in SAMPLES for sp in (True, False))
    msgs = [{"role": "user", "content": s} for s in SAMPLES]
    same["chat"] = all(ours.apply_chat_template([m], tokenize=False, add_generation_prompt=True)
                       == theirs.apply_chat_template([m], tokenize=False, add_generation_prompt=True) for m in msgs)
    ids = range(0, len(ours), max(1, len(ours) // 500))
    same["decode"] = all(ours.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False)
                         == theirs.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False) for i in ids)
    same["eos_token_id"] = ours.eos_token_id == theirs.eos_token_id
    same["chat_template"] = getattr(ours, "chat_template", None) == getattr(theirs, "chat_template", None)
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--no-llm", action="store_true", help="stop before LLM()")
    ap.add_argument("--compare-tokenizer", action="store_true")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    os.environ.setdefault("VLLM_CACHE_ROOT", os.path.join(os.environ.get("AUDITLANG_CACHE", "/tmp/alcache"), "vllm"))
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.environ["VLLM_CACHE_ROOT"], "triton"))
    t0 = time.perf_counter()
    vllm = step("import vllm", lambda: __import__("vllm"))
    step("current_platform.is_cpu()", lambda: __import__("vllm.platforms", fromlist=["x"]).current_platform.is_cpu())
    step("transformers AutoTokenizer, PreTrainedTokenizerFast",
         lambda: __import__("transformers", fromlist=["AutoTokenizer", "PreTrainedTokenizerFast"]).AutoTokenizer)
    LLM = step("vllm.LLM (entrypoint import)", lambda: vllm.LLM)
    from transformers import AutoTokenizer

    ours = step("AutoTokenizer.from_pretrained", lambda: AutoTokenizer.from_pretrained(args.model))
    out: dict[str, Any] = {"steps": STEPS}
    if not args.no_llm:
        kw = dict(model=args.model, tokenizer=args.model, dtype="bfloat16", seed=0, enable_prefix_caching=True,
                  enforce_eager=True, tensor_parallel_size=1, trust_remote_code=False, generation_config="vllm",
                  max_logprobs=256)
        prof = cProfile.Profile()
        llm = step("LLM() (cProfile, parent)", lambda: prof.runcall(LLM, **kw))
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(args.top)
        print(buf.getvalue())
        out["llm_profile"] = buf.getvalue()
        theirs = step("llm.get_tokenizer()", llm.get_tokenizer)
        if args.compare_tokenizer:
            out["tokenizer_same"] = compare_tokenizers(ours, theirs)
            print("tokenizer_same", json.dumps(out["tokenizer_same"]))
    out["total_s"] = round(time.perf_counter() - t0, 3)
    print(f"total {out['total_s']:.2f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
