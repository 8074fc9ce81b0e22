"""A plain transformers script for the lm-eval comparison: label logprobs after each prompt.

``python plain_mc.py PROMPTS OUT MODEL_DIR [--batch N]``. PROMPTS is a JSON list of
``{"id", "prompt"}`` (the rendered prompts, written untimed by bench_lmeval.py from auditlang's
plan). Per item: the float32 log-softmax at the prompt's last position (``logits_to_keep=1``),
read at the first token of " A".." D". ``--batch 1`` is one forward per item, no padding;
``--batch N`` sorts prompts by length and left-pads batches of N with a mask and position ids.
Writes one JSON line per item: ``{"id", "logprobs": {"A": ..., ...}}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

LABELS = ("A", "B", "C", "D")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("prompts", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("model_dir")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    items = json.loads(args.prompts.read_text(encoding="utf-8"))
    tok = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    label_ids = [tok(" " + lab, add_special_tokens=False)["input_ids"][0] for lab in LABELS]
    enc = [tok(it["prompt"])["input_ids"] for it in items]
    order = sorted(range(len(items)), key=lambda i: len(enc[i])) if args.batch > 1 else list(range(len(items)))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    out: dict[int, list[float]] = {}
    with torch.inference_mode():
        for s in range(0, len(order), args.batch):
            idx = order[s : s + args.batch]
            width = max(len(enc[i]) for i in idx)
            ids = torch.tensor([[pad] * (width - len(enc[i])) + enc[i] for i in idx])
            mask = torch.tensor([[0] * (width - len(enc[i])) + [1] * len(enc[i]) for i in idx])
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits[:, -1]
            lps = torch.log_softmax(logits.float(), dim=-1)[:, label_ids].tolist()
            out.update(zip(idx, lps))
    with args.out.open("w", encoding="utf-8") as fh:
        for i, it in enumerate(items):
            fh.write(json.dumps({"id": it["id"], "logprobs": dict(zip(LABELS, out[i]))}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
