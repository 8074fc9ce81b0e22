"""Throughput of the hf engine vs a plain batched transformers loop (same model, same prompts).

Two workloads on ARC-Challenge questions (../shared/data/arc_challenge.jsonl, or synthetic
questions from a seeded generator when the file is absent, e.g. on a GPU machine):

1. first-token scoring: ``choice_logprobs`` over A-D (engine) vs left-padded batches through
   ``model(...)`` + ``log_softmax`` at the last position (plain loop) -> prompts/s, plus the
   largest |difference| between the two sets of letter logprobs;
2. greedy generation of ``--gen-tokens`` tokens: engine ``generate`` vs ``model.generate``
   (do_sample=False) -> generated tokens/s.

Usage:
    python benchmarks/bench_hf_gpu.py --device cuda --dtype bfloat16 --batch-size 64 --items 1172
    python benchmarks/bench_hf_gpu.py --device cpu --dtype float32 --batch-size 8 --items 32 --gen-items 8
``--model`` takes anything the hf engine loads: an embedded name (default
smollm2-135m-instruct), a checkpoint directory or a .gguf file. ``--random-init`` builds the
model from that checkpoint's config with seeded random weights (only config + tokenizer files
are needed, so it runs where the weights cannot travel): it measures speed, not quality, and
the report says so. Prints a table and one JSON line.
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
from auditlang.engines.hf import HFEngine  # noqa: E402
from auditlang.core.requests import Message, Prompt, Request  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "arc_challenge.jsonl"
LETTERS = ("A", "B", "C", "D")


def load_items(n: int, seed: int) -> tuple[list[dict[str, Any]], str]:
    if DATA.is_file():
        with DATA.open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        rows = [r for r in rows if len(r["choices"]) == 4]
        return rows[:n], f"arc_challenge ({DATA})"
    rng = random.Random(seed)
    words = "energy plant water rock cell heat light sound force motion earth moon gas liquid".split()
    rows = []
    for _ in range(n):
        q = " ".join(rng.choice(words) for _ in range(rng.randint(12, 40))) + "?"
        rows.append({"question": q, "choices": [" ".join(rng.choice(words) for _ in range(rng.randint(2, 6))) for _ in range(4)]})
    return rows, f"synthetic (seed {seed})"


def make_prompt(item: dict[str, Any], chat: bool) -> Prompt:
    body = item["question"] + "\n" + "\n".join(f"{l}. {c}" for l, c in zip(LETTERS, item["choices"]))
    if chat:
        return Prompt(messages=(Message("user", body + "\nAnswer with the letter only."),))
    return Prompt(text="Question: " + body + "\nAnswer:")


def sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def plain_scoring(engine: HFEngine, prompts: list[Prompt], label_ids: list[int], batch: int) -> tuple[float, list[list[float]]]:
    """What a user would write: render (chat template) and tokenize each batch, left padding,
    last-position log-softmax. Timed like the engine: from prompts to logprobs on the host."""
    import torch

    model, dev, tok = engine.model, engine.device, engine.tokenizer
    out: list[list[float]] = []
    sync(torch, dev)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(prompts), batch):
            texts = [engine.render_prompt(p) for p in prompts[i : i + batch]]
            chunk = tok(texts, add_special_tokens=prompts[i].text is not None)["input_ids"]
            width = max(map(len, chunk))
            x = torch.full((len(chunk), width), engine.pad_id, dtype=torch.long)
            m = torch.zeros_like(x)
            for j, r in enumerate(chunk):
                x[j, width - len(r):] = torch.tensor(r)
                m[j, width - len(r):] = 1
            pos = (m.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=x.to(dev), attention_mask=m.to(dev), position_ids=pos.to(dev), logits_to_keep=1).logits[:, -1]
            out.extend(torch.log_softmax(logits.float(), -1)[:, label_ids].tolist())
    sync(torch, dev)
    return time.perf_counter() - t0, out


def plain_generate(engine: HFEngine, prompts: list[Prompt], new: int, batch: int) -> tuple[float, int]:
    import torch

    model, dev, tok, done = engine.model, engine.device, engine.tokenizer, 0
    sync(torch, dev)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(prompts), batch):
            texts = [engine.render_prompt(p) for p in prompts[i : i + batch]]
            chunk = tok(texts, add_special_tokens=prompts[i].text is not None)["input_ids"]
            width = max(map(len, chunk))
            x = torch.full((len(chunk), width), engine.pad_id, dtype=torch.long)
            m = torch.zeros_like(x)
            for j, r in enumerate(chunk):
                x[j, width - len(r):] = torch.tensor(r)
                m[j, width - len(r):] = 1
            g = model.generate(input_ids=x.to(dev), attention_mask=m.to(dev), max_new_tokens=new, min_new_tokens=new,
                               do_sample=False, pad_token_id=engine.pad_id)
            done += (g.shape[1] - width) * len(chunk)
    sync(torch, dev)
    return time.perf_counter() - t0, done


def random_checkpoint(path: str, seed: int) -> str:
    """A checkpoint dir with the same config and tokenizer as ``path`` but seeded random weights."""
    import torch
    import transformers

    from auditlang.engines.embedded import is_embedded, resolve_embedded

    src = resolve_embedded(path) if is_embedded(path) else Path(path)
    out = Path(tempfile.mkdtemp(prefix="bench-random-"))
    torch.manual_seed(seed)
    cfg = transformers.AutoConfig.from_pretrained(src)
    transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).save_pretrained(out)
    for f in src.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template", "generation_config")):
            shutil.copy(f, out / f.name)
    return str(out)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--chat", choices=["auto", "on", "off"], default="auto", help="auto: chat if the tokenizer has a template")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--items", type=int, default=1172)
    ap.add_argument("--gen-items", type=int, default=256)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats; the best is reported")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--random-init", action="store_true", help="seeded random weights from the model's config (speed only)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)

    import torch
    import transformers

    if a.threads:
        torch.set_num_threads(a.threads)
    path = random_checkpoint(a.model, a.seed) if a.random_init else a.model
    t0 = time.perf_counter()
    engine = HFEngine(ModelConfig(name="bench", engine="hf", path=path, dtype=a.dtype, device=a.device, batch_size=a.batch_size,
                                  chat=a.chat != "off"))
    load_s = time.perf_counter() - t0
    chat = a.chat == "on" or (a.chat == "auto" and bool(engine.tokenizer.chat_template))
    items, source = load_items(max(a.items, a.gen_items), a.seed)
    prompts = [make_prompt(it, chat) for it in items]
    labels = list(LETTERS) if chat else [" " + x for x in LETTERS]
    label_ids = [engine.tokenizer(x, add_special_tokens=False)["input_ids"][0] for x in labels]
    score_reqs = [Request.make("bench", "choice_logprobs", p, choices=labels) for p in prompts[: a.items]]
    gen_reqs = [Request.make("bench", "generate", p, max_tokens=a.gen_tokens) for p in prompts[: a.gen_items]]

    list(engine.run(score_reqs[: a.batch_size]))  # warm-up (CUDA kernels, allocator)
    plain_scoring(engine, prompts[: a.batch_size], label_ids, a.batch_size)

    eng_s, plain_s = [], []
    for _ in range(a.repeats):
        sync(torch, engine.device)
        t = time.perf_counter()
        res = {r.request_id: r for r in engine.run(score_reqs)}
        sync(torch, engine.device)
        eng_s.append(time.perf_counter() - t)
        dt, plain_lp = plain_scoring(engine, prompts[: a.items], label_ids, a.batch_size)
        plain_s.append(dt)
    diff = max(abs(res[r.id].choice_logprobs[lab] - plain_lp[i][k]) for i, r in enumerate(score_reqs) for k, lab in enumerate(labels))
    errors = sum(1 for r in res.values() if r.error)

    gen_eng, gen_plain, eng_tokens, plain_tokens = [], [], 0, 0
    if a.gen_items:
        for _ in range(a.repeats):
            sync(torch, engine.device)
            t = time.perf_counter()
            out = list(engine.run(gen_reqs))
            sync(torch, engine.device)
            gen_eng.append(time.perf_counter() - t)
            eng_tokens = sum(len(r.samples[0].tokens) for r in out if r.samples)
            dt, plain_tokens = plain_generate(engine, prompts[: a.gen_items], a.gen_tokens, a.batch_size)
            gen_plain.append(dt)

    gpu = torch.cuda.get_device_name(0) if engine.device.startswith("cuda") else None
    report = {
        "model": a.model, "weights": "random (seeded; speed only)" if a.random_init else "real", "device": engine.device, "gpu": gpu, "dtype": a.dtype, "batch_size": a.batch_size,
        "threads": torch.get_num_threads(), "torch": torch.__version__, "transformers": transformers.__version__, "data": source, "chat": chat,
        "load_s": round(load_s, 2),
        "scoring_items": a.items,
        "engine_prompts_per_s": round(a.items / min(eng_s), 1),
        "plain_prompts_per_s": round(a.items / min(plain_s), 1),
        "max_abs_logprob_diff": diff, "engine_errors": errors,
        "gen_items": a.gen_items, "gen_tokens": a.gen_tokens,
        "engine_gen_tokens_per_s": round(eng_tokens / min(gen_eng), 1) if gen_eng else None,
        "plain_gen_tokens_per_s": round(plain_tokens / min(gen_plain), 1) if gen_plain else None,
        "note": "engine generation stops at end-of-sequence; model.generate is forced to gen_tokens (min_new_tokens)",
    }
    print(f"{'workload':<28}{'engine':>12}{'plain loop':>14}")
    print(f"{'scoring (prompts/s)':<28}{report['engine_prompts_per_s']:>12}{report['plain_prompts_per_s']:>14}")
    if gen_eng:
        print(f"{'greedy generation (tok/s)':<28}{report['engine_gen_tokens_per_s']:>12}{report['plain_gen_tokens_per_s']:>14}")
    print(json.dumps(report))
    if a.out:
        a.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    engine.close()
    if a.random_init:
        shutil.rmtree(path, ignore_errors=True)
    return report


if __name__ == "__main__":
    main()
