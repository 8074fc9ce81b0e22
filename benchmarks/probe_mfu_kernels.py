"""Where the scoring forward's time goes, and what raises its MFU (issue 16, absolute MFU target).

A plain scoring loop (length-sorted batches, one prefill per prompt, next-token log-softmax at
each prompt's last position) over seeded random Llama-shaped weights, in four variants on the
same prompts:

- ``left+mask``: left padding with an attention mask (what the engine and ``bench_mfu.py``'s
  plain loop do): SDPA cannot use its flash kernel with a mask;
- ``right+causal``: right padding and no mask: a real token only attends to earlier tokens,
  which are all real, so the causal kernel (flash) is exact for every real position; the
  last real position of each row is gathered from the decoder's hidden states and only those
  rows go through the output head;
- the same two under ``torch.compile(dynamic=True)`` of the decoder (fused norms, rotary,
  SiLU-gate).

It also prints the profiler's split of one batch's GPU time (matrix products, attention, the
rest) for the eager left+mask variant. FLOPs counted as in ``bench_mfu.py`` (useful tokens only).

Usage (device): ``python benchmarks/probe_mfu_kernels.py --shape llama-8b --batch-size 32 --prompts 512``
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mfu import SHAPES, decoder_params, useful_flops  # noqa: E402

PEAK = 989.4e12


def batches(lengths: list[int], batch: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[s: s + batch] for s in range(0, len(order), batch)]


def run(model: Any, rows: list[list[int]], groups: list[list[int]], variant: str, labels: Any) -> tuple[float, Any]:
    import torch

    dev = "cuda"
    decoder, head = model.model, model.lm_head
    outs = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for g in groups:
            rs = [rows[i] for i in g]
            width = max(map(len, rs))
            x = torch.zeros((len(rs), width), dtype=torch.long)
            if variant.startswith("left"):
                m = torch.zeros_like(x)
                for j, r in enumerate(rs):
                    x[j, width - len(r):] = torch.tensor(r)
                    m[j, width - len(r):] = 1
                pos = (m.cumsum(-1) - 1).clamp(min=0)
                h = decoder(input_ids=x.to(dev), attention_mask=m.to(dev), position_ids=pos.to(dev), use_cache=False).last_hidden_state[:, -1]
            else:
                last = torch.tensor([len(r) - 1 for r in rs])
                for j, r in enumerate(rs):
                    x[j, : len(r)] = torch.tensor(r)
                hs = decoder(input_ids=x.to(dev), use_cache=False).last_hidden_state
                h = hs[torch.arange(len(rs), device=dev), last.to(dev)]
            lp = torch.log_softmax(head(h).float(), -1)[:, labels]
            outs.append((g, lp.cpu()))
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    res = torch.zeros((len(rows), labels.numel()))
    for g, lp in outs:
        res[g] = lp
    return dt, res


def split(model: Any, rows: list[list[int]], group: list[int], labels: Any, variant: str = "left+mask") -> dict[str, float]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run(model, rows, [group], variant, labels)
    cats = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    top = []
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if not t or ev.key.startswith(("aten::", "cuda", "Memcpy", "Memset")) and "kernel" not in ev.key.lower():
            continue
        k = ev.key.lower()
        c = "gemm" if any(s in k for s in ("gemm", "cutlass", "sm90_xmma", "nvjet", "cublas", "mm_")) else \
            "attention" if any(s in k for s in ("fmha", "flash", "attention", "efficient")) else "other"
        cats[c] += t
        top.append((t, ev.key[:90], c))
    tot = sum(cats.values()) or 1.0
    for t, k, c in sorted(top, reverse=True)[:12]:
        print(f"  {t / 1e3:9.2f} ms  {c:<9} {k}")
    return {c: round(v / tot, 3) for c, v in cats.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="llama-8b", choices=sorted(SHAPES))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=512)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--variants", default="left+mask,right+causal,compiled left+mask,compiled right+causal")
    ap.add_argument("--split-each", action="store_true", help="also profile one batch of every variant")
    ap.add_argument("--no-first-split", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()

    import torch
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=a.vocab, max_position_embeddings=8192, **SHAPES[a.shape])
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM._from_config(cfg, dtype=torch.bfloat16).eval()
    rng = random.Random(0)
    lengths = [int(a.prompt_tokens * rng.uniform(0.75, 1.25)) for _ in range(a.prompts)]
    rows = [[rng.randrange(10, a.vocab) for _ in range(n)] for n in lengths]
    groups = batches(lengths, a.batch_size)
    labels = torch.tensor([101, 102, 103, 104])
    flops = useful_flops(cfg, lengths)
    report: dict[str, Any] = {"shape": a.shape, "decoder_params": decoder_params(cfg), "gpu": torch.cuda.get_device_name(0),
                              "torch": torch.__version__, "transformers": transformers.__version__,
                              "batch_size": a.batch_size, "prompts": a.prompts, "mean_tokens": sum(lengths) / len(lengths),
                              "variants": {}}
    if not a.no_first_split:
        print("GPU time split, one batch, eager left+mask:")
        report["split_left_mask"] = split(model, rows, groups[len(groups) // 2], labels)
        print(" ", report["split_left_mask"])
    ref = None
    eager_decoder = model.model
    for v in a.variants.split(","):
        v = v.strip()
        if "nomask" in v:  # right padding, no mask under compile too: SDPA's causal flash path, native GQA
            from transformers import AttentionInterface
            from transformers.integrations.sdpa_attention import sdpa_attention_forward
            from transformers.masking_utils import AttentionMaskInterface

            AttentionInterface.register("sdpa_nomask", sdpa_attention_forward)
            AttentionMaskInterface.register("sdpa_nomask", lambda *args, **kw: None)
            eager_decoder.set_attn_implementation("sdpa_nomask")
        if v.startswith("compiled"):
            model.model = torch.compile(eager_decoder, dynamic=True)
            t = time.perf_counter()
            run(model, rows, groups[:2] + groups[-1:], v.split(" ", 1)[1], labels)  # compile (and recompile) once
            compile_s = time.perf_counter() - t
        else:
            model.model = eager_decoder
            compile_s = 0.0
        base = v.split(" ", 1)[-1].replace("nomask", "causal")
        run(model, rows, groups[:1], base, labels)
        times = []
        for _ in range(2):
            dt, res = run(model, rows, groups, base, labels)
            times.append(dt)
        if ref is None:
            ref = res
        diff = float((res - ref).abs().max())
        agree = int((res.argmax(-1) == ref.argmax(-1)).sum())
        best = min(times)
        report["variants"][v] = {"s": [round(x, 3) for x in times], "mfu": round(flops / best / PEAK, 4),
                                 "compile_s": round(compile_s, 1), "max_abs_diff_vs_first": diff, "argmax_agree": agree}
        print(f"{v:<24} best {best:7.3f} s  MFU {flops / best / PEAK:.3f}  compile {compile_s:5.1f} s  diff {diff:.3g}  agree {agree}/{len(rows)}", flush=True)
        if a.split_each:
            report["variants"][v]["split"] = split(model, rows, groups[len(groups) // 2], labels, base)
            print("   split:", report["variants"][v]["split"], flush=True)
    print(json.dumps(report))
    if a.out:
        a.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
