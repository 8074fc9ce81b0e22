"""Work units of a distributed run: (model, item shard ``i`` of ``K``), stage 1 and stage 2 together.

A unit executes with the same runner, executor and journal code as a local run
(``execute_plan(..., phases=("models",), only_models={model}, shard=...)``), into its own run
directory ``RUN_DIR/units/<model>.<i>of<K>/`` (a journal and a run.json with the engine
fingerprint). A unit that is started again (a Ray retry after its worker died, or a rerun of
the driver) resumes from that journal: committed requests are never executed twice. The unit
reads the run back with :func:`auditlang.api.load_run` (stored spec, stdlib and data; plan hash
checked), so a worker needs only the run directory on a shared filesystem.

``attempts.jsonl`` in the unit directory has one line per start and one per finish of the unit
(pid, host, attempt, requests executed and cached), so retries are visible after the fact.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from auditlang.api import load_run
from auditlang.execute.runner import execute_plan, item_shard
from auditlang.plan.model import Plan
from auditlang.resolve.models import model_config
from auditlang.resolve.spec import Spec
from auditlang.store.rundir import read_run_file, write_json_atomic

UNITS_DIR = "units"
ATTEMPTS = "attempts.jsonl"
MERGED = "merged.json"
FINAL = "_cross_and_judges"


@dataclass(frozen=True)
class Unit:
    """One Ray task: ``model``'s items in shard ``index`` of ``count``; ``gpus`` it requests."""

    model: str
    index: int
    count: int
    gpus: float = 0

    @property
    def name(self) -> str:
        return f"{self.model}.{self.index}of{self.count}"

    def dir(self, run_dir: Path) -> Path:
        return Path(run_dir) / UNITS_DIR / self.name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gpus_for(spec: Spec, mid: str, engine_override: str | None, cluster_gpus: float) -> float:
    """GPUs a unit of model ``mid`` requests: vLLM its tensor-parallel size (0 on a cluster
    without GPUs); hf 1 on cuda (and on ``auto`` when the cluster has GPUs), 0 on cpu; dryrun and
    openai (a server elsewhere) 0."""
    cfg = model_config(spec, mid, engine_override)
    if cfg.engine == "vllm":  # on a cluster without GPUs: vLLM's CPU build
        return float(cfg.options.get("tensor_parallel_size", 1) or 1) if cluster_gpus > 0 else 0.0
    if cfg.engine == "hf":
        return 1.0 if cfg.device == "cuda" or (cfg.device == "auto" and cluster_gpus > 0) else 0.0
    return 0.0


def plan_units(spec: Spec, plan: Plan, shards: int, engine_override: str | None, cluster_gpus: float = 0) -> list[Unit]:
    """Every unit of the plan's audited models (models with stage-1 requests), model by model."""
    audited = [m for m in plan.models if any(r.model == m for r in plan.requests)]
    return [Unit(m, i, shards, gpus_for(spec, m, engine_override, cluster_gpus)) for m in audited for i in range(shards)]


def unit_request_count(plan: Plan, unit: Unit) -> int:
    """Stage-1 requests of the unit (unique ids), for progress estimates."""
    shard = item_shard(plan, unit.index, unit.count)
    return len(shard.select({r.id: r for r in plan.requests if r.model == unit.model}.values()))


def is_merged(run_dir: Path, unit: Unit, plan_hash: str) -> bool:
    p = unit.dir(run_dir) / MERGED
    try:
        return json.loads(p.read_text(encoding="utf-8")).get("plan_hash") == plan_hash
    except (OSError, ValueError):
        return False


def mark_merged(run_dir: Path, unit: Unit, plan_hash: str, stats: dict[str, Any]) -> None:
    write_json_atomic(unit.dir(run_dir) / MERGED, {"plan_hash": plan_hash, **stats}, indent=1)


def _attempt(udir: Path, **entry: Any) -> int:
    """Append a line to ``attempts.jsonl``; returns the number of starts before this line."""
    path = udir / ATTEMPTS
    prior = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    starts = sum(json.loads(line).get("event") == "start" for line in prior)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({**entry, "pid": os.getpid(), "host": socket.gethostname(), "time": time.time()}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return starts


def run_unit(run_dir: str, unit: dict[str, Any], retry_errors: bool = False, *, engines: dict | None = None,
             run=None) -> dict[str, Any]:
    """Execute one unit (stage 1 + stage 2 of its model's items in its shard) into its unit
    directory. Returns ``{"unit", "fingerprints", "executed", "cached", "errors", "seconds",
    "attempt"}``. ``engines`` / ``run``: an engine cache and the run read back, kept by a
    :class:`UnitWorker` across units."""
    u = Unit(**unit)
    run = run or load_run(run_dir)
    udir = u.dir(run.run_dir)
    udir.mkdir(parents=True, exist_ok=True)
    attempt = _attempt(udir, event="start") + 1
    t0 = time.perf_counter()
    shard = item_shard(run.plan, u.index, u.count)
    with run.stdlib():
        fps = execute_plan(run.spec, run.plan, udir, engine_override=run.info.get("engine_override"), progress=False,
                           shard=shard, retry_errors=retry_errors, phases=("models",), only_models={u.model}, engines=engines,
                           log=lambda msg: print(f"[{u.name}] {msg}", flush=True))
    totals = read_run_file(udir).get("last_run", {})
    stats = {"unit": u.name, "fingerprints": fps, "executed": totals.get("executed", 0),
             "cached": totals.get("cached", 0), "errors": totals.get("errors", 0),
             "seconds": time.perf_counter() - t0, "attempt": attempt}
    _attempt(udir, event="finish", **{k: v for k, v in stats.items() if k != "fingerprints"})
    return stats


class UnitWorker:
    """Runs units one after another in one process (a Ray actor holding the model's GPUs): the
    run is read back once and each model's engine is loaded once, then kept for the next unit."""

    def __init__(self) -> None:
        self.engines: dict[str, Any] = {}
        self.runs: dict[str, Any] = {}

    def run(self, run_dir: str, unit: dict[str, Any], retry_errors: bool = False) -> dict[str, Any]:
        if run_dir not in self.runs:
            self.runs[run_dir] = load_run(run_dir)
        return run_unit(run_dir, unit, retry_errors, engines=self.engines, run=self.runs[run_dir])

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()
        self.engines.clear()


def run_final(run_dir: str, retry_errors: bool = False) -> dict[str, Any]:
    """The cross stage and judge models, on the merged journal of the run directory itself
    (after every unit is merged). Returns the same keys as :func:`run_unit`."""
    run = load_run(run_dir)
    t0 = time.perf_counter()
    with run.stdlib():
        fps = execute_plan(run.spec, run.plan, run.run_dir, engine_override=run.info.get("engine_override"),
                           progress=False, retry_errors=retry_errors, phases=("cross", "judge"),
                           log=lambda msg: print(f"[{FINAL}] {msg}", flush=True))
    totals = read_run_file(run.run_dir).get("last_run", {})
    return {"unit": FINAL, "fingerprints": fps, "executed": totals.get("executed", 0),
            "cached": totals.get("cached", 0), "errors": totals.get("errors", 0),
            "seconds": time.perf_counter() - t0, "attempt": 1}
