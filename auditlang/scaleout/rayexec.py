"""`auditc run SPEC --executor ray`: the Ray driver.

The driver compiles and plans once, writes the run's inputs (``save_inputs``), then schedules
its units (:mod:`auditlang.scaleout.units`: a model's items in shard ``i`` of ``K``, stage 1
and stage 2) on workers: Ray actors that request the GPUs the model needs, load its engine once
and run their share of its units one after another (several workers of a model are data
parallelism); a worker is released when its units are done, freeing its GPUs for the next model. As each unit finishes, its journal is
merged into ``RUN_DIR/journal.sqlite`` (``merge_journals``: one transaction per unit, so the
merged journal is always consistent) and the unit is marked merged. Then one more task runs the
cross stage and the judge models on the merged journal, and the driver scores and reports as a
local run does. Ray restarts a worker that died (its process or its node) and retries its unit
(``max_restarts`` / ``max_task_retries``); the retry resumes from the unit's journal. A rerun of the same command after the driver died skips merged units
and resumes the others. Requires a filesystem shared by the driver and every worker (the run
directory's path must be the same on every node).
"""

from __future__ import annotations

import math
from pathlib import Path

from auditlang.core.errors import AuditlangError, RuntimeFailure
from auditlang.plan.cross import cross_sources
from auditlang.plan.model import Plan
from auditlang.resolve.spec import Spec
from auditlang.scaleout.progress import DriverProgress, committed_results, plain_worker_logs
from auditlang.scaleout.units import (
    Unit, UnitWorker, gpus_for, is_merged, mark_merged, plan_units, run_final, unit_request_count)
from auditlang.store.rundir import read_run_file, write_run_file
from auditlang.store.shards import merge_journals

INSTALL = "pip install 'auditlang[ray]'   (or: pip install 'ray>=2.40')"
DEFAULT_SHARDS = 4
MAX_RETRIES = 3


def require_ray():
    """The ``ray`` module, or a RuntimeFailure (exit 3) with the install command."""
    try:
        import ray  # lazy: optional dependency, only for --executor ray
    except ImportError:
        raise RuntimeFailure("--executor ray needs the Ray package, which is not installed",
                             hint=f"install it with: {INSTALL}; or run without --executor ray (local)") from None
    return ray


def _connect(ray, address: str | None, log) -> bool:
    """Use the Ray session already open in this process, else connect to ``address`` (a cluster's
    head, or $RAY_ADDRESS), else start a local one. Returns whether this call started it."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=True, logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise RuntimeFailure(f"cannot connect to the Ray cluster at {address or '$RAY_ADDRESS / a new local one'}: {e}",
                             hint="start the head with `ray start --head` and pass --address HOST:6379") from None
    res = ray.cluster_resources()
    log(f"[ray] connected: {res.get('CPU', 0):g} CPUs, {res.get('GPU', 0):g} GPUs, "
        f"{len(ray.nodes())} node(s)")
    return True


def _unwrap(ray, e: Exception, what: str) -> Exception:
    """A user-facing error for a failed task: the task's own auditlang error when it raised one."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, AuditlangError):
        return cause
    if isinstance(e, ray.exceptions.RayTaskError):
        return RuntimeFailure(f"{what} failed: {cause!r}" if cause is not None else f"{what} failed: {e}",
                              hint="rerun the same command to resume (merged units are kept)")
    return RuntimeFailure(f"{what}: its worker died {MAX_RETRIES + 1} times ({type(e).__name__})",
                          hint="rerun the same command to resume; committed results are kept")


def _replicas(units: list[Unit], resources: dict) -> dict[str, int]:
    """Workers (Ray actors) per model: as many as its share of the cluster allows (GPUs for a
    model that needs them, else CPUs, split evenly between the models, rounded up: more workers
    than GPUs wait for one), at least 1, at most its number of units. Each worker loads the
    model once and runs its units one after another."""
    models: dict[str, list[Unit]] = {}
    for u in units:
        models.setdefault(u.model, []).append(u)
    out = {}
    for m, us in models.items():
        g = us[0].gpus
        fits = resources.get("GPU", 0) / g if g > 0 else resources.get("CPU", 1)
        if fits < 1:
            raise RuntimeFailure(f"model '{m}' needs {g:g} GPU(s) per worker, the Ray cluster has "
                                 f"{resources.get('GPU', 0):g}", hint="add GPU nodes, or lower the model's tensor_parallel")
        out[m] = max(1, min(len(us), math.ceil(fits / len(models))))
    return out


def _submit(ray, units: list[Unit], replicas: dict[str, int], run_dir: str, retry_errors: bool):
    """Start the workers and queue every unit on one of its model's workers (round robin).
    Returns ({object ref: (unit, actor)}, [actors])."""
    worker = ray.remote(max_restarts=MAX_RETRIES, max_task_retries=MAX_RETRIES, num_cpus=1)(UnitWorker)
    pending, actors = {}, []
    by_model: dict[str, list[Unit]] = {}
    for u in units:
        by_model.setdefault(u.model, []).append(u)
    for m, us in by_model.items():
        mine = [worker.options(num_gpus=us[0].gpus, name=None).remote() for _ in range(replicas[m])]
        actors += mine
        for i, u in enumerate(us):
            actor = mine[i % len(mine)]
            pending[actor.run.remote(run_dir, u.to_dict(), retry_errors)] = (u, actor)
    return pending, actors


def _has_final_work(spec: Spec, plan: Plan) -> bool:
    """Whether the spec has a cross stage (candidates from other units) or an LLM judge: only
    then is the final task (one more Ray worker loading auditlang) started."""
    return bool(cross_sources(spec, plan) or spec.judge_models({key[0] for key in plan.units}))


def _record_fingerprints(run_dir: Path, fps: dict[str, str]) -> None:
    info = read_run_file(run_dir)
    info.setdefault("fingerprints", {}).update(fps)
    write_run_file(run_dir, info)


def execute_on_ray(spec: Spec, plan: Plan, run_dir: Path, *, engine_override: str | None, address: str | None = None,
                   shards: int | None = None, retry_errors: bool = False, log=print, beat=None,
                   interval: float = 10.0, progress: bool | str = False, shard=None, cache_dir=None) -> dict[str, str]:
    """Execute the plan on a Ray cluster into ``run_dir`` (inputs already saved). Returns model
    id -> fingerprint hash, like ``execute_plan`` (whose keyword arguments it takes: ``progress``
    is the driver's plain lines either way; ``shard`` must be None, the units are the shards;
    ``cache_dir``, the response cache, is not used: workers on other nodes cannot share it)."""
    if shard is not None:
        raise RuntimeFailure("--shard and --executor ray do not combine: the Ray executor shards the run itself",
                             hint="use --ray-shards K to choose how many item shards per model")
    ray = require_ray()
    with plain_worker_logs():  # Ray's coloured worker-log prefixes stay out of log files
        return _execute(ray, spec, plan, run_dir, engine_override=engine_override, address=address, shards=shards,
                        retry_errors=retry_errors, log=log, beat=beat, interval=interval, cache_dir=cache_dir)


def _execute(ray, spec: Spec, plan: Plan, run_dir: Path, *, engine_override: str | None, address: str | None,
             shards: int | None, retry_errors: bool, log, beat, interval: float, cache_dir) -> dict[str, str]:
    beat = beat or (lambda **_: None)
    run_dir = Path(run_dir).resolve()
    started = _connect(ray, address, log)
    if cache_dir:
        log(f"note: the Ray executor does not use the response cache {cache_dir}")
    actors: list = []
    try:
        cluster_gpus = float(ray.cluster_resources().get("GPU", 0))
        k = shards or DEFAULT_SHARDS
        units = plan_units(spec, plan, k, engine_override, cluster_gpus)
        final_gpus = max([gpus_for(spec, m, engine_override, cluster_gpus) for m in plan.models] + [0.0])
        if final_gpus > cluster_gpus:
            raise RuntimeFailure(f"the cross stage and judge models need {final_gpus:g} GPU(s), the Ray cluster has "
                                 f"{cluster_gpus:g}", hint="add GPU nodes, or lower the judge model's tensor_parallel")
        info = read_run_file(run_dir)
        info["executor"] = {"name": "ray", "ray_version": ray.__version__, "shards": k, "units": len(units),
                            "gpus": {u.model: u.gpus for u in units},
                            "workers": _replicas(units, ray.cluster_resources())}
        write_run_file(run_dir, info)
        per_model: dict[str, int] = {}
        for u in units:
            per_model[u.model] = per_model.get(u.model, 0) + 1
        stage1 = len({r.id for r in plan.requests})
        meter = DriverProgress(per_model, stage1, plan.deferred_count / max(1, stage1))
        totals = {"executed": 0, "cached": 0, "errors": 0}
        todo: list[Unit] = []
        for u in units:
            if is_merged(run_dir, u, plan.hash):
                meter.unit_done(u.model, 0, unit_request_count(plan, u))
            else:
                todo.append(u)
        if len(todo) < len(units):
            log(f"[ray] resuming: {len(units) - len(todo)} of {len(units)} units already merged")
        replicas = _replicas(todo, ray.cluster_resources())
        pending, actors = _submit(ray, todo, replicas, str(run_dir), retry_errors)
        log(f"[ray] {len(todo)} unit(s) scheduled: {len(per_model)} model(s) x {k} item shard(s), on "
            + ", ".join(f"{m} {r}" for m, r in replicas.items()) + " worker(s)")
        beat(doing=f"ray: {len(todo)} units scheduled")
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=interval)
            if not ready:
                log(meter.line(sum(committed_results(u.dir(run_dir)) for u, _ in pending.values())))
                continue
            for ref in ready:
                u, actor = pending.pop(ref)
                try:
                    stats = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - Ray wraps task and worker failures; unwrapped below
                    raise _unwrap(ray, e, f"unit {u.name}") from None
                if not any(a is actor for _, a in pending.values()):
                    ray.kill(actor, no_restart=True)  # its units are done: free its GPUs for the next model
                    actors.remove(actor)
                merge_journals(run_dir, [u.dir(run_dir)])
                _record_fingerprints(run_dir, stats["fingerprints"])
                mark_merged(run_dir, u, plan.hash, {k2: stats[k2] for k2 in ("executed", "cached", "errors", "seconds", "attempt")})
                for key in totals:
                    totals[key] += stats[key]
                meter.unit_done(u.model, stats["executed"], stats["cached"])
                log(f"[ray] unit {u.name} merged: {stats['executed']} executed, {stats['cached']} cached "
                    f"in {stats['seconds']:.1f}s" + (f" (attempt {stats['attempt']})" if stats["attempt"] > 1 else ""))
                log(meter.line(sum(committed_results(p.dir(run_dir)) for p, _ in pending.values())))
                beat(doing=f"ray: {sum(meter.done.values())}/{len(units)} units merged")
        # The cross stage and judge models read every unit's answers: one task on the merged journal
        # (skipped when the spec has neither: a worker process would load auditlang for nothing).
        stats = {"fingerprints": {}}
        if _has_final_work(spec, plan):
            beat(doing="ray: cross stage and judge models")
            final = ray.remote(max_retries=MAX_RETRIES, num_cpus=1)(run_final).options(num_gpus=final_gpus, name="auditlang:final")
            try:
                stats = ray.get(final.remote(str(run_dir), retry_errors))
            except Exception as e:  # noqa: BLE001 - see above
                raise _unwrap(ray, e, "the cross/judge stage") from None
            for key in totals:
                totals[key] += stats[key]
        info = read_run_file(run_dir)
        fps = {**info.get("fingerprints", {}), **stats["fingerprints"]}
        info.update({"fingerprints": fps, "last_run": totals, "plan_hash": plan.hash})
        write_run_file(run_dir, info)
        log(f"requests: executed {totals['executed']}, cached {totals['cached']}, errors {totals['errors']}")
        return fps
    finally:
        for actor in actors:  # after a failure: the workers still holding GPUs
            ray.kill(actor, no_restart=True)
        if started:
            ray.shutdown()

