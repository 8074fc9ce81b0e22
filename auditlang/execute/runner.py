"""`auditc run`: execute a plan model by model, score every cell, compute metrics, report.

Order of work (:func:`execute_plan`'s steps, methods of ``_PlanRun``), one engine load per model:
  audited_models  per audited model: stage 1 (every unique request known at plan time: answers,
                  token windows, ...), stage 2 (follow-ups built from the model's stage-1 outputs:
                  verbal confidence after its own answer, constrained re-prompts, P(True), teacher
                  forcing of generated answers) and the cross requests whose answers exist;
  cross_stage     the rest of the cross stage, for audited models;
  judge_models    requests for judge models (llm_judge evaluators), after every audited model;
  finish          the totals, fingerprints and static keys recorded in run.json;
then scoring reads everything back from the journal (no model loaded) and writes records.
On an engine that streams (vLLM), stage 2 is no separate step: each item's follow-ups are built
as soon as its stage-1 results are committed and join the engine's running call (no barrier).
Follow-up, judge and cross requests are rebuilt from the journal by ``plan/from_journal.py``.
Everything is keyed by request id + engine fingerprint, so a rerun executes only what is
missing and an unchanged spec executes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

from auditlang.core.engine import EngineError, ModelConfig, streams
from auditlang.core.errors import RuntimeFailure
from auditlang.core.requests import Request
from auditlang.execute.static_key import static_key
from auditlang.plan.gputime import eager_for
from auditlang.plan.model import Plan
from auditlang.plan.from_journal import FromJournal
from auditlang.resolve.models import model_config
from auditlang.resolve.spec import Spec
from auditlang.store.journal import Journal
from auditlang.store.rundir import read_run_file, write_run_file
from auditlang.store.shards import Shard, balanced_shards, shard_of
from auditlang.execute.executor import execute
from auditlang.execute.progress import RunProgress, quiet_library_bars, stage_slot

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
    run = _PlanRun(spec, plan, run_dir, engine_override=engine_override, progress=progress, shard=shard,
                   retry_errors=retry_errors, log=log, beat=beat, cache_dir=cache_dir, phases=phases,
                   only_models=only_models, engines=engines)
    with quiet_library_bars(progress), Journal(run_dir) as journal, (run.cache or contextlib.nullcontext()):
        run.journal, run.followups = journal, FromJournal(spec, plan, journal, run.fps)
        run.start_progress()
        run.audited_models()  # per model: load, stage 1, stage 2, the cross requests it can run now
        run.cross_stage()  # the rest of the cross stage, for audited models
        run.judge_models()  # judge models: their follow-ups and the cross requests sent to them
        if run.whole is not None:
            run.whole.finish()
    return run.finish()


class _PlanRun:
    """One call of :func:`execute_plan`: its state (fingerprints, counters, static keys, the
    journal) and its steps, in the order they run."""

    journal: Journal
    followups: FromJournal  # the one owner of rebuilding follow-up and cross requests from the journal

    def __init__(self, spec: Spec, plan: Plan, run_dir: Path, *, engine_override, progress, shard, retry_errors,
                 log, beat, cache_dir, phases, only_models, engines) -> None:
        self.spec, self.plan, self.run_dir = spec, plan, run_dir
        self.engine_override, self.shard, self.retry_errors = engine_override, shard, retry_errors
        self.log, self.beat = log, beat or (lambda **_: None)
        self.phases, self.engines, self.cache_dir = phases, engines, cache_dir
        self.info = read_run_file(run_dir)
        self.fps: dict[str, str] = dict(self.info.get("fingerprints", {}))
        # errors: requests that failed in this call's engines (plus stored failures kept without retry_errors)
        self.totals: dict = {"executed": 0, "cached": 0, "errors": 0, "from_cache": 0, "first_error": ""}
        self.work: dict[str, dict[str, dict[str, int]]] = {}  # model -> stage -> engine work counters
        self.batch_sizing: dict[str, dict] = {}  # model -> the engine's batch_sizing() (hf: sizes per shape, halvings)
        self.timing: dict[str, dict] = {}  # model -> engine start and engine seconds (auditc plan --throughput-from)
        self.audited = [m for m in plan.models if any(r.model == m for r in plan.requests)]
        self.phase1 = [m for m in self.audited if "models" in phases and (only_models is None or m in only_models)]
        self.statics: dict[str, dict[str, str]] = dict(self.info.get("static_keys", {}))
        self.cache = Journal(Path(cache_dir)) if cache_dir else None
        self.opts = {"progress": progress, "retry_errors": retry_errors, "cache": self.cache}
        self.whole: RunProgress | None = None  # the whole run's progress line (start_progress)
        self.cross: list[Request] = []

    def start_progress(self) -> None:
        """The whole run's progress, from the plan: each model's stage-1 requests this journal
        lacks and its planned follow-ups (exact once each stage starts); none without a display."""
        if self.opts["progress"] in (False, None, "none"):
            return
        planned: dict[tuple[str, str], int] = {}
        ids: dict[str, set[str]] = {}
        reqs = self.shard.select(self.plan.requests) if self.shard is not None else self.plan.requests
        for r in reqs:
            if r.model in self.phase1:
                ids.setdefault(r.model, set()).add(r.id)
        for mid, mine in ids.items():
            fp = self.fps.get(mid)
            stored = self.journal.committed(list(mine), fp) if fp else {}
            planned[(mid, "stage 1")] = sum(1 for i in mine if i not in stored or (self.retry_errors and stored[i]))
        for d in self.plan.deferred:
            key = (d["model"], "follow-ups")
            planned[key] = planned.get(key, 0) + int(d.get("count") or 0)
        self.whole = RunProgress(planned, display=self.opts["progress"])

    # -- the steps ----------------------------------------------------------------------------

    def audited_models(self) -> None:
        """Phase 1: each audited model's stage 1, its stage-2 follow-ups (built from the answers
        just stored) and the cross requests whose answers already exist, in one engine load; a
        model whose static key is unchanged and whose work is all stored is not loaded."""
        for mid in self.phase1:
            if self.shard is None and self._unchanged(mid, lambda mid=mid: self.followups.needed(mid)):
                self.log(f"[{mid}] unchanged and every request stored: not loaded")
                if self.whole is not None:
                    self.whole.skip(mid)
                continue
            self._with_engine(mid, lambda engine, mid=mid: self._model_stages(engine, mid))
            if self.whole is not None:  # what is left of its planned follow-ups did not run now
                self.whole.skip(mid)

    def _model_stages(self, engine, mid: str) -> None:
        if self.shard is None and streams(engine):
            # A streaming engine (vLLM) gets each item's follow-ups as soon as its stage-1 results
            # are committed, beside the rest of stage 1: no barrier that drains its batch between
            # the stages, and no second read of every stage-1 result from the journal.
            built = self.followups.stage2_stream(mid)
            self._run_stage(engine, self.followups.stage1(mid), mid, "stages 1+2", followups=built.add)
        else:
            self._stages_in_turn(engine, mid)
        # Cross requests whose answers already exist (another prompt's or a sampled answer of
        # this model, models run before it) run now, in the same engine load.
        early = self.followups.cross(mid) if "cross" in self.phases else []
        if early:
            self._run_stage(engine, early, mid, "cross")

    def _stages_in_turn(self, engine, mid: str) -> None:
        """Stage 1, then stage 2 built from the journal (engines that take a call's requests at once)."""
        self._run_stage(engine, self.followups.stage1(mid), mid, "stage 1", shard=self.shard)
        stage2 = self.followups.stage2(mid)
        if stage2:
            # Stage 2 is built only for items whose stage 1 this journal holds, so it is not re-sharded.
            self._run_stage(engine, stage2, mid, "stage 2")

    def cross_stage(self) -> None:
        """Phase 2: the cross stage, built from committed answers of every model (a shard builds
        what its journal allows). Requests of audited models run now (candidate scoring, and
        sample grouping when an audited model is also a judge); those of other models join the
        judge phase."""
        self.cross = self.followups.cross() if "cross" in self.phases else []
        for mid in self.audited:
            mine = [r for r in self.cross if r.model == mid]
            if mine and _missing(self.journal, self.fps, mid, mine, self.retry_errors):
                self._with_engine(mid, lambda engine, mine=mine, mid=mid: self._run_stage(engine, mine, mid, "cross"))

    def judge_models(self) -> None:
        """Phase 3: judge models (llm_judge evaluators and cross requests sent to models that are
        not audited), after every audited model."""
        judge_work = (self.followups.judges() + [r for r in self.cross if r.model not in self.audited]
                      if "judge" in self.phases else [])
        for mid in sorted({r.model for r in judge_work}):
            mine = [r for r in judge_work if r.model == mid]
            if self._unchanged(mid, lambda mine=mine: mine):
                self.log(f"[{mid}] unchanged and every request stored: not loaded")
                if self.whole is not None:
                    self.whole.skip(mid)
                continue
            self._with_engine(mid, lambda engine, mine=mine, mid=mid: self._run_stage(engine, mine, mid, "judge"))

    def finish(self) -> dict[str, str]:
        """Log the totals and record them, the fingerprints and static keys in run.json."""
        t = self.totals
        self.log(f"requests: executed {t['executed']}, cached {t['cached']}"
                 + (f" ({t['from_cache']} from the response cache {self.cache_dir})" if t["from_cache"] else "")
                 + f", errors {t['errors']}")
        for mid in self.plan.models:  # a model declared twice: its cells read the first one's results
            if self.plan.runs_as(mid) != mid and self.plan.runs_as(mid) in self.fps:
                self.fps[mid] = self.fps[self.plan.runs_as(mid)]
        info = read_run_file(self.run_dir)
        info.update({"fingerprints": self.fps, "last_run": t, "plan_hash": self.plan.hash, "static_keys": self.statics,
                     "engine_work": self.work})
        if self.batch_sizing:
            info["batch_sizing"] = self.batch_sizing
        if self.timing:
            info["timing"] = self.timing
        write_run_file(self.run_dir, info)
        return self.fps

    # -- helpers ------------------------------------------------------------------------------

    def _run_stage(self, engine, reqs, mid: str, stage: str, shard=None, followups=None) -> None:
        st = execute(engine, reqs, self.journal, shard=shard, description=f"{mid} {stage}", followups=followups,
                     whole=stage_slot(self.whole, mid, stage), **self.opts)
        _acc(self.totals, st)
        if st.engine_work is not None:
            mine = self.work.setdefault(mid, {}).setdefault(stage, {})
            for k, v in st.engine_work.items():
                mine[k] = mine.get(k, 0) + v

    def _config(self, mid: str) -> ModelConfig:
        """``mid``'s engine configuration for this plan: options that depend on what the
        plan sends the model (vLLM prefix caching) are resolved from its request kinds."""
        return engine_config(self.spec, self.plan, mid, self.engine_override)

    def _unchanged(self, mid: str, needed) -> bool:
        """Whether ``mid``'s static key is the recorded one (in run.json, or in the response
        cache for a new run directory) and ``needed()`` (built with that fingerprint) is all
        committed, or copied from the cache: then the model need not be loaded."""
        rec = self.statics.get(mid)
        key = static_key(self._config(mid))
        if not key or not rec or rec.get("key") != key or rec["fp"] not in self.journal.fingerprints():
            return self._cached_fully(mid, key, needed) if key and self.cache is not None else False
        self.fps[mid] = rec["fp"]
        reqs = needed()
        if _missing(self.journal, self.fps, mid, reqs, self.retry_errors):
            return self._cached_fully(mid, key, needed) if self.cache is not None else False
        self.totals["cached"] += len({r.id for r in reqs})
        return True

    def _cached_fully(self, mid: str, key: str, needed) -> bool:
        """``--cache``: the cache knows the fingerprint this static key loaded with; copy every
        request ``needed()`` lacks from it (stage 1 first, then the follow-ups built from it).
        True when nothing is left to execute: the model is not loaded."""
        cache, journal, fps = self.cache, self.journal, self.fps
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
                    if r.id not in committed or (self.retry_errors and committed[r.id])]
            hits = {k: v for k, v in cache.get_many([r.id for r in todo], fp).items() if v.error is None}  # type: ignore[union-attr]
            if hits:
                journal.put_requests([r for r in todo if r.id in hits], fp)
                journal.put_results(hits.values(), fp)
                copied += len(hits)
            if len(hits) == len(todo):
                break
        if _missing(journal, fps, mid, needed(), self.retry_errors):
            if old is None:
                fps.pop(mid)
            else:
                fps[mid] = old
            self.totals["from_cache"] += copied  # counted as cached by the stage that runs now
            return False
        self.totals["from_cache"] += copied
        self.totals["cached"] += len({r.id for r in needed()})
        self.statics[mid] = {"key": key, "fp": fp}
        return True

    def _with_engine(self, mid: str, work) -> None:
        """Load ``mid``'s engine (or take it from ``engines``), register its fingerprint, record
        run.json, run ``work(engine)``, close it (unless the caller holds it)."""
        cfg, engines = self._config(mid), self.engines
        self.beat(doing=f"{mid}: loading the {cfg.engine} engine")
        self.log(f"[{mid}] loading the {cfg.engine} engine: {cfg.path}")
        t0 = time.perf_counter()
        engine = engines[mid] if engines is not None and mid in engines else _load(cfg)
        if engines is not None:
            engines[mid] = engine
        self.log(f"[{mid}] {cfg.engine} engine ready: {cfg.path} ({time.perf_counter() - t0:.1f}s)")
        try:
            self.fps[mid] = self.journal.register_engine(engine.fingerprint(), mid)
            key = static_key(cfg)
            if key:
                self.statics[mid] = {"key": key, "fp": self.fps[mid]}
                if self.cache is not None:  # a new run directory with this cache need not load it
                    self.cache.put_meta(CACHE_KEY + key, self.fps[mid])
            else:
                self.statics.pop(mid, None)
            write_run_file(self.run_dir, {**self.info, "fingerprints": self.fps, "plan_hash": self.plan.hash,
                                          "static_keys": self.statics})
            self.beat(doing=f"{mid}: executing")
            ready = time.perf_counter()
            work(engine)
            self._timed(mid, cfg, engine, ready - t0, time.perf_counter() - ready)
        except EngineError as e:
            raise RuntimeFailure(f"model '{mid}': {e}", getattr(e, "hint", None) or "rerun `auditc run` to resume") from None
        finally:
            sizing = getattr(engine, "batch_sizing", None)
            if callable(sizing):  # the hf engine: each shape's batch and its halvings on out of memory
                now, was = sizing(), self.batch_sizing.get(mid)
                if was:  # loaded again in a later phase: keep the earlier load's halvings
                    now = {"shapes": {**was["shapes"], **now["shapes"]}, "halvings": was["halvings"] + now["halvings"]}
                self.batch_sizing[mid] = now
            if engines is None:
                engine.close()


    def _timed(self, mid: str, cfg, engine, start_s: float, engine_s: float) -> None:
        """run.json ``timing``: the engine's start and the seconds its work took, with what the plan
        estimated it would run (``auditc plan --throughput-from`` refreshes its GPU-time table from it)."""
        fp = engine.fingerprint() if hasattr(engine, "fingerprint") else {}
        was = self.timing.get(mid)
        if was:  # loaded again in a later phase
            was["start_s"] = round(was["start_s"] + start_s, 2)
            was["engine_s"] = round(was["engine_s"] + engine_s, 2)
            return
        self.timing[mid] = {"engine": cfg.engine, "device": fp.get("device"), "dtype": fp.get("dtype"),
                            "size_b": getattr(self.spec.get(mid).value, "size", None), "start_s": round(start_s, 2),
                            "engine_s": round(engine_s, 2), "tokens": self.plan.tokens_by_model.get(mid)}


def engine_config(spec: Spec, plan: Plan, mid: str, engine_override: str | None = None) -> ModelConfig:
    """The configuration ``auditc run`` loads model ``mid`` with: the spec's declaration
    (:func:`~auditlang.resolve.models.model_config`) with ``prefix_caching=auto`` resolved (on)
    for the request kinds the plan sends the model in every stage (``Plan.model_kinds``)."""
    cfg = model_config(spec, mid, engine_override, kinds=plan.model_kinds(mid))
    if cfg.engine == "vllm" and cfg.options.get("enforce_eager") is None:
        # small planned work: no torch.compile / CUDA graphs (plan/gputime.py's rule; on a CPU eager anyway)
        rule = eager_for(cfg.engine, getattr(spec.get(mid).value, "size", None), cfg.dtype, plan.tokens_by_model.get(mid))
        if rule is not None and rule[0]:
            cfg = dataclasses.replace(cfg, options={**cfg.options, "enforce_eager": True})
    return cfg


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
    keys = _item_keys(plan)
    return lambda req: keys.get(req.id, req.id)


def _item_keys(plan: Plan) -> dict[str, str]:
    """Stage-1 request id -> its item (``model/dataset/split/row``; a request shared by items: the first)."""
    keys: dict[str, str] = {}
    for unit in plan.units.values():
        for per_item in unit.stage1.values():
            for ctx, reqs in zip(unit.contexts, per_item):
                for r in reqs.values():
                    keys.setdefault(r.id, f"{unit.model}/{unit.dataset}/{unit.split}/{ctx.index}")
    return keys


def item_shard(plan: Plan, index: int, count: int) -> Shard:
    """Shard ``index`` of ``count`` of the plan (``auditc run --shard``, the Ray executor's units):
    whole items (an item's stage-1 requests in one shard, see :func:`item_shard_key`), balanced
    by stage-1 request count within each model (``store.shards.balanced_shards``), so each shard
    gets about the same share of every model's requests also when items need different numbers
    of requests (protocols, variants or audits that only some items get). Deterministic: a
    function of the plan."""
    keys = _item_keys(plan)
    by_model: dict[str, dict[str, int]] = {}
    for key in keys.values():
        weights = by_model.setdefault(key.split("/", 1)[0], {})
        weights[key] = weights.get(key, 0) + 1
    owner_of: dict[str, int] = {}
    for weights in by_model.values():
        owner_of.update(balanced_shards(weights, count))
    item_of = {rid: owner_of[key] for rid, key in keys.items()}
    return Shard(index, count, owner=lambda req: item_of.get(req.id, shard_of(req.id, count)))
