"""`auditc run`: execute a plan model by model, score every cell, compute metrics, report.

Order of work, one engine load per model:
  stage 1  every unique request of the model known at plan time (answers, token windows, ...);
  stage 2  follow-ups built from the model's stage-1 outputs (verbal confidence after its own
           answer, constrained re-prompts, P(True), teacher forcing of generated answers);
  judge    requests for judge models (llm_judge evaluators), after every audited model;
then scoring reads everything back from the journal (no model loaded) and writes records.
Everything is keyed by request id + engine fingerprint, so a rerun executes only what is
missing and an unchanged spec executes nothing.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from auditlang.engines.base import EngineError, ModelConfig
from auditlang.errors import RuntimeFailure, UserError
from auditlang.plan.model import Plan
from auditlang.plan.planner import Planner
from auditlang.plan.requests import Request
from auditlang.resolve import compile_spec
from auditlang.resolve.schema import EMBEDDED_MODELS
from auditlang.resolve.spec import Spec
from auditlang.run.stage2 import stage2_requests
from auditlang.store.journal import Journal

RUN_FILE = "run.json"
CHAT_TEMPLATE_PARAMS = ("enable_thinking", "reasoning_effort")  # model params passed to the chat template
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def model_config(spec: Spec, mid: str, engine_override: str | None = None) -> ModelConfig:
    o = spec.get(mid)
    v = o.value
    if o.ctor == "embedded":
        engine, path = v.engine, v.name
        explicit = dict(o.param_spans)
        chat = v.chat if "chat" in explicit else EMBEDDED_MODELS[v.name]["chat"]
    else:
        engine, path, chat = o.ctor, v.path, v.chat
    if engine_override:
        engine = engine_override
    options: dict[str, Any] = {}
    for k in ("max_logprobs", "enforce_eager", "tensor_parallel", "gpu_memory_utilization", "base_url", "endpoint", "api_key_env", "server"):
        if hasattr(v, k) and getattr(v, k) is not None:
            options[k] = getattr(v, k)
    template_kwargs = {k: getattr(v, k) for k in CHAT_TEMPLATE_PARAMS if getattr(v, k, None) is not None}
    if template_kwargs:  # absent when unset, so plain models keep their options (and fingerprints)
        options["chat_template_kwargs"] = template_kwargs
    return ModelConfig(
        name=mid, engine=engine, path=path, dtype=DTYPES.get(v.dtype, v.dtype), chat=chat,
        device=getattr(v, "device", "auto"), batch_size=v.batch_size, revision=v.revision, options=options,
    )


def read_run_file(run_dir: Path) -> dict[str, Any]:
    p = run_dir / RUN_FILE
    if p.exists():
        return json.loads(p.read_text(encoding="utf-8"))
    return {}


def write_run_file(run_dir: Path, data: dict[str, Any]) -> None:
    tmp = run_dir / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(run_dir / RUN_FILE)


def _load(cfg: ModelConfig):
    from auditlang.engines.registry import load_engine

    try:
        return load_engine(cfg)
    except EngineError as e:
        raise RuntimeFailure(f"model '{cfg.name}' ({cfg.engine}: {cfg.path}): {e}", getattr(e, "hint", None)) from None


def execute_plan(spec: Spec, plan: Plan, run_dir: Path, *, engine_override: str | None = None, progress: bool = True,
                 shard=None, retry_errors: bool = False, log=print) -> dict[str, str]:
    """Run every request of the plan that the journal lacks. Returns model id -> fingerprint hash.

    Three phases: (1) each audited model's stage 1, stage 2 and the cross requests whose answers
    already exist; (2) the rest of the cross stage (answers of models run after it, see
    auditlang/run/cross.py), only for models with missing work; (3) judge models. A model is
    loaded once per phase that has work for it.
    """
    from auditlang.execute.executor import execute
    from auditlang.run.cross import cross_requests

    run_dir.mkdir(parents=True, exist_ok=True)
    info = read_run_file(run_dir)
    fps: dict[str, str] = dict(info.get("fingerprints", {}))
    totals = {"executed": 0, "cached": 0, "errors": 0}
    audited = [m for m in plan.models if any(r.model == m for r in plan.requests)]
    opts = {"progress": progress, "retry_errors": retry_errors}
    with Journal(run_dir) as journal:
        def run_phase(mid: str, work) -> None:
            cfg = model_config(spec, mid, engine_override)
            t0 = time.perf_counter()
            engine = _load(cfg)
            log(f"[{mid}] {cfg.engine} engine ready: {cfg.path} ({time.perf_counter() - t0:.1f}s)")
            try:
                fps[mid] = journal.register_engine(engine.fingerprint(), mid)
                write_run_file(run_dir, {**info, "fingerprints": fps, "spec": str(spec.entry), "plan_hash": plan_hash_of(plan)})
                work(engine)
            except EngineError as e:
                raise RuntimeFailure(f"model '{mid}': {e}", getattr(e, "hint", None) or "rerun `auditc run` to resume") from None
            finally:
                engine.close()

        for mid in audited:
            def stages12(engine, mid=mid) -> None:
                stage1 = [r for r in plan.requests if r.model == mid]
                _acc(totals, execute(engine, stage1, journal, shard=shard, description=f"{mid} stage 1", **opts))
                stage2 = [r for r in stage2_requests(spec, plan, journal, fps, only_model=mid) if r.model == mid]
                if stage2:
                    # Stage 2 is built only for items whose stage 1 this journal holds, so it is not re-sharded.
                    _acc(totals, execute(engine, stage2, journal, shard=None, description=f"{mid} stage 2", **opts))
                # Cross requests whose answers already exist (another prompt's or a sampled answer of
                # this model, models run before it) run now, in the same engine load.
                early = [r for r in cross_requests(spec, plan, journal, fps, only_model=mid) if r.model == mid]
                if early:
                    _acc(totals, execute(engine, early, journal, shard=None, description=f"{mid} cross", **opts))
            run_phase(mid, stages12)

        # Cross stage: built from committed answers of every model (a shard builds what its journal
        # allows). Requests of audited models run now (candidate scoring, and sample grouping when
        # an audited model is also a judge); those of other models join the judge phase.
        cross = cross_requests(spec, plan, journal, fps)
        for mid in audited:
            mine = [r for r in cross if r.model == mid]
            if mine and _missing(journal, fps, mid, mine, retry_errors):
                run_phase(mid, lambda engine, mine=mine, mid=mid: _acc(
                    totals, execute(engine, mine, journal, shard=None, description=f"{mid} cross", **opts)))
        judge_work = stage2_requests(spec, plan, journal, fps, judges_only=True) + [r for r in cross if r.model not in audited]
        for mid in sorted({r.model for r in judge_work}):
            mine = [r for r in judge_work if r.model == mid]
            run_phase(mid, lambda engine, mine=mine, mid=mid: _acc(
                totals, execute(engine, mine, journal, shard=None, description=f"{mid} judge", **opts)))
    log(f"requests: executed {totals['executed']}, cached {totals['cached']}, errors {totals['errors']}")
    info = read_run_file(run_dir)
    info.update({"fingerprints": fps, "last_run": totals, "spec": str(spec.entry), "plan_hash": plan_hash_of(plan)})
    write_run_file(run_dir, info)
    return fps


def _missing(journal: Journal, fps: dict[str, str], mid: str, reqs: list[Request], retry_errors: bool) -> bool:
    """Whether any request still needs the engine (saves reloading a model whose work is all
    stored). ``fps[mid]`` was registered by this call's first phase, so it is the current engine's."""
    fp = fps.get(mid)
    if fp is None:
        return True
    committed = journal.committed([r.id for r in reqs], fp)
    return any(r.id not in committed or (retry_errors and committed[r.id]) for r in reqs)


def _acc(totals: dict[str, int], st) -> None:
    totals["executed"] += getattr(st, "executed", 0)
    totals["cached"] += getattr(st, "cached", 0)
    totals["errors"] += getattr(st, "errors", 0)


def plan_hash_of(plan: Plan) -> str:
    return plan.to_dict(include_requests=False)["hash"]


def default_run_dir(spec_path: str) -> Path:
    return Path("runs") / Path(spec_path).stem


def prepare(spec_path: str, data_root: str | None, limit: int | None) -> tuple[Spec, Plan]:
    spec = compile_spec(spec_path)
    planner = Planner(spec, data_root, load_data=True, limit=limit)
    plan = planner.build()
    if plan.estimated:
        missing = [d for d, i in plan.datasets.items() if not i.get("available")]
        causes = "".join(f"\n  {n.split(' — counts are estimates')[0]}" for n in plan.notes
                         if any(n.startswith(f"dataset '{d}':") for d in missing))
        hubs = [d for d in missing if spec.get(d).ctor == "hub"]
        raise UserError(f"cannot run: dataset(s) {', '.join(missing)} are not available{causes}",
                        hint=(planner.hints.get(hubs[0]) if hubs else None)
                        or "pass --data-root DIR or set AUDITLANG_DATA_ROOT to the folder holding the data files")
    return spec, plan


def save_inputs(spec: Spec, plan: Plan, run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "plan.json").write_text(json.dumps(plan.to_dict(include_requests=False), indent=1), encoding="utf-8")
    src = run_dir / "spec"
    src.mkdir(exist_ok=True)
    for f in spec.files:
        try:
            shutil.copyfile(f, src / Path(f).name)
        except OSError:
            pass


def item_shard_key(plan: Plan):
    """Shard by item, not by request: all stage-1 requests of an item land in one shard, so that
    shard can build the item's stage-2 follow-ups from its own journal."""
    keys: dict[str, str] = {}
    for unit in plan.units.values():
        for per_item in unit.stage1.values():
            for ctx, reqs in zip(unit.contexts, per_item):
                for r in reqs.values():
                    keys.setdefault(r.id, f"{unit.model}/{unit.dataset}/{unit.split}/{ctx.index}")
    return lambda req: keys.get(req.id, req.id)


def run_spec(args) -> int:
    from auditlang.run.scoring import score_and_write
    from auditlang.store.shards import Shard

    spec, plan = prepare(args.spec, args.data_root, args.limit)
    run_dir = Path(args.out) if args.out else default_run_dir(args.spec)
    save_inputs(spec, plan, run_dir)
    info = read_run_file(run_dir)
    info.update({"spec": str(spec.entry), "data_root": args.data_root, "limit": args.limit,
                 "engine_override": args.engine})
    write_run_file(run_dir, info)
    try:
        shard = Shard.parse(args.shard, key=item_shard_key(plan)) if args.shard else None
    except ValueError as e:
        raise UserError(str(e), hint="--shard 0/4 runs the first of four shards") from None
    print(f"run {run_dir}: {len(plan.cells)} cells, {len(plan.requests)} stage-1 requests "
          f"(+{plan.deferred_count} follow-ups), naive {plan.naive_request_count}")
    fps = execute_plan(spec, plan, run_dir, engine_override=args.engine, progress=not args.no_progress,
                       shard=shard, retry_errors=args.retry_errors)
    if shard is not None:
        print(f"shard {args.shard} done; merge the shard directories with `auditc merge TARGET SHARD_DIR...`, "
              "then `auditc report TARGET`")
        return 0
    score_and_write(spec, plan, run_dir, fps)
    if not args.no_report:
        from auditlang.run.reporting import write_report

        write_report(spec, plan, run_dir)
    print(f"done: {run_dir}")
    return 0
