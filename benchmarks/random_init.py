"""Llama-shaped checkpoints of the sizes users run, built on the GPU from a config (issue 36).

No >= 1B weights can reach the offline GPU machine, but a checkpoint of the right shape can be
built there in seconds: a ``LlamaConfig`` of the shape, random weights (seeded) created on the
device in the requested dtype, ``save_pretrained``, and SmolLM2's tokenizer files and chat
template beside it. Random weights almost never emit EOS, so every answer runs to max_tokens: an
upper bound on the work, the same for every engine (greedy agreement between engines means
nothing on such logits).

    python benchmarks/random_init.py 8b --out /tmp/rnd8b [--tokenizer DIR] [--dtype bfloat16]
    python benchmarks/random_init.py 1b --spec benchmarks/gpu_task/s000_smollm2_auto.audit

``bench_vllm_gpu.py`` and ``bench_gpu_spec.py`` take ``--random-init SHAPE``: they build (or reuse)
the checkpoint and run a copy of the spec whose first model points at it (:func:`spec_for`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# SmolLM2's vocabulary (49,152) for every shape, so its tokenizer serves them
SHAPES: dict[str, dict[str, Any]] = {
    "1b": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
           "num_key_value_heads": 8, "tie_word_embeddings": True},  # 1.07 B
    "8b": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "tie_word_embeddings": False},  # the Llama-3-8B shape: 7.38 B
}
TOKENIZER_FILES = ("tokenizer", "special_tokens", "chat_template", "generation_config", "vocab", "merges")


def default_tokenizer() -> Path:
    """The converted embedded SmolLM2-135M-Instruct checkpoint (its tokenizer and chat template)."""
    from auditlang.engines.embedded import resolve_embedded

    return Path(resolve_embedded("smollm2-135m-instruct"))


def build(shape: str, out: str | Path | None = None, tokenizer: str | Path | None = None, dtype: str = "bfloat16",
          device: str = "cuda", seed: int = 0) -> tuple[Path, dict[str, Any]]:
    """The checkpoint of ``shape`` in ``out`` (default /tmp/random-init/SHAPE-DTYPE; reused when
    it was built before with the same settings) and what was built: parameters, seconds."""
    if shape not in SHAPES:
        raise SystemExit(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
    out = Path(out or f"/tmp/random-init/{shape}-{dtype}")
    tok = Path(tokenizer) if tokenizer else default_tokenizer()
    want = {"shape": shape, "dtype": dtype, "seed": seed, **SHAPES[shape]}
    marker = out / "random_init.json"
    if marker.is_file() and {k: v for k, v in json.loads(marker.read_text()).items() if k in want} == want:
        return out, json.loads(marker.read_text())
    import torch
    import transformers

    t0 = time.perf_counter()
    src = json.loads((tok / "config.json").read_text()) if (tok / "config.json").is_file() else {}
    cfg = transformers.LlamaConfig(
        vocab_size=int(src.get("vocab_size", 49152)), max_position_embeddings=int(src.get("max_position_embeddings", 8192)),
        bos_token_id=src.get("bos_token_id", 1), eos_token_id=src.get("eos_token_id", 2),
        pad_token_id=src.get("pad_token_id"), rope_theta=float(src.get("rope_theta", 100000.0)),
        rms_norm_eps=float(src.get("rms_norm_eps", 1e-5)), **SHAPES[shape])
    torch.manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype)
    try:
        with torch.device(device):
            model = transformers.LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    built_s = time.perf_counter() - t0
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    for f in tok.iterdir():
        if f.is_file() and f.name.startswith(TOKENIZER_FILES):
            shutil.copy(f, out / f.name)
    info = {**want, "parameters": params, "parameters_b": round(params / 1e9, 2), "tokenizer_from": str(tok),
            "built_s": round(built_s, 1), "saved_s": round(time.perf_counter() - t0 - built_s, 1),
            "torch": torch.__version__, "transformers": transformers.__version__}
    marker.write_text(json.dumps(info, indent=1), encoding="utf-8")
    return out, info


def build_isolated(shape: str, tokenizer: str | Path | None = None, dtype: str = "bfloat16") -> tuple[Path, dict[str, Any]]:
    """:func:`build` in a child process, so the caller's process has not imported torch when it
    starts vLLM. vLLM forks its engine core unless torch came first (then the engine spawns it:
    a second Python importing torch and vLLM, 15-17 s of the 8 B start in session 14's runs),
    and ``auditc run`` itself loads no torch before vLLM: a benchmark that built the checkpoint
    in-process measured a start that users do not pay."""
    cmd = [sys.executable, str(Path(__file__).resolve()), shape, "--dtype", dtype]
    if tokenizer:
        cmd += ["--tokenizer", str(tokenizer)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    info = json.loads(out.strip().splitlines()[0])
    return Path(info.pop("checkpoint")), info


_MODEL = re.compile(r'^(model\s+\w+\s*=\s*)(embedded|hf|vllm)\("[^"]*"(.*)$', re.M)


def spec_for(spec: str | Path, ckpt: Path, info: dict[str, Any], out: str | Path | None = None) -> Path:
    """A copy of ``spec`` whose first model declaration loads ``ckpt`` (``embedded`` becomes
    ``hf``; ``vllm`` stays), in the checkpoint's dtype and with its ``size=`` in billions."""
    text = Path(spec).read_text(encoding="utf-8")
    m = _MODEL.search(text)
    if m is None:
        raise SystemExit(f"{spec}: no model declaration to point at {ckpt}")
    ctor = "vllm" if m.group(2) == "vllm" else "hf"
    rest = re.sub(r"dtype=\w+", f"dtype={info['dtype']}", m.group(3))
    rest = re.sub(r"size=[0-9.]+", f"size={info['parameters_b']}", rest)
    if "size=" not in rest:
        rest = rest.replace(")", f", size={info['parameters_b']})", 1)
    text = text[:m.start()] + f'{m.group(1)}{ctor}("{ckpt}"{rest}' + text[m.end():]
    dest = Path(out) if out else Path(f"/tmp/{Path(spec).name.split('.')[0]}_{info['shape']}.audit")
    dest.write_text(text, encoding="utf-8")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("--out")
    ap.add_argument("--tokenizer", help="a checkpoint dir whose tokenizer files are copied (default: embedded SmolLM2)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spec", help="also write a copy of this spec pointed at the checkpoint; prints its path")
    a = ap.parse_args(argv)
    ckpt, info = build(a.shape, a.out, a.tokenizer, a.dtype, a.device, a.seed)
    print(json.dumps({"checkpoint": str(ckpt), **info}))
    if a.spec:
        print(spec_for(a.spec, ckpt, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
