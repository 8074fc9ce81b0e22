"""device="cuda:N" on a machine with 2+ GPUs: spec models with device="cuda:1" and "cuda:0",
batch_size=auto, a SmolLM2-shaped model with seeded random weights (speed and placement, not
quality). Prints where the weights landed, the fingerprints, whether both devices give the same
greedy tokens, and the error for an index the machine lacks.

Usage: python benchmarks/gpu_task/check_cuda_n.py DIR  (DIR: config.json + tokenizer files of
the converted embedded SmolLM2 checkpoint, without its weights)
"""
import shutil, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch, transformers
tok = Path(sys.argv[1])
cfg = transformers.AutoConfig.from_pretrained(tok)
torch.manual_seed(0)
m = transformers.AutoModelForCausalLM.from_config(cfg)
m.save_pretrained("/tmp/rnd")
for f in tok.iterdir():
    shutil.copy(f, "/tmp/rnd/")
from auditlang.resolve import compile_spec
from auditlang.execute.runner import model_config
from auditlang.engines.registry import load_engine
from auditlang.core.requests import Message, Prompt, Request
Path("/tmp/s.audit").write_text('model a = hf("/tmp/rnd", device="cuda:1", batch_size=auto, dtype=float32)\nmodel b = hf("/tmp/rnd", device="cuda:0", batch_size=auto, dtype=float32)\n')
spec = compile_spec(Path("/tmp/s.audit"))
outs = {}
for mid in ("a", "b"):
    c = model_config(spec, mid)
    print(mid, c.device, c.batch_size)
    e = load_engine(c)
    reqs = [Request.make(mid, "generate", Prompt(messages=(Message("user", f"question {i} " * (i % 7 + 1)),)), max_tokens=5 + i % 20, temperature=0.0, top_logprobs=2) for i in range(300)]
    t = time.perf_counter(); res = {r.request_id: r for r in e.run(reqs)}; dt = time.perf_counter() - t
    outs[mid] = [[t.token_id for t in res[r.id].samples[0].tokens] for r in reqs]
    print(mid, "fp", {k: e.fingerprint()[k] for k in ("device", "batch_size_auto")}, "cfg batch", e.config.batch_size, "call_size", e.call_size,
          "mem GB per device", [round(torch.cuda.memory_allocated(i) / 1e9, 3) for i in range(torch.cuda.device_count())],
          "errors", sum(1 for r in res.values() if r.error), "s", round(dt, 2), e.gen_stats.as_dict())
    e.close(); del e; torch.cuda.empty_cache()
print("same tokens cuda:1 vs cuda:0:", outs["a"] == [[x for x in o] for o in outs["b"]], sum(a == b for a, b in zip(outs["a"], outs["b"])), "/", len(outs["a"]))
c = model_config(compile_spec(Path("/tmp/s.audit")), "a")
try:
    load_engine(type(c)(**{**c.__dict__, "device": "cuda:7"}))
except Exception as ex:  # noqa: BLE001  (a probe: print whatever the engine raises)
    print("cuda:7 ->", type(ex).__name__, ex, getattr(ex, "hint", None))
