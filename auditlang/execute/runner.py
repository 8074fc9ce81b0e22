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

import contextlib
import time
from pathlib import Path

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.core.errors import RuntimeFailure
from auditlang.core.requests import Request
from auditlang.execute.static_key import static_key
from auditlang.plan.model import Plan
from auditlang.plan.stage2 import stage2_requests
from auditlang.resolve.models import model_config
from auditlang.resolve.spec import Spec
from auditlang.store.journal import Journal
from auditlang.store.rundir import read_run_file, write_run_file
from auditlang.execute.executor import execute
from auditlang.plan.crossdata import cross_requests

CACHE_KEY = "static_key:"  # a response cache's meta: static key -> fingerprint hash it loaded with


def _load(cfg: ModelConfig):
    from auditlang.engines.registry import load_engine  # lazy: engine modules load only when a model runs

    try:
        return load_engine(cfg)
    except EngineError as e:
        raise RuntimeFailure(f"model '{cfg.name}' ({cfg.engine}: {cfg.path}): {e}", getattr(e, "hint", None)) from None


def execute_plan(spec: Spec, plan: Plan, run_dir: Path, *, engine_override: str | None = None, progress: bool | str = True,
                 shard=None, retry_errors: bool = True, log=print, beat=None,
                 cache_dir: str | Path | None = None, phases=("models", "cross", "judge"), only_models=None,
                 engines: dict | None = None) -> dict[str, str]:
    """Run every request of the plan that the journal lacks. Returns model id -> fingerprint hash.

    Three phases: (1) each audited model's stage 1, stage 2 and the cross requests whose answers
    already exist; (2) the rest of the cross stage (answers of models run after it, see
    auditlang/plan/crossdata.py), only for models with missing work; (3) judge models. A model is
    loaded once per phase that has work for it, and not at all when its static key
    (auditlang/execute/static_key.py) is unchanged and all its work is stored. ``beat(doing=...)``
    is told each step (the run lock's heartbeat, read by ``auditc status``). ``cache_dir``: a
    response cache shared across run directories (see ``execute(cache=...)``). ``retry_errors``
    (default): requests whose stored result is a failure are executed again; run.json's
    ``last_run`` counts the failures left (``errors``) and names the first (``first_error``).

    ``phases`` picks phases by name ("models", "cross", "judge"; a "models" phase without
    "cross" runs no cross requests) and ``only_models`` the audited models of phase 1: the Ray
    executor runs ("models",) per (model, item shard) unit, then ("cross", "judge") once.
    ``engines``: loaded engines by model id, taken from and left in it (the caller closes them),
    so a Ray worker running several units of one model loads it once.
    """

    run_dir.mkdir(parents=True, exist_ok=True)
    info = read_run_file(run_dir)
    fps: dict[str, str] = dict(info.get("fingerprints", {}))
    # errors: requests that failed in this call's engines (plus stored failures kept without retry_errors)
    totals: dict = {"executed": 0, "cached": 0, "errors": 0, "from_cache": 0, "first_error": ""}
    work: dict[str, dict[str, dict[str, int]]] = {}  # model -> stage -> engine work counters

    def run_stage(engine, reqs, mid: str, stage: str, shard=None) -> None:
        st = execute(engine, reqs, journal, shard=shard, description=f"{mid} {stage}", **opts)
        _acc(totals, st)
        if st.engine_work is not None:
            mine = work.setdefault(mid, {}).setdefault(stage, {})
            for k, v in st.engine_work.items():
                mine[k] = mine.get(k, 0) + v

    audited = [m for m in plan.models if any(r.model == m for r in plan.requests)]
    phase1 = [m for m in audited if "models" in phases and (only_models is None or m in only_models)]
    beat = beat or (lambda **_: None)
    statics: dict[str, dict[str, str]] = dict(info.get("static_keys", {}))
    cache = Journal(Path(cache_dir)) if cache_dir else None
    opts = {"progress": progress, "retry_errors": retry_errors, "cache": cache}
    with Journal(run_dir) as journal, (cache or contextlib.nullcontext()):
        def config(mid: str) -> ModelConfig:
            """``mid``'s engine configuration for this plan: options that depend on what the
            plan sends the model (vLLM prefix caching) are resolved from its request kinds."""
            return engine_config(spec, plan, mid, engine_override)

        def unchanged(mid: str, needed) -> bool:
            """Whether ``mid``'s static key is the recorded one (in run.json, or in the response
            cache for a new run directory) and ``needed()`` (built with that fingerprint) is all
            committed, or copied from the cache: then the model need not be loaded."""
            rec = statics.get(mid)
            key = static_key(config(mid))
            if not key or not rec or rec.get("key") != key or rec["fp"] not in journal.fingerprints():
                return cached_fully(mid, key, needed) if key and cache is not None else False
            fps[mid] = rec["fp"]
            reqs = needed()
            if _missing(journal, fps, mid, reqs, retry_errors):
                return cached_fully(mid, key, needed) if cache is not None else False
            totals["cached"] += len({r.id for r in reqs})
            return True

        def cached_fully(mid: str, key: str, needed) -> bool:
            """``--cache``: the cache knows the fingerprint this static key loaded with; copy every
            request ``needed()`` lacks from it (stage 1 first, then the follow-ups built from it).
            True when nothing is left to execute: the model is not loaded."""
            fp = cache.get_meta(CACHE_KEY + key)  # type: ignore[union-attr]
            known = cache.fingerprints() if fp else {}  # type: ignore[union-attr]
            if fp not in known:
                return False
            journal.register_engine(known[fp].fingerprint, mid)
            old = fps.get(mid)
            fps[mid] = fp
            copied = 0
            for _ in range(4):  # stage 2 and cross requests are built from what stage 1 copied
                reqs = needed()
                committed = journal.committed([r.id for r in reqs], fp)
                todo = [r for r in {r.id: r for r in reqs}.values()
                        if r.id not in committed or (retry_errors and committed[r.id])]
                hits = {k: v for k, v in cache.get_many([r.id for r in todo], fp).items() if v.error is None}  # type: ignore[union-attr]
                if hits:
                    journal.put_requests([r for r in todo if r.id in hits], fp)
                    journal.put_results(hits.values(), fp)
                    copied += len(hits)
                if len(hits) == len(todo):
                    break
            if _missing(journal, fps, mid, needed(), retry_errors):
                if old is None:
                    fps.pop(mid)
                else:
                    fps[mid] = old
                totals["from_cache"] += copied  # counted as cached by the stage that runs now
                return False
            totals["from_cache"] += copied
            totals["cached"] += len({r.id for r in needed()})
            statics[mid] = {"key": key, "fp": fp}
            return True

        def run_phase(mid: str, work) -> None:
            cfg = config(mid)
            beat(doing=f"{mid}: loading the {cfg.engine} engine")
            log(f"[{mid}] loading the {cfg.engine} engine: {cfg.path}")
            t0 = time.perf_counter()
            engine = engines[mid] if engines is not None and mid in engines else _load(cfg)
            if engines is not None:
                engines[mid] = engine
            log(f"[{mid}] {cfg.engine} engine ready: {cfg.path} ({time.perf_counter() - t0:.1f}s)")
            try:
                fps[mid] = journal.register_engine(engine.fingerprint(), mid)
                key = static_key(cfg)
                if key:
                    statics[mid] = {"key": key, "fp": fps[mid]}
                    if cache is not None:  # a new run directory with this cache need not load it
                        cache.put_meta(CACHE_KEY + key, fps[mid])
                else:
                    statics.pop(mid, None)
                write_run_file(run_dir, {**info, "fingerprints": fps, "plan_hash": plan.hash, "static_keys": statics})
                beat(doing=f"{mid}: executing")
                work(engine)
            except EngineError as e:
                raise RuntimeFailure(f"model '{mid}': {e}", getattr(e, "hint", None) or "rerun `auditc run` to resume") from None
            finally:
                if engines is None:
                    engine.close()

        for mid in phase1:
            def stages12(engine, mid=mid) -> None:
                stage1 = [r for r in plan.requests if r.model == mid]
                run_stage(engine, stage1, mid, "stage 1", shard=shard)
                stage2 = [r for r in stage2_requests(spec, plan, journal, fps, only_model=mid) if r.model == mid]
                if stage2:
                    # Stage 2 is built only for items whose stage 1 this journal holds, so it is not re-sharded.
                    run_stage(engine, stage2, mid, "stage 2")
                # Cross requests whose answers already exist (another prompt's or a sampled answer of
                # this model, models run before it) run now, in the same engine load.
                early = [r for r in cross_requests(spec, plan, journal, fps, only_model=mid) if r.model == mid
                         ] if "cross" in phases else []
                if early:
                    run_stage(engine, early, mid, "cross")
            def needed(mid=mid) -> list[Request]:
                return ([r for r in plan.requests if r.model == mid]
                        + [r for r in stage2_requests(spec, plan, journal, fps, only_model=mid) if r.model == mid]
                        + [r for r in cross_requests(spec, plan, journal, fps, only_model=mid) if r.model == mid])
            if shard is None and unchanged(mid, needed):
                log(f"[{mid}] unchanged and every request stored: not loaded")
                continue
            run_phase(mid, stages12)

        # Cross stage: built from committed answers of every model (a shard builds what its journal
        # allows). Requests of audited models run now (candidate scoring, and sample grouping when
        # an audited model is also a judge); those of other models join the judge phase.
        cross = cross_requests(spec, plan, journal, fps) if "cross" in phases else []
        for mid in audited:
            mine = [r for r in cross if r.model == mid]
            if mine and _missing(journal, fps, mid, mine, retry_errors):
                run_phase(mid, lambda engine, mine=mine, mid=mid: run_stage(engine, mine, mid, "cross"))
        judge_work = (stage2_requests(spec, plan, journal, fps, judges_only=True) + [r for r in cross if r.model not in audited]
                      if "judge" in phases else [])
        for mid in sorted({r.model for r in judge_work}):
            mine = [r for r in judge_work if r.model == mid]
            if unchanged(mid, lambda mine=mine: mine):
                log(f"[{mid}] unchanged and every request stored: not loaded")
                continue
            run_phase(mid, lambda engine, mine=mine, mid=mid: run_stage(engine, mine, mid, "judge"))
    log(f"requests: executed {totals['executed']}, cached {totals['cached']}"
        + (f" ({totals['from_cache']} from the response cache {cache_dir})" if totals["from_cache"] else "")
        + f", errors {totals['errors']}")
    info = read_run_file(run_dir)
    info.update({"fingerprints": fps, "last_run": totals, "plan_hash": plan.hash, "static_keys": statics, "engine_work": work})
    write_run_file(run_dir, info)
    return fps


def engine_config(spec: Spec, plan: Plan, mid: str, engine_override: str | None = None) -> ModelConfig:
    """The configuration ``auditc run`` loads model ``mid`` with: the spec's declaration
    (:func:`~auditlang.resolve.models.model_config`) with ``prefix_caching=auto`` resolved (on)
    for the request kinds the plan sends the model in every stage (``Plan.model_kinds``)."""
    return model_config(spec, mid, engine_override, kinds=plan.model_kinds(mid))


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
    totals["errors"] += getattr(st, "errors", 0) + getattr(st, "cached_errors", 0)
    if not totals["first_error"]:
        totals["first_error"] = getattr(st, "first_error", "")
    totals["from_cache"] += getattr(st, "from_cache", 0)


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
