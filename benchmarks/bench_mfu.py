"""Scoring-workload MFU of the hf engine vs a plain forward loop (issue 16, last target).

The workload: one prefill per prompt and the letters' logprobs at the last position, i.e. a
``choice_logprobs`` request per prompt (engine) against what a user writes by hand (plain loop):
length-sorted, left-padded batches through ``model(..., logits_to_keep=1)`` and a float32
``log_softmax`` at the last position. Both run the SAME model object in the same process, in
bfloat16 on one GPU, on the same prompts and batch size.

Models: Llama-shaped decoders with seeded random weights (speed only; ``--shape``):
``llama-1b`` (Llama-3.2-1B: 16 layers, hidden 2048, 32 heads / 8 KV heads, MLP 8192, tied head)
and ``llama-8b`` (Llama-3.1-8B: 32 layers, hidden 4096, 32 / 8 heads, MLP 14336); ``tiny`` runs
anywhere (tests of this script). The vocabulary is the tokenizer's (SmolLM2's 49,152 tokens,
taken from the embedded checkpoint) instead of Llama's 128,256: the vocabulary enters the
scoring FLOPs only through the one output row per prompt, well under 0.1 %.

How the engine is built: an :class:`~auditlang.engines.hf.HFEngine` is loaded the user's way
from a one-layer checkpoint of the same shape written to a temporary folder (so config,
tokenizer, dtype and device handling are the engine's own), then its ``model`` is replaced by
the full-depth model initialised directly on the GPU (writing and reading 15 GB of random
weights would measure the disk). The engine's scoring path, not its loader, is what is timed.

MFU = useful FLOPs / (wall seconds x peak). Useful FLOPs per prompt of L tokens (padding not
counted): 2 * N * L for the matrix multiplications (N = parameters of the decoder layers) +
2 * layers * L^2 * hidden for causal attention (QK^T and AV, half the square each) + 2 * hidden *
vocab for the one output row. Peak: 989.4 TFLOP/s dense bf16 for the H100 SXM and H200
(``--peak-tflops`` overrides). ``padded MFU`` counts the padded tokens too.

Usage (device machine):
    python benchmarks/bench_mfu.py --shape llama-1b --batch-size 64 --prompts 2048
    python benchmarks/bench_mfu.py --shape llama-8b --batch-size 32 --prompts 1024
    python benchmarks/bench_mfu.py --shape tiny --device cpu --dtype float32 --prompts 32 --batch-size 8
Prints a table and one JSON line (``--out`` also writes it).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditlang.core.engine import ModelConfig  # noqa: E402
from auditlang.core.requests import Prompt, Request  # noqa: E402
from auditlang.engines import hf_scoring  # noqa: E402
from auditlang.engines.hf import HFEngine  # noqa: E402

SHAPES: dict[str, dict[str, Any]] = {
    "tiny": dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "llama-1b": dict(num_hidden_layers=16, hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=64, tie_word_embeddings=True),
    "llama-8b": dict(num_hidden_layers=32, hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
}
PEAK_TFLOPS = {"H100": 989.4, "H200": 989.4}
LETTERS = (" A", " B", " C", " D")
WORDS = ("energy plant water rock cell heat light sound force motion earth moon gas liquid solid "
         "weather cloud river mountain animal habitat fossil magnet circuit current orbit season").split()


def prompts(n: int, tokens: int, seed: int) -> list[Prompt]:
    """``n`` multiple-choice prompts of about ``tokens`` tokens (lengths spread +-25 %): a few
    worked examples and a question, as a few-shot scoring prompt looks."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        target = int(tokens * rng.uniform(0.75, 1.25))
        parts: list[str] = []
        while sum(len(p.split()) for p in parts) < target * 0.7:  # ~1.3 tokens per word
            q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 30))) + "?"
            opts = "\n".join(f"{l.strip()}. " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))) for l in LETTERS)
            parts.append(f"Question: {q}\n{opts}\nAnswer: {rng.choice(LETTERS).strip()}")
        parts[-1] = parts[-1].rsplit(" ", 1)[0]  # the last question is unanswered: "Answer:"
        out.append(Prompt(text="\n\n".join(parts)))
    return out


def tokenizer_dir() -> Path:
    from auditlang.engines.embedded import resolve_embedded

    return Path(resolve_embedded("smollm2-135m-instruct"))


def shell_checkpoint(shape: str, tok: Path) -> tuple[str, Any]:
    """A one-layer checkpoint of ``shape`` (config + tokenizer + tiny weights); returns its folder
    and the full-depth config."""
    import torch
    import transformers

    base = transformers.AutoConfig.from_pretrained(tok)
    cfg = transformers.LlamaConfig(vocab_size=base.vocab_size, max_position_embeddings=8192,
                                   bos_token_id=base.bos_token_id, eos_token_id=base.eos_token_id,
                                   pad_token_id=getattr(base, "pad_token_id", None), **SHAPES[shape])
    shell = transformers.LlamaConfig(**{**cfg.to_dict(), "num_hidden_layers": 1})
    out = Path(tempfile.mkdtemp(prefix="bench-mfu-"))
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(shell).save_pretrained(out)
    for f in tok.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "generation_config")):
            shutil.copy(f, out / f.name)
    return str(out), cfg


def full_model(cfg: Any, device: str, dtype: Any, seed: int) -> Any:
    import torch
    import transformers

    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.LlamaForCausalLM._from_config(cfg, dtype=dtype)
    return model.eval()


def decoder_params(cfg: Any) -> int:
    h, i, L = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    hd = getattr(cfg, "head_dim", None) or h // cfg.num_attention_heads
    attn = h * hd * cfg.num_attention_heads * 2 + h * hd * cfg.num_key_value_heads * 2
    return L * (attn + 3 * h * i)


def useful_flops(cfg: Any, lengths: list[int]) -> float:
    n = decoder_params(cfg)
    h, L = cfg.hidden_size, cfg.num_hidden_layers
    return float(sum(2 * n * t + 2 * L * t * t * h + 2 * h * cfg.vocab_size for t in lengths))


def padded_tokens(lengths: list[int], batch: int) -> int:
    """Tokens computed by length-sorted batches of ``batch`` rows (both sides sort)."""
    s = sorted(lengths)
    return sum(max(s[i: i + batch]) * len(s[i: i + batch]) for i in range(0, len(s), batch))


def plain_loop(engine: HFEngine, texts: list[str], label_ids: list[int], batch: int) -> tuple[float, list[list[float]]]:
    """What a careful user writes: one batched tokenizer call, length-sorted left-padded batches,
    last-position log-softmax; timed from the texts to the logprobs on the host, like the engine.
    With ``--compile`` it calls the engine's compiled model (the same graphs, compiled once)."""
    import torch

    model, dev = engine._scoring_model(), engine.device
    right = engine.scoring_padding == "right"  # compile=true on a plain-head model: the compiled decoder
    out: dict[int, list[float]] = {}
    sync(torch, dev)
    t0 = time.perf_counter()
    encoded = engine.tokenizer(texts, add_special_tokens=True)["input_ids"]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    with torch.inference_mode():
        for s in range(0, len(order), batch):
            idx = order[s: s + batch]
            rows = [encoded[i] for i in idx]
            width = max(map(len, rows))
            if right:  # right padding, no mask, the head on each row's last position
                x = torch.full((len(rows), width), engine.pad_id, dtype=torch.long)
                for j, r in enumerate(rows):
                    x[j, : len(r)] = torch.tensor(r)
                last = torch.tensor([len(r) - 1 for r in rows], device=dev)
                with hf_scoring.causal_attention(engine.model):
                    h = model(input_ids=x.to(dev), use_cache=False, output_hidden_states=False).last_hidden_state
                logits = engine.model.lm_head(h[torch.arange(len(rows), device=dev), last])
                out.update(zip(idx, torch.log_softmax(logits.float(), -1)[:, label_ids].tolist()))
                continue
            x = torch.full((len(rows), width), engine.pad_id, dtype=torch.long)
            m = torch.zeros_like(x)
            for j, r in enumerate(rows):
                x[j, width - len(r):] = torch.tensor(r)
                m[j, width - len(r):] = 1
            pos = (m.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=x.to(dev), attention_mask=m.to(dev), position_ids=pos.to(dev), logits_to_keep=1,
                           output_hidden_states=False, use_cache=False).logits[:, -1]
            got = torch.log_softmax(logits.float(), -1)[:, label_ids].tolist()
            out.update(zip(idx, got))
    sync(torch, dev)
    return time.perf_counter() - t0, [out[i] for i in range(len(encoded))]


def sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama-1b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=1024)
    ap.add_argument("--prompt-tokens", type=int, default=512, help="mean prompt length (lengths spread +-25 %%)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats of each side, alternating; the best is reported")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument("--tokenizer", type=Path, default=None,
                    help="a folder with a tokenizer and its config.json (default: the embedded SmolLM2 checkpoint)")
    ap.add_argument("--compile", action="store_true",
                    help="load the engine with compile=true (torch.compile of the scoring forward); the plain loop "
                         "then calls the same compiled model")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)

    import torch
    import transformers

    tok = a.tokenizer or tokenizer_dir()
    shell, cfg = shell_checkpoint(a.shape, tok)
    engine = HFEngine(ModelConfig(name="mfu", engine="hf", path=shell, dtype=a.dtype, device=a.device,
                                  batch_size=a.batch_size, chat=False, options={"compile": True} if a.compile else {}))
    engine.model = full_model(cfg, engine.device, engine.dtype, a.seed)
    engine._vocab = cfg.vocab_size
    reqs = [Request.make("mfu", "choice_logprobs", p, choices=list(LETTERS)) for p in prompts(a.prompts, a.prompt_tokens, a.seed)]
    texts = [r.prompt.text for r in reqs]
    encoded = [engine.encode_prompt(r.prompt) for r in reqs]
    lengths = [len(e) for e in encoded]
    label_ids = [engine.tokenizer(x, add_special_tokens=False)["input_ids"][0] for x in LETTERS]

    t = time.perf_counter()
    list(engine.run(reqs[: a.batch_size]))  # warm-up: kernels, allocator (and the compile)
    plain_loop(engine, texts[: a.batch_size], label_ids, a.batch_size)
    warmup_s = time.perf_counter() - t
    eng_s: list[float] = []
    plain_s: list[float] = []
    for _ in range(a.repeats):
        sync(torch, engine.device)
        t = time.perf_counter()
        res = {r.request_id: r for r in engine.run(reqs)}
        sync(torch, engine.device)
        eng_s.append(time.perf_counter() - t)
        dt, plain_lp = plain_loop(engine, texts, label_ids, a.batch_size)
        plain_s.append(dt)
    errors = [r.error for r in res.values() if r.error]
    diff = max(abs(res[r.id].choice_logprobs[lab] - plain_lp[i][k]) for i, r in enumerate(reqs) if not res[r.id].error
               for k, lab in enumerate(LETTERS))
    argmax_same = sum(max(range(4), key=lambda k: res[r.id].choice_logprobs[LETTERS[k]]) == max(range(4), key=lambda k: plain_lp[i][k])
                      for i, r in enumerate(reqs) if not res[r.id].error)

    gpu = torch.cuda.get_device_name(0) if engine.device.startswith("cuda") else None
    peak = a.peak_tflops or next((v for k, v in PEAK_TFLOPS.items() if gpu and k in gpu), None)
    flops = useful_flops(cfg, lengths)
    pad_flops = flops * padded_tokens(lengths, a.batch_size) / sum(lengths)  # padded tokens at the mean per-token cost

    def mfu(seconds: float, f: float) -> float | None:
        return round(f / seconds / (peak * 1e12), 4) if peak else None

    e, p = min(eng_s), min(plain_s)
    report = {
        "shape": a.shape, "decoder_params": decoder_params(cfg), "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
        "vocab": cfg.vocab_size, "weights": "random (seeded; speed only)", "device": engine.device, "gpu": gpu, "dtype": a.dtype,
        "batch_size": a.batch_size, "prompts": a.prompts, "prompt_tokens_mean": round(sum(lengths) / len(lengths), 1),
        "prompt_tokens_total": sum(lengths), "padded_tokens_total": padded_tokens(lengths, a.batch_size),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "attn_implementation": getattr(engine.model.config, "_attn_implementation", None),
        "compile": a.compile, "scoring_padding": engine.scoring_padding, "warmup_s": round(warmup_s, 1),
        "engine_s": [round(x, 3) for x in eng_s], "plain_s": [round(x, 3) for x in plain_s],
        "engine_prompts_per_s": round(a.prompts / e, 1), "plain_prompts_per_s": round(a.prompts / p, 1),
        "engine_over_plain_throughput": round(p / e, 3),
        "peak_tflops": peak, "useful_tflop": round(flops / 1e12, 2),
        "engine_mfu": mfu(e, flops), "plain_mfu": mfu(p, flops),
        "engine_padded_mfu": mfu(e, pad_flops), "plain_padded_mfu": mfu(p, pad_flops),
        "max_abs_logprob_diff": diff, "argmax_agree": argmax_same, "engine_errors": len(errors),
        "first_error": errors[0] if errors else None,
    }
    print(f"{'side':<10}{'best s':>9}{'prompts/s':>11}{'MFU':>8}{'padded MFU':>12}")
    print(f"{'engine':<10}{e:>9.3f}{report['engine_prompts_per_s']:>11}{str(report['engine_mfu']):>8}{str(report['engine_padded_mfu']):>12}")
    print(f"{'plain':<10}{p:>9.3f}{report['plain_prompts_per_s']:>11}{str(report['plain_mfu']):>8}{str(report['plain_padded_mfu']):>12}")
    print(json.dumps(report))
    if a.out:
        a.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    engine.close()
    shutil.rmtree(shell, ignore_errors=True)
    return report


if __name__ == "__main__":
    main()
