"""A whole spec through `auditc run` on a GPU, then the same unique requests through a plain loop.

Runs ``auditc run SPEC`` in this process (``auditlang.cli.main``: compile, plan, both stages
through the executor and the journal, scoring, metrics, report) and records, from the hf
engine it loads: wall time, the unique requests each ``engine.run`` call received (by kind),
the time spent inside ``engine.run``, generated tokens and the engine's generation counters
(row-steps per generated token, forwards, prefills). Then it sends the SAME unique requests,
with the same loaded model, through a plain transformers loop a user would write:

* ``generate``: length-sorted, left-padded batches of the model's ``batch_size`` (fewer rows
  when the kept logits would pass ~16 GB) through
  ``model.generate`` (greedy, or sampling with temperature / top_p / n as the request says),
  grouped by their generation parameters; ``output_logits`` when a top-k window is asked
  for, with the float32 log-softmax and top-k computed afterwards;
* ``choice_logprobs``: one forward per batch, log-softmax at the last position;
* ``constrained_choice`` / ``continuation_logprobs``: teacher forcing, one forward per batch
  of prompt + choice rows.

and compares every greedy generation token by token with the engine's (identical, or the
first position where they part). Prints a table and one JSON line (``--json-out`` writes it).

Usage (from the repository root; data from ../shared/data):
    python benchmarks/bench_gpu_spec.py SPEC --data-root ../shared/data [--out DIR] [--limit N]
        [--no-plain] [--json-out FILE]
The spec decides model, dtype, device and batch size. Needs torch + transformers (+ gguf for
the embedded models).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditlang.engines import hf as hf_mod  # noqa: E402
from auditlang.core.requests import Request, Result  # noqa: E402


class Recorder:
    """Wraps every HFEngine the run loads: times ``run`` and keeps requests and results."""

    def __init__(self) -> None:
        self.engines: list[Any] = []
        self.models: list[Any] = []
        self.calls: list[dict[str, Any]] = []
        self.requests: dict[str, Request] = {}
        self.results: dict[str, Result] = {}
        self.load_s = 0.0

    def install(self) -> None:
        rec, init, run = self, hf_mod.HFEngine.__init__, hf_mod.HFEngine.run

        def patched_init(engine: Any, *a: Any, **k: Any) -> None:
            t0 = time.perf_counter()
            init(engine, *a, **k)
            rec.load_s += time.perf_counter() - t0
            rec.engines.append(engine)
            rec.models.append(engine.model)  # the run closes the engine; the plain loop reuses its model

        def patched_run(engine: Any, requests: Any) -> Any:
            reqs = list(requests)
            torch = engine._torch
            t0 = time.perf_counter()
            out = list(run(engine, reqs))
            if engine.device.startswith("cuda"):
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            rec.calls.append({"n": len(reqs), "s": dt, "kinds": dict(Counter(r.kind for r in reqs))})
            for r in reqs:
                rec.requests[r.id] = r
            for r in out:
                rec.results[r.request_id] = r
            return iter(out)

        hf_mod.HFEngine.__init__ = patched_init  # type: ignore[method-assign]
        hf_mod.HFEngine.run = patched_run  # type: ignore[method-assign]


def generated_tokens(results: dict[str, Result]) -> int:
    return sum(len(s.tokens) for r in results.values() if r.kind == "generate" and not r.error for s in r.samples or [])


# ----------------------------------------------------------------------------- plain loop


def _batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def plain_loop(engine: Any, reqs: list[Request]) -> tuple[float, dict[str, list[list[int]]], int]:
    """The same requests the way a user would write them with transformers. Returns wall
    seconds, greedy token ids per request id, and generated tokens."""
    import torch

    model, dev, bs = engine.model, engine.device, int(engine.config.batch_size)
    pad = engine.pad_id
    eos = sorted(engine.eos_ids)
    greedy_out: dict[str, list[list[int]]] = {}
    tokens = 0

    def left_pad(rows: list[list[int]]) -> tuple[Any, Any]:
        w = max(map(len, rows))
        ids = torch.full((len(rows), w), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), w), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, w - len(r):] = torch.tensor(r)
            mask[i, w - len(r):] = 1
        return ids.to(dev), mask.to(dev)

    torch.cuda.synchronize() if dev.startswith("cuda") else None
    t0 = time.perf_counter()
    enc = dict(zip([r.id for r in reqs], engine._encode_all([r.prompt for r in reqs])))
    groups: dict[tuple[Any, ...], list[Request]] = defaultdict(list)
    for r in reqs:
        if r.kind == "generate":
            p = r.p
            key = ("generate", int(p["max_tokens"]), float(p.get("temperature", 0.0) or 0.0), float(p.get("top_p", 1.0)),
                   int(p.get("n", 1)), int(p.get("top_logprobs", 0) or 0) > 0)
        else:
            key = (r.kind,)
        groups[key].append(r)
    with torch.inference_mode():
        for key, items in groups.items():
            items.sort(key=lambda r: len(enc[r.id]))
            if key[0] == "generate":
                _, max_new, temp, top_p, n, want_top = key
                rows_cap = bs // max(1, n) if temp > 0 else bs
                if want_top:  # generate(output_logits=True) keeps every step's logits: at most ~16 GB of them
                    rows_cap = min(rows_cap, int(16e9 // (12 * max_new * engine._vocab)))
                for batch in _batches(items, max(1, rows_cap)):
                    ids, mask = left_pad([enc[r.id] for r in batch])
                    kw: dict[str, Any] = dict(max_new_tokens=max_new, pad_token_id=pad, eos_token_id=eos, return_dict_in_generate=True,
                                              output_logits=want_top)
                    if temp > 0:
                        kw.update(do_sample=True, temperature=temp, top_p=top_p, top_k=0, num_return_sequences=n)
                    else:
                        kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
                    g = model.generate(input_ids=ids, attention_mask=mask, **kw)
                    new = g.sequences[:, ids.shape[1]:]
                    if want_top:  # the per-step windows a user needs for token confidence
                        k = max(int(r.p.get("top_logprobs", 0) or 0) for r in batch)
                        lps = torch.log_softmax(torch.stack(g.logits, 1).float(), -1)
                        torch.topk(lps, k, dim=-1).values.cpu()
                    rows = new.cpu().tolist()
                    for j, r in enumerate(batch):
                        for s in range(n if temp > 0 else 1):
                            row = rows[j * (n if temp > 0 else 1) + s]
                            cut = next((i + 1 for i, t in enumerate(row) if t in engine.eos_ids), len(row))
                            row = row[:cut]
                            tokens += len(row)
                            if temp == 0:
                                greedy_out.setdefault(r.id, []).append(row)
            elif key[0] == "choice_logprobs":
                for batch in _batches(items, bs):
                    ids, mask = left_pad([enc[r.id] for r in batch])
                    pos = (mask.cumsum(-1) - 1).clamp(min=0)
                    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
                    lp = torch.log_softmax(out.logits[:, -1].float(), -1)
                    k = max(int(r.p.get("top_logprobs", 0) or 0) for r in batch)
                    if k:
                        torch.topk(lp, k, dim=-1).values.cpu()
                    lp[:, :8].cpu()
            else:  # constrained_choice / continuation_logprobs: teacher forcing
                rows: list[list[int]] = []
                for r in items:
                    conts = r.p["choices"] if r.kind == "constrained_choice" else [r.p["continuation"]]
                    for c in conts:
                        rows.append(enc[r.id] + engine._label_ids(c))
                rows.sort(key=len)
                for batch in _batches(rows, bs):
                    ids, mask = left_pad(batch)
                    pos = (mask.cumsum(-1) - 1).clamp(min=0)
                    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=8)
                    torch.log_softmax(out.logits.float(), -1).amax(-1).cpu()
    if dev.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - t0, greedy_out, tokens


def compare_greedy(reqs: list[Request], results: dict[str, Result], plain: dict[str, list[list[int]]], eos: frozenset[int]) -> dict[str, Any]:
    same = differ = 0
    first_diff: list[int] = []
    for r in reqs:
        if r.kind != "generate" or r.id not in plain or results[r.id].error:
            continue
        got = [t.token_id for t in results[r.id].samples[0].tokens]
        ref = plain[r.id][0]
        if got == ref:
            same += 1
        else:
            differ += 1
            first_diff.append(next((i for i, (a, b) in enumerate(zip(got, ref)) if a != b), min(len(got), len(ref))))
    return {"greedy_compared": same + differ, "greedy_identical": same, "greedy_differ": differ,
            "first_diff_positions": sorted(first_diff)[:50]}


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--data-root", required=True)
    ap.add_argument("--out", help="run directory (default: a fresh temporary one, removed afterwards)")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--no-plain", action="store_true", help="skip the plain loop")
    ap.add_argument("--json-out")
    ap.add_argument("--random-init", choices=["1b", "8b"], help="run the spec's first model as a Llama-shaped "
                    "checkpoint of this size built on the GPU (random weights, SmolLM2's tokenizer; random_init.py)")
    ap.add_argument("--tokenizer", help="with --random-init: a checkpoint dir to take the tokenizer from "
                    "(default: the embedded SmolLM2)")
    args = ap.parse_args(argv)
    random_init_info = None
    if args.random_init:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import random_init

        ckpt, random_init_info = random_init.build(args.random_init, tokenizer=args.tokenizer)
        args.spec = str(random_init.spec_for(args.spec, ckpt, random_init_info))
        print(f"random-init {args.random_init}: {random_init_info['parameters_b']} B parameters at {ckpt}; spec {args.spec}",
              flush=True)

    import torch

    from auditlang.cli import main as auditc

    rec = Recorder()
    rec.install()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_phases  # per-phase wall/CPU of the run (compile, plan, execute, score, report, ...)

    for sub in ("plan", "run", "report"):
        __import__(f"auditlang.cli.{sub}")
    bench_phases.install()
    tmp = None
    out_dir = args.out
    if out_dir is None:
        tmp = tempfile.mkdtemp(prefix="bench_gpu_spec_")
        out_dir = str(Path(tmp) / "run")
    cmd = ["run", args.spec, "--data-root", args.data_root, "--out", out_dir]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    t0 = time.perf_counter()
    rc = auditc(cmd)
    wall = time.perf_counter() - t0
    if not rec.engines:
        print(f"auditc run exited {rc} without loading an hf engine", file=sys.stderr)
        return 1
    engine = rec.engines[-1]
    engine.model = rec.models[-1]
    reqs = list(rec.requests.values())
    engine_s = sum(c["s"] for c in rec.calls)
    toks = generated_tokens(rec.results)
    kinds = dict(Counter(r.kind for r in reqs))
    report: dict[str, Any] = {
        "spec": args.spec, "auditc_rc": rc, "device": engine.fingerprint().get("device"),
        "dtype": str(engine.dtype).replace("torch.", ""), "batch_size": engine.config.batch_size,
        "torch": torch.__version__, "transformers": engine._transformers.__version__,
        "wall_s": round(wall, 2), "engine_load_s": round(rec.load_s, 2), "engine_run_s": round(engine_s, 2),
        "engine_calls": len(rec.calls), "unique_requests": len(reqs), "requests_by_kind": kinds,
        "requests_per_s_wall": round(len(reqs) / wall, 1), "requests_per_s_engine": round(len(reqs) / engine_s, 1),
        "generated_tokens": toks, "tokens_per_s_engine": round(toks / engine_s, 1),
        "errors": sum(1 for r in rec.results.values() if r.error),
        "gen_stats": engine.gen_stats.as_dict() if hasattr(engine, "gen_stats") else {"row_steps_per_token": None},
        "phases": {n: {k: round(v, 2) for k, v in st.items()} for n, st in bench_phases.STATS.items()},
    }
    if not args.no_plain:
        plain_s, greedy, plain_toks = plain_loop(engine, reqs)
        report.update({
            "plain_s": round(plain_s, 2), "plain_requests_per_s": round(len(reqs) / plain_s, 1),
            "plain_generated_tokens": plain_toks, "plain_tokens_per_s": round(plain_toks / plain_s, 1),
            "engine_over_plain": round(engine_s / plain_s, 3),
        })
        report.update(compare_greedy(reqs, rec.results, greedy, engine.eos_ids))
    rows = [("auditc run wall s", report["wall_s"]), ("engine load s", report["engine_load_s"]),
            ("engine.run s (all calls)", report["engine_run_s"]), ("unique requests", report["unique_requests"]),
            ("requests/s (wall / engine)", f"{report['requests_per_s_wall']} / {report['requests_per_s_engine']}"),
            ("generated tokens, tokens/s (engine)", f"{toks}, {report['tokens_per_s_engine']}"),
            ("row-steps per generated token", report["gen_stats"]["row_steps_per_token"])]
    if "plain_s" in report:
        rows += [("plain loop s", report["plain_s"]), ("plain requests/s", report["plain_requests_per_s"]),
                 ("plain tokens, tokens/s", f"{report['plain_generated_tokens']}, {report['plain_tokens_per_s']}"),
                 ("engine.run / plain", report["engine_over_plain"]),
                 ("greedy identical / compared", f"{report['greedy_identical']} / {report['greedy_compared']}")]
    print(f"\n{report['device']}  {report['dtype']}  batch {report['batch_size']}  requests {kinds}")
    for k, v in rows:
        print(f"  {k:<40} {v}")
    report["random_init"] = random_init_info
    run_file = Path(out_dir) / "run.json"
    if run_file.is_file():  # the batch per shape and every halving on out of memory (issue 36)
        run_info = json.loads(run_file.read_text())
        report["batch_sizing"] = run_info.get("batch_sizing")
        report["run_errors"] = run_info.get("last_run", {}).get("errors")
        print(f"  batch sizing: {json.dumps(report['batch_sizing'])}")
    line = json.dumps(report, sort_keys=True)
    print(line)
    if args.json_out:
        Path(args.json_out).write_text(line + "\n", encoding="utf-8")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if rc == 0 else rc


if __name__ == "__main__":
    raise SystemExit(main())
