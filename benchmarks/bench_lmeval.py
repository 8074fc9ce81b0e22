"""auditlang vs lm-evaluation-harness on the same multiple-choice token-confidence audit.

Both tools score 200 ARC-Challenge items (``../shared/data/arc_challenge.jsonl``, sample
``random.Random(42).sample(range(1172), 200)``) with SmolLM2-135M-Instruct in float32 on the CPU,
raw text (no chat template), the same prompt string, and the option letters as choices:

* auditlang: ``auditc run benchmarks/lmeval_task/arc_tokconf.audit`` (a ``token_prob(window=full)``
  protocol: one ``choice_logprobs`` request per item, the full-vocabulary logprob of " A".." D"
  after the prompt; plus the planner's answer generation for the evaluator, whose first decoding
  step the hf engine shares with the label logprobs: one prefill per item, as lm-eval). The spec
  has ``max_tokens=1``; ``arc_tokconf_budget32.audit`` is the same audit at the default answer
  budget of 32 tokens. Neither has a ``report`` statement, so the run writes the full default
  report (tables, comparisons, checklist, disclosure, figures, HTML), as a user's run does.
* lm-eval: ``lm_eval --model hf --tasks arc_tokconf_lmeval --include_path benchmarks/lmeval_task``
  (``output_type: multiple_choice`` with choices A-D and ``target_delimiter: " "``: the
  loglikelihood of " A".." D" after the same prompt), run from a separate virtual environment.

The predicted letter of each tool is the argmax over the four label logprobs (first of equal
maxima, in label order, as ``numpy.argmax`` in lm-eval). The script times both commands as
subprocesses with the same thread settings (fresh output folders; the embedded model's
conversion is cached beforehand and not timed; engine load is timed), alternates which tool runs
first, and checks item by item that the prompts are identical and that the predictions agree.

Usage (from the repository root, with the project's Python)::

    python benchmarks/bench_lmeval.py --threads 1 --repeats 3 --json-out /tmp/bench_lmeval.json
    python benchmarks/bench_lmeval.py --spec benchmarks/lmeval_task/arc_tokconf_budget32.audit --threads 1 ...

``--lmeval-python`` names the interpreter of the venv holding lm-eval (default
``/work/venv-lmeval/bin/python``). ``--profile`` additionally runs auditlang once under cProfile
and prints where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TASK_DIR = REPO / "benchmarks" / "lmeval_task"
SPEC = TASK_DIR / "arc_tokconf.audit"
TASK = "arc_tokconf_lmeval"
MODEL = "smollm2-135m-instruct"
LABELS = ("A", "B", "C", "D")
LMEVAL_BATCH = 16  # = the spec's batch_size, so both tools batch 16 prompts per forward
# lm-eval's hf backend pads loglikelihood batches on the right and passes no attention mask
# (lm_eval/models/huggingface.py, _loglikelihood_tokens: pad_and_concat(..., padding_side="right"));
# auditlang's hf engine pads on the left with a mask and position ids (its fingerprint says so).
LMEVAL_PADDING = "right"


@dataclass
class Timing:
    tool: str
    wall_s: float
    cpu_s: float  # user + sys of the subprocess tree
    load_before: float  # 1-minute load average
    load_after: float


@dataclass
class Repeat:
    index: int
    auditlang: Timing
    lmeval: Timing
    ratio_wall: float  # auditlang / lm-eval
    ratio_cpu: float
    n_items: int
    agree: int
    prompts_identical: int
    max_abs_logprob_diff: float
    pred_column_agree: int  # auditlang's evaluator `pred` (first_char of the greedy token) vs lm-eval
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    plain: dict[str, Timing] = field(default_factory=dict)  # plain transformers scripts (--plain)
    plain_agree: dict[str, int] = field(default_factory=dict)  # their predictions vs lm-eval's


def fail(msg: str, hint: str | None = None) -> None:
    print(f"bench_lmeval: error: {msg}" + (f"\n  hint: {hint}" if hint else ""), file=sys.stderr)
    raise SystemExit(2)


def thread_env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=str(REPO))
    if threads:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[k] = str(threads)
    return env


def timed(tool: str, cmd: list[str], env: dict[str, str], log: Path) -> Timing:
    """Run ``cmd`` from the repository root; wall and CPU time of the whole subprocess tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as fh:
        rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        fail(f"{tool} exited with status {rc}; last output:\n{tail}", f"full log: {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(tool, wall, cpu, load0, os.getloadavg()[0])


def argmax_label(lps: dict[str, float]) -> str:
    """First label of the maximum logprob, in label order (``numpy.argmax`` semantics)."""
    best = None
    for lab in LABELS:
        if lab in lps and (best is None or lps[lab] > lps[best]):
            best = lab
    if best is None:
        raise ValueError(f"no label logprobs in {lps!r}")
    return best


def read_auditlang(run_dir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """item id -> {prompt, logprobs (label -> logprob), pred}, and the engine fingerprint."""
    import pandas as pd

    records = pd.read_parquet(run_dir / "records.parquet")
    con = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        fps = [json.loads(r[0]) for r in con.execute("SELECT fingerprint FROM engines")]
        rows = con.execute("SELECT q.request_id, q.request, r.result FROM requests q JOIN results r "
                           "USING (request_id, fp_hash) WHERE q.kind = 'choice_logprobs'").fetchall()
    finally:
        con.close()
    if len(fps) != 1:
        fail(f"expected one engine fingerprint in {run_dir}, found {len(fps)}")
    by_req = {rid: (json.loads(req), json.loads(res)) for rid, req, res in rows}
    out: dict[str, dict[str, Any]] = {}
    for rec in records.itertuples():
        rid = json.loads(rec.request_ids).get("choice")
        if rid not in by_req:
            fail(f"record of item {rec.item_id} has no choice_logprobs result in the journal")
        req, res = by_req[rid]
        if res.get("error"):
            fail(f"auditlang request for item {rec.item_id} failed: {res['error']}")
        lps = {k.strip(): float(v) for k, v in res["choice_logprobs"].items()}
        out[str(rec.item_id)] = {"prompt": req["prompt"]["text"], "logprobs": lps,
                                 "pred": None if pd.isna(rec.pred) else rec.pred}
    return out, fps[0]


def read_lmeval(out_dir: Path) -> dict[str, dict[str, Any]]:
    """item id -> {prompt, logprobs (label -> loglikelihood)} from lm-eval's --log_samples file."""
    files = sorted(out_dir.rglob(f"samples_{TASK}_*.jsonl"))
    if len(files) != 1:
        fail(f"expected one lm-eval samples file under {out_dir}, found {len(files)}")
    out: dict[str, dict[str, Any]] = {}
    for line in files[0].read_text(encoding="utf-8").splitlines():
        s = json.loads(line)
        args = [s["arguments"][f"gen_args_{i}"] for i in range(len(s["arguments"]))]
        prompts = {a["arg_0"] for a in args}
        if len(prompts) != 1:
            fail(f"lm-eval sent different contexts for the choices of item {s['doc']['id']}")
        lps = {a["arg_1"].strip(): float(r[0]) for a, r in zip(args, s["filtered_resps"])}
        out[str(s["doc"]["id"])] = {"prompt": prompts.pop(), "logprobs": lps}
    return out


def compare(al: dict[str, dict[str, Any]], lm: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if set(al) != set(lm):
        fail(f"the tools scored different items ({len(set(al) ^ set(lm))} differ)",
             "utils.SAMPLE/SEED in benchmarks/lmeval_task must match the spec's dataset")
    agree = prompts = pred_agree = 0
    max_diff = 0.0
    dis: list[dict[str, Any]] = []
    for iid in sorted(al):
        a, m = al[iid], lm[iid]
        prompts += a["prompt"] == m["prompt"]
        la, lm_ = argmax_label(a["logprobs"]), argmax_label(m["logprobs"])
        agree += la == lm_
        pred_agree += a["pred"] == lm_
        max_diff = max(max_diff, max(abs(a["logprobs"][k] - m["logprobs"][k]) for k in LABELS))
        if la != lm_:
            dis.append({"id": iid, "auditlang": la, "lmeval": lm_, "auditlang_logprobs": a["logprobs"],
                        "lmeval_logprobs": m["logprobs"]})
    return {"n_items": len(al), "agree": agree, "prompts_identical": prompts, "max_abs_logprob_diff": max_diff,
            "pred_column_agree": pred_agree, "disagreements": dis}


PLAIN_SCRIPT = TASK_DIR / "plain_mc.py"


def write_prompts(data_root: Path, path: Path) -> None:
    """The rendered prompts of the spec's choice_logprobs requests, from auditlang's plan
    (untimed): the plain scripts' input."""
    from auditlang.plan.planner import Planner
    from auditlang.resolve import compile_spec

    plan = Planner(compile_spec(SPEC), str(data_root), load_data=True).build()
    items = []
    for unit in plan.units.values():
        for per_item in unit.stage1.values():
            for ctx, reqs in zip(unit.contexts, per_item):
                for r in reqs.values():
                    if r.kind == "choice_logprobs":
                        items.append({"id": str(ctx.item.get("id", ctx.index)), "prompt": r.prompt.text})
    if len(items) != 200:
        fail(f"expected 200 choice_logprobs prompts in the plan, found {len(items)}")
    path.write_text(json.dumps(items), encoding="utf-8")


def read_plain(path: Path) -> dict[str, dict[str, float]]:
    return {str(d["id"]): d["logprobs"] for d in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def commands(args: argparse.Namespace, model_dir: Path, run_dir: Path, lm_dir: Path) -> dict[str, list[str]]:
    auditc = [sys.executable, "-m", "auditlang.cli", "run", str(SPEC), "--out", str(run_dir),
              "--data-root", str(args.data_root), "--no-progress"]
    lmeval = [args.lmeval_python, "-m", "lm_eval", "--model", "hf",
              "--model_args", f"pretrained={model_dir},dtype=float32", "--tasks", TASK,
              "--include_path", str(TASK_DIR), "--device", "cpu", "--batch_size", str(LMEVAL_BATCH),
              "--log_samples", "--output_path", str(lm_dir)]
    return {"auditlang": auditc, "lmeval": lmeval}


def profile_auditlang(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    """One auditlang run under cProfile; prints the top cumulative entries."""
    prof = work / "auditc.prof"
    run_dir = work / "profile_run"
    cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "auditlang.cli", "run", str(SPEC),
           "--out", str(run_dir), "--data-root", str(args.data_root), "--no-progress"]
    t = timed("auditlang (cProfile)", cmd, env, work / "profile.log")
    print(f"\ncProfile run: wall {t.wall_s:.1f} s, CPU {t.cpu_s:.1f} s")
    import pstats

    stats = pstats.Stats(str(prof))
    stats.sort_stats("cumulative").print_stats(r"auditlang|forward|log_softmax|from_pretrained|import", 30)


def breakdown(run_dir: Path) -> dict[str, float]:
    """Where auditlang's engine time goes, in this process: engine load, then the run's
    ``choice_logprobs`` requests (the quantity compared) and its one-token answer generations
    (read only by the evaluator), each kind alone, then both together in the executor's order
    (``shared_s``: the pairs share one forward pass, as in ``auditc run``)."""
    from auditlang.execute.executor import execution_order
    from auditlang.engines.registry import load_engine
    from auditlang.resolve import compile_spec
    from auditlang.resolve.models import model_config
    from auditlang.store.codec import request_from_json

    con = sqlite3.connect(f"file:{run_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        reqs = [request_from_json(r[0]) for r in con.execute("SELECT request FROM requests ORDER BY rowid")]
    finally:
        con.close()
    cfg = model_config(compile_spec(SPEC), "smol")
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    engine = load_engine(cfg)
    out["engine_load_s"] = time.perf_counter() - t0
    try:
        for kind in ("choice_logprobs", "generate"):
            batch = [r for r in reqs if r.kind == kind]
            t0 = time.perf_counter()
            for start in range(0, len(batch), cfg.batch_size):
                for res in engine.run(batch[start : start + cfg.batch_size]):
                    if res.error:
                        fail(f"breakdown: {kind} request failed: {res.error}")
            out[f"{kind}_s"] = time.perf_counter() - t0
            out[f"{kind}_n"] = float(len(batch))
        both = execution_order(engine, reqs)
        t0 = time.perf_counter()
        for start in range(0, len(both), 2 * cfg.batch_size):
            for res in engine.run(both[start : start + 2 * cfg.batch_size]):
                if res.error:
                    fail(f"breakdown: request failed: {res.error}")
        out["shared_s"] = time.perf_counter() - t0
    finally:
        engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    global SPEC
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spec", type=Path, default=SPEC,
                    help="the auditlang spec (default arc_tokconf.audit, max_tokens=1; "
                         "arc_tokconf_budget32.audit is the default budget of 32)")
    ap.add_argument("--threads", type=int, default=None, help="OMP/MKL threads for both tools (default: torch's)")
    ap.add_argument("--data-root", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--lmeval-python", default="/work/venv-lmeval/bin/python")
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the run folders (printed)")
    ap.add_argument("--profile", action="store_true", help="also profile one auditlang run with cProfile")
    ap.add_argument("--warmup", action="store_true", help="run each tool once, untimed, before the repeats")
    ap.add_argument("--plain", action="store_true",
                    help="also time plain transformers scripts (benchmarks/lmeval_task/plain_mc.py): one forward "
                         "per item (plain-1) and length-sorted batches of 16 (plain-16)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time auditlang's engine phases in-process (load, label logprobs, answer generation)")
    args = ap.parse_args(argv)
    SPEC = args.spec.resolve()
    if args.repeats < 1:
        fail(f"--repeats must be >= 1 (got {args.repeats})")
    if not (args.data_root / "arc_challenge.jsonl").is_file():
        fail(f"{args.data_root / 'arc_challenge.jsonl'} not found", "pass --data-root pointing at shared/data")
    if not Path(args.lmeval_python).is_file():
        fail(f"no interpreter at {args.lmeval_python}",
             "create the lm-eval venv (benchmarks/README.md, 'lm-eval comparison') or pass --lmeval-python")
    if (REPO.parent / "shared" / "data").resolve() != args.data_root.resolve():
        fail("the lm-eval task reads ../shared/data/arc_challenge.jsonl relative to the repository root",
             "run with the default --data-root")

    sys.path.insert(0, str(REPO))
    from auditlang.engines.embedded import resolve_embedded

    model_dir = resolve_embedded(MODEL)  # converts once (cached); not timed
    env = thread_env(args.threads)
    lm_version = subprocess.run([args.lmeval_python, "-c", "import importlib.metadata as m; "
                                 "print(m.version('lm_eval'), m.version('transformers'), m.version('torch'))"],
                                capture_output=True, text=True, env=env).stdout.split()
    import torch
    import transformers

    started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    # the code measured: HEAD at the start, "+dirty" when tracked files differ from it
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                capture_output=True, text=True).stdout.strip())
    work = Path(tempfile.mkdtemp(prefix="bench_lmeval_"))
    repeats: list[Repeat] = []
    fp: dict[str, Any] = {}
    phases: dict[str, float] | None = None
    try:
        if args.warmup:  # untimed: the first lm-eval run of a session reads its venv and caches cold
            cmds = commands(args, model_dir, work / "warmup_auditlang", work / "warmup_lmeval")
            for tool in ("auditlang", "lmeval"):
                t0 = time.perf_counter()
                timed(tool, cmds[tool], env, work / f"warmup_{tool}.log")
                print(f"warm-up: {tool} {time.perf_counter() - t0:.1f} s (untimed)", flush=True)
        for i in range(args.repeats):
            run_dir, lm_dir = work / f"auditlang_{i}", work / f"lmeval_{i}"
            cmds = commands(args, model_dir, run_dir, lm_dir)
            order = ["auditlang", "lmeval"] if i % 2 == 0 else ["lmeval", "auditlang"]
            if args.plain:
                if i == 0:
                    write_prompts(args.data_root, work / "prompts.json")
                for b in (1, LMEVAL_BATCH):
                    cmds[f"plain-{b}"] = [sys.executable, str(PLAIN_SCRIPT), str(work / "prompts.json"),
                                          str(work / f"plain-{b}_{i}.jsonl"), str(model_dir), "--batch", str(b)]
                order = order + [t for t in cmds if t.startswith("plain-")]
                if i % 2:
                    order = order[::-1]
            t: dict[str, Timing] = {}
            for tool in order:
                t[tool] = timed(tool, cmds[tool], env, work / f"{tool}_{i}.log")
                print(f"repeat {i + 1}: {tool:9s} wall {t[tool].wall_s:7.1f} s  CPU {t[tool].cpu_s:7.1f} s  "
                      f"load {t[tool].load_before:.1f} -> {t[tool].load_after:.1f}", flush=True)
            al, fp = read_auditlang(run_dir)
            cmp_ = compare(al, read_lmeval(lm_dir))
            r = Repeat(i + 1, t["auditlang"], t["lmeval"], t["auditlang"].wall_s / t["lmeval"].wall_s,
                       t["auditlang"].cpu_s / t["lmeval"].cpu_s, **cmp_)
            lm = read_lmeval(lm_dir)
            for tool in [k for k in t if k.startswith("plain-")]:
                got = read_plain(work / f"{tool}_{i}.jsonl")
                r.plain[tool] = t[tool]
                r.plain_agree[tool] = sum(argmax_label(got[k]) == argmax_label(lm[k]["logprobs"]) for k in lm if k in got)
                print(f"repeat {i + 1}: {tool} / lm-eval wall {t[tool].wall_s / t['lmeval'].wall_s:.2f}x, "
                      f"auditlang / {tool} {t['auditlang'].wall_s / t[tool].wall_s:.2f}x, "
                      f"agree with lm-eval {r.plain_agree[tool]}/{len(lm)}", flush=True)
            repeats.append(r)
            print(f"repeat {i + 1}: ratio wall {r.ratio_wall:.2f}x  CPU {r.ratio_cpu:.2f}x  "
                  f"agree {r.agree}/{r.n_items}  prompts identical {r.prompts_identical}/{r.n_items}  "
                  f"max |d logprob| {r.max_abs_logprob_diff:.2e}", flush=True)
            for d in r.disagreements:
                print(f"  disagreement {d}")
        if args.breakdown:
            phases = breakdown(work / "auditlang_0")
            print("auditlang engine phases (in-process): " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()))
        if args.profile:
            profile_auditlang(args, work, env)
    finally:
        if args.keep:
            print(f"run folders kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    loads = [x for r in repeats for tm in (r.auditlang, r.lmeval) for x in (tm.load_before, tm.load_after)]
    summary = {
        "spec": str(SPEC.relative_to(REPO)) if SPEC.is_relative_to(REPO) else str(SPEC),
        "commit": commit + ("+dirty" if dirty else ""),
        "started_utc": started, "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "load_1min_range": [min(loads), max(loads)] if loads else None,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "threads": args.threads or torch.get_num_threads()},
        "auditlang": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "dtype": fp.get("dtype"), "padding_side": fp.get("padding_side"), "batch_size": LMEVAL_BATCH},
        "lmeval": {"version": lm_version[0] if lm_version else None,
                   "transformers": lm_version[1] if len(lm_version) > 1 else None,
                   "torch": lm_version[2] if len(lm_version) > 2 else None,
                   "dtype": "float32", "padding_side": LMEVAL_PADDING, "batch_size": LMEVAL_BATCH},
        "median_ratio_wall": statistics.median(r.ratio_wall for r in repeats),
        "median_ratio_cpu": statistics.median(r.ratio_cpu for r in repeats),
        "median_wall_s": {"auditlang": statistics.median(r.auditlang.wall_s for r in repeats),
                          "lmeval": statistics.median(r.lmeval.wall_s for r in repeats)},
        "median_cpu_s": {"auditlang": statistics.median(r.auditlang.cpu_s for r in repeats),
                         "lmeval": statistics.median(r.lmeval.cpu_s for r in repeats)},
        "all_predictions_agree": all(r.agree == r.n_items for r in repeats),
        "median_plain_ratio_wall": {k: statistics.median(r.plain[k].wall_s / r.lmeval.wall_s for r in repeats)
                                    for k in (repeats[0].plain if repeats else {})},
        "engine_phases": phases,
        "repeats": [asdict(r) for r in repeats],
    }
    print(f"\nmedian over {len(repeats)} repeat(s): auditlang wall {summary['median_wall_s']['auditlang']:.1f} s "
          f"(CPU {summary['median_cpu_s']['auditlang']:.1f} s), lm-eval wall {summary['median_wall_s']['lmeval']:.1f} s "
          f"(CPU {summary['median_cpu_s']['lmeval']:.1f} s), ratio wall {summary['median_ratio_wall']:.2f}x, "
          f"ratio CPU {summary['median_ratio_cpu']:.2f}x (issue 27 targets: <= 0.6x at the default budget of 32, "
          f"<= 0.5x with max_tokens=1)")
    if args.json_out:
        args.json_out.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
