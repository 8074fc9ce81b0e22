"""Issue 22's fixed costs of `auditc run` around the engine, on a CPU, without a model.

Runs the real `auditc run` path in this process (the CLI's main, as `bench_phases.py` does, with its
phase wrappers) on the study-000 design (`gpu_task/s000_smollm2_auto.audit`: 5 datasets x 300 items x
5 variants x 4 protocols + the repair audit) with a synthetic engine in place of the model: results
shaped as the vLLM engine builds them (`engines/vllm_engine.py` `_build_generate`, `_build_choice`,
`_build_constrained`, `_sample`): greedy generations of 1-32 tokens with per-token logprobs where the
request asks for them, first-token top-k windows of the request's k (200 in s000), verbal follow-ups
that state a parsable confidence most of the time, constrained choices. Every result is seeded by its
request id, so two runs of the same code produce the same journal. The engine's own time is ~0 here:
what is left is the run's fixed work (planning, stage-2 building, journal commits, scoring, report).

Usage (from the repository root):

    python benchmarks/bench_fixed_costs.py [--limit N] [--json FILE] [--keep DIR] [--repeat K] [--pace S]

``--pace S`` paces the synthetic engine at S seconds per request on a thread of its own (the GIL
released while it "computes"), as vLLM's separate engine core is, so the run's own work overlaps
an engine that takes time (default 0, or ``$AUDITLANG_BENCH_PACE``). ``--keep DIR`` keeps the
run directory (to diff records, cells.csv and the report between two checkouts); ``--repeat K``
runs K times in fresh subprocesses and reports each phase's median.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from auditlang.core.requests import Request, Result

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC_SRC = HERE / "gpu_task" / "s000_smollm2_auto.audit"
DATA_ROOT = Path(os.environ.get("AUDITLANG_BENCH_DATA", ROOT.parent / "shared" / "data"))

# extra phases (finer than bench_phases' defaults); the first that exists is wrapped
EXTRA_PHASES = [
    ("journal reads", "auditlang.store.journal:Journal.get_many"),
]

PACE_S = float(os.environ.get("AUDITLANG_BENCH_PACE", "0") or 0)  # --pace (or the variable): engine s per request
PACE_STATS = {"busy_s": 0.0, "stream_s": 0.0, "calls": 0}

LETTERS = [chr(ord("A") + i) for i in range(10)]
VOCAB = [f" w{i}" for i in range(3000)] + [" the", " answer", " is", ".", ",", "\n", " because", " of"]


def _rng(req_id: str) -> random.Random:
    return random.Random(int(hashlib.sha256(req_id.encode()).hexdigest()[:16], 16))


def _tid(tok: str) -> int:
    return int(hashlib.md5(tok.encode()).hexdigest()[:6], 16) % 49152


def _window(rng: random.Random, k: int, first: str | None) -> dict[str, float]:
    """k entries token -> logprob, highest first, as `VLLMEngine._window` returns them."""
    if k <= 0:
        return {}
    toks: list[str] = []
    if first is not None:
        toks.append(first)
        toks += [x for x in LETTERS if x != first]
        toks += [" " + x for x in LETTERS]
    seen = set(toks)
    while len(toks) < k:
        t = VOCAB[rng.randrange(len(VOCAB))]
        if t not in seen:
            seen.add(t)
            toks.append(t)
    toks = toks[:k]
    # a log-softmax window: the k best of a distribution whose tail holds the rest of the mass
    w = sorted((rng.random() ** 4 for _ in toks), reverse=True)
    scale = rng.uniform(0.5, 0.98) / sum(w)
    return {t: math.log(x * scale) for t, x in zip(toks, w)}


class SyntheticEngine:
    """vLLM-shaped results without a model (see the module docstring)."""

    streams = True  # as the vLLM engine: a whole stage per run() call, committed as results stream
    call_size = 256  # the executor commits every 256 results, as it does for vLLM

    def __init__(self, config) -> None:
        self.config = config

    def capabilities(self) -> frozenset[str]:
        from auditlang.core.requests import REQUEST_KINDS

        return frozenset(REQUEST_KINDS)

    def fingerprint(self) -> dict[str, Any]:
        return {"engine": "synthetic-vllm-shaped", "model": self.config.path}

    def close(self) -> None:
        pass

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        if PACE_S > 0:
            yield from self._paced(requests)
            return
        for req in requests:
            yield self.answer(req)

    def _paced(self, requests: Iterable[Request]) -> Iterator[Result]:
        """As vLLM's engine core, a process of its own: a "core" thread serves the requests added
        so far, ``PACE_S`` seconds per request (GIL released, as a GPU step is), and keeps working
        while the caller commits; it idles only when nothing is queued (follow-ups not yet built).
        The caller's thread builds each Result, as the vLLM engine converts its outputs."""
        import queue
        import threading
        import time

        from auditlang.core.engine import Feed

        feed = requests if isinstance(requests, Feed) else Feed(requests)
        todo: queue.Queue = queue.Queue()
        done: queue.Queue = queue.Queue()

        def core() -> None:
            while (req := todo.get()) is not None:
                t = time.perf_counter()
                time.sleep(PACE_S)
                PACE_STATS["busy_s"] += time.perf_counter() - t
                done.put(req)

        worker = threading.Thread(target=core, daemon=True)
        worker.start()
        t0, in_flight = time.perf_counter(), 0
        try:
            while True:
                for r in feed.take():
                    todo.put(r)
                    in_flight += 1
                if not in_flight:
                    if feed.refill():
                        continue
                    break
                req = done.get()
                in_flight -= 1
                yield self.answer(req)
        finally:
            todo.put(None)
            PACE_STATS["stream_s"] += time.perf_counter() - t0
            PACE_STATS["calls"] += 1

    # -- per kind
    def answer(self, req):
        from auditlang.core.requests import Result

        rng = _rng(req.id)
        p = req.p
        if req.kind == "generate":
            return self._generate(req, p, rng)
        if req.kind == "choice_logprobs":
            choices = list(p["choices"])
            lps = {c: -rng.expovariate(0.7) for c in choices}
            k = int(p.get("top_logprobs", 0) or 0)
            return Result(request_id=req.id, kind=req.kind, choice_logprobs=lps,
                          top_logprobs=_window(rng, k, max(lps, key=lps.get)) if k else {},
                          meta={"prompt_tokens": 200, "label_token_ids": {c: _tid(c) for c in choices}})
        if req.kind == "constrained_choice":
            choices = list(p["choices"])
            return Result(request_id=req.id, kind=req.kind, choice=choices[rng.randrange(len(choices))],
                          meta={"prompt_tokens": 200, "rule": "greedy decoding under a choice grammar (vLLM structured outputs)"})
        if req.kind == "continuation_logprobs":
            from auditlang.core.requests import TokenLogprob

            c = str(p["continuation"])
            return Result(request_id=req.id, kind=req.kind,
                          continuation=[TokenLogprob(c, _tid(c), -rng.expovariate(1.0))])
        return Result(request_id=req.id, kind=req.kind, hidden_state=[rng.random() for _ in range(576)])

    def _generate(self, req, p, rng: random.Random):
        from auditlang.core.requests import Result, Sample, TokenLogprob

        max_tokens = int(p["max_tokens"])
        k = int(p.get("top_logprobs", 0) or 0)
        first_k = int(p.get("first_top_logprobs", 0) or 0)
        msgs = req.prompt.messages or ()
        followup = len(msgs) >= 3 and msgs[-1].role == "user"
        if followup:
            last = msgs[-1].content
            u = rng.random()
            if u < 0.85:
                toks = [f"{rng.randrange(0, 101)}", "%"] if "%" in last else ["0", ".", f"{rng.randrange(0, 10)}"]
            elif u < 0.95:
                toks = [" I", " am", " confident", "."]
            else:
                toks = [" 0", ".", "9", " or", " so"]
        else:
            letter = LETTERS[min(int(rng.expovariate(0.6)), 9)]
            n = rng.randint(1, 32)
            toks = ([letter] if rng.random() < 0.8 else [" The", " answer", " is", f" {letter}"])
            toks += [VOCAB[rng.randrange(len(VOCAB))] for _ in range(max(0, n - len(toks)))]
        toks = toks[:max_tokens]
        tokens = []
        for i, t in enumerate(toks):
            lp = -rng.expovariate(2.0)
            top = _window(rng, k, t) if k else {}
            if i == 0 and first_k > k:
                top = _window(rng, first_k, t)
            lp = top.get(t, lp)
            tokens.append(TokenLogprob(t, _tid(t), lp, top))
        reason = "length" if len(toks) >= max_tokens else "stop"
        sample = Sample(text="".join(toks), tokens=tokens, finish_reason=reason)
        n = int(p.get("n", 1) or 1)
        samples = [sample] + [Sample(sample.text, [TokenLogprob(t.token, t.token_id, t.logprob, dict(t.top)) for t in sample.tokens],
                                     sample.finish_reason) for _ in range(n - 1)]
        return Result(request_id=req.id, kind=req.kind, samples=samples,
                      meta={"prompt_tokens": 150 + rng.randrange(300), "completion_tokens": [len(s.tokens) for s in samples]})


def install_engine() -> None:
    """The `hf` engine name (the spec's `embedded(...)` model) loads SyntheticEngine."""
    from auditlang.core.registry import REGISTRY

    mod = types.ModuleType("auditlang_bench_synthetic_engine")
    mod.SyntheticEngine = SyntheticEngine  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    hf = REGISTRY.get("engine", "hf")
    REGISTRY._entries["engine"]["hf"] = dataclasses.replace(hf, impl=f"{mod.__name__}:SyntheticEngine")


def one_run(limit: int | None, json_out: Path | None, keep: Path | None) -> int:
    sys.path.insert(0, str(HERE))
    import bench_phases  # noqa: E402  (the phase wrappers and the in-process CLI)

    for ph in EXTRA_PHASES:
        if ph not in bench_phases.PHASES:
            bench_phases.PHASES.append(ph)
    install_engine()
    work = Path(tempfile.mkdtemp(prefix="bench_fixed_"))
    spec = work / "s000_fixed.audit"
    spec.write_text(SPEC_SRC.read_text(encoding="utf-8"), encoding="utf-8")
    out = keep if keep is not None else work / "run"
    if keep is not None and keep.exists():
        shutil.rmtree(keep)
    os.environ.pop("AUDITLANG_CACHE_DIR", None)  # no response cache: a fresh run, as on the GPU
    argv = (["--json", str(json_out)] if json_out else []) + [
        "--", "run", str(spec), "--data-root", str(DATA_ROOT), "--out", str(out), "--display", "none"]
    if limit:
        argv += ["--limit", str(limit)]
    try:
        return bench_phases.main(argv)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, help="items per dataset (default: the design's 300)")
    ap.add_argument("--json", type=Path, help="write the phases (or, with --repeat, each run and the medians) as JSON")
    ap.add_argument("--keep", type=Path, help="keep the run directory here")
    ap.add_argument("--repeat", type=int, default=1, help="runs in fresh processes; the medians are reported")
    ap.add_argument("--pace", type=float, default=None, metavar="S",
                    help="engine seconds per request on the engine's own thread (default 0 or $AUDITLANG_BENCH_PACE)")
    args = ap.parse_args(argv)
    global PACE_S
    if args.pace is not None:
        if args.pace < 0:
            ap.error("--pace must be >= 0")
        PACE_S = args.pace
    if args.repeat <= 1:
        return one_run(args.limit, args.json, args.keep)
    runs = []
    with tempfile.TemporaryDirectory() as td:
        for i in range(args.repeat):
            j = Path(td) / f"r{i}.json"
            cmd = [sys.executable, __file__, "--json", str(j), "--pace", str(PACE_S)]
            cmd += ["--limit", str(args.limit)] if args.limit else []
            if args.keep and i == args.repeat - 1:
                cmd += ["--keep", str(args.keep)]
            subprocess.run(cmd, check=True)
            runs.append(json.loads(j.read_text(encoding="utf-8")))
    names = [p["phase"] for p in runs[0]["phases"]]
    med = []
    for n in names:
        rows = [p for r in runs for p in r["phases"] if p["phase"] == n]
        med.append({"phase": n, "calls": rows[0]["calls"],
                    "cpu_s": statistics.median(p["cpu_s"] for p in rows),
                    "wall_s": statistics.median(p["wall_s"] for p in rows),
                    "wall_s_all": [round(p["wall_s"], 3) for p in rows]})
    print(f"\nmedians of {args.repeat} runs (limit {args.limit or 'none'})", file=sys.stderr)
    print(f"{'phase':<28} {'calls':>5} {'CPU s':>8} {'wall s':>8}  walls", file=sys.stderr)
    for m in med:
        print(f"{m['phase']:<28} {m['calls']:>5} {m['cpu_s']:>8.2f} {m['wall_s']:>8.2f}  {m['wall_s_all']}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"limit": args.limit, "repeat": args.repeat, "medians": med, "runs": runs}, indent=1),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
