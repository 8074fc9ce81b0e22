"""The pipeline as functions over typed artifacts; the CLI and notebooks call these.

``compile_spec(path) -> Spec`` → ``plan_spec(spec, data_root) -> Plan`` →
``execute_plan(spec, plan, run_dir)`` (journal) → ``score_and_write(...)`` (records, metrics) →
``write_report(...)`` (files). ``load_run(run_dir)`` reads a run directory back as it was run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditlang import stdlib_location
from auditlang.core.diagnostics import CompileError
from auditlang.core.errors import UserError
from auditlang.core.trust import enforce
from auditlang.execute.access import (
    access_record, check_access, load_allowances, offline_hubs, run_access, withhold_hub_token)
from auditlang.plan.limit import Limit
from auditlang.plan.model import PLAN_VERSION, Plan
from auditlang.plan.planner import Planner
from auditlang.plan.from_journal import FromJournal
from auditlang.resolve import compile_spec
from auditlang.core.engine_options import OPENAI_BASE_URL_ENV
from auditlang.resolve.overrides import from_records
from auditlang.resolve.spec import Spec
from auditlang.store.integrity import check_inputs, check_journal, check_outputs, record
from auditlang.store.inputs import save_inputs
from auditlang.store.journal import Journal, check_journal_file
from auditlang.store.rundir import (
    CELLS_CSV, JOURNAL, PLAN_FILE, RECORDS, REPORT_DIR, RUN_FILE, RUN_FORMAT, STDLIB_DIR, read_plan_file, read_plan_ids,
    check_out_dir, read_run_file)
from auditlang.store.runlock import RunLock
from auditlang.core.registry import REGISTRY


def default_run_dir(spec_path: str) -> Path:
    return Path("runs") / Path(spec_path).stem


def plan_spec(spec: Spec, data_root: str | None = None, limit: int | str | None = None,
              data_files: dict[str, Path] | None = None, data_meta: dict[str, dict] | None = None,
              step=None, no_download: dict[str, str] | None = None) -> Plan:
    """The plan a run executes: every dataset must be readable (no estimates). ``data_files`` /
    ``data_meta``: read these copies instead (a run directory's, see ``load_run``). ``step``,
    ``no_download``: see :class:`~auditlang.plan.planner.Planner` (progress of long planning; hub
    datasets read offline, ``execute.access.offline_hubs``)."""
    planner = Planner(spec, data_root, load_data=True, limit=limit, data_files=data_files, data_meta=data_meta,
                      step=step, no_download=no_download)
    plan = planner.build()
    if plan.estimated:
        missing = [d for d, i in plan.datasets.items() if not i.get("available")]
        causes = "".join(f"\n  {n.split(' — counts are estimates')[0]}" for n in plan.notes
                         if any(n.startswith(f"dataset '{d}':") for d in missing))
        hubs = [d for d in missing if spec.get(d).ctor == "hub"]
        raise UserError(f"cannot run: dataset(s) {', '.join(missing)} are not available{causes}",
                        hint=(planner.hints.get(hubs[0]) if hubs else None)
                        or "pass --data-root DIR or set AUDITLANG_DATA_ROOT to the folder holding the data files")
    return plan


def prepare(spec_path: str, data_root: str | None, limit: int | str | None) -> tuple[Spec, Plan]:
    spec = compile_spec(spec_path)
    return spec, plan_spec(spec, data_root, limit)


@dataclass
class Run:
    """A run directory read back: the spec and plan exactly as they were run, and run.json."""

    run_dir: Path
    spec: Spec
    plan: Plan
    info: dict[str, Any]

    @property
    def fingerprints(self) -> dict[str, str]:
        return dict(self.info.get("fingerprints", {}))

    @property
    def records(self):
        """One row per cell x item (``records.parquet``) as a pandas DataFrame."""
        from auditlang.store.records import read_records  # lazy: pandas/pyarrow only when asked

        check_outputs(self.run_dir, (RECORDS,))
        return read_records(self.run_dir / RECORDS)

    @property
    def metrics(self):
        """Per-cell metrics with bootstrap intervals (``metrics/cells.csv``) as a DataFrame."""
        import pandas as pd  # lazy: pandas only when asked

        check_outputs(self.run_dir, (CELLS_CSV,))
        return pd.read_csv(self.run_dir / CELLS_CSV)

    @property
    def comparisons(self) -> dict[str, Any]:
        """The spec's comparisons as the report computed them: name -> DataFrame (``report/comparisons/*.csv``)."""
        import pandas as pd  # lazy: pandas only when asked

        folder = self.report_dir / "comparisons"
        return {p.stem: pd.read_csv(p) for p in sorted(folder.glob("*.csv"))} if folder.is_dir() else {}

    @property
    def report_dir(self) -> Path:
        return self.run_dir / REPORT_DIR

    def stdlib(self):
        """Context in which ``stdlib/`` names resolve to the run's stored standard library (wrap
        scoring and reporting in it, so templates render as they did at run time)."""
        return stdlib_location.use(self.run_dir / STDLIB_DIR)


def _check_run_dir(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    info = read_run_file(run_dir)
    if not info:
        raise UserError(f"{run_dir} is not a run directory (no {RUN_FILE})", hint="run `auditc run SPEC --out DIR` first")
    if info.get("format") != RUN_FORMAT:
        raise UserError(f"{run_dir} was written by an older auditlang (format {info.get('format', '1')}, this is {RUN_FORMAT}): "
                        "it holds no copy of its spec and data",
                        hint="rerun the same `auditc run SPEC --out DIR`: stored results are reused, nothing is re-executed")
    plan_json = read_plan_file(run_dir)
    if plan_json.get("version") != PLAN_VERSION:
        raise UserError(f"{run_dir}/{PLAN_FILE} is missing or has plan version {plan_json.get('version')!r} "
                        f"(this auditlang reads {PLAN_VERSION})",
                        hint="rerun `auditc run` with this auditlang version to rebuild the plan")
    return info, plan_json


def _ids_by_model(plan: Plan) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in plan.requests:
        out.setdefault(r.model, []).append(r.id)
    return out


def _data_files(run_dir: Path, info: dict[str, Any]) -> dict[str, Path]:
    return {d: run_dir / e["file"] for d, e in info.get("data", {}).items()}


def _data_meta(info: dict[str, Any]) -> dict[str, dict]:
    return {d: dict(e.get("meta") or {}) for d, e in info.get("data", {}).items()}


def load_run(run_dir: str | Path) -> Run:
    """Read a run directory back: check the hashes its stages recorded (plan, spec and data copies,
    journal: :mod:`auditlang.store.integrity`), compile its stored spec against its stored stdlib,
    re-plan from its stored data, and check the plan hash against ``plan.json``. Nothing outside the run
    directory is read, so it works from any folder and on any machine."""
    run_dir = Path(run_dir)
    info, plan_json = _check_run_dir(run_dir)
    check_inputs(run_dir, info)  # plan, spec and data copies as the run wrote them (store/integrity.py)
    check_journal(run_dir, info)
    entry = run_dir / info["spec_entry"]
    with stdlib_location.use(run_dir / STDLIB_DIR):
        try:
            spec = compile_spec(entry, swaps=info.get("model_swaps") or None,
                                model_args=from_records(info.get("model_args")), confine_models=False)
        except CompileError:
            _missing_plugins(run_dir, info)
            raise
        plan = plan_spec(spec, None, info.get("limit"), data_files=_data_files(run_dir, info),
                         data_meta=_data_meta(info))
        stored_ids = read_plan_ids(run_dir)
        if plan.hash != plan_json.get("hash") or (
                stored_ids is not None and stored_ids != _ids_by_model(plan)):
            raise UserError(f"{run_dir}: the plan rebuilt from its stored spec and data ({plan.hash}) is not the plan "
                            f"it ran ({plan_json.get('hash')})",
                            hint="the run directory's spec/ or data/ was edited, or it was written by another auditlang "
                                 "version; rerun `auditc run` to bring it up to date")
    return Run(run_dir, spec, plan, info)


def _missing_plugins(run_dir: Path, info: dict[str, Any]) -> None:
    """A UserError naming the plugins the run used that are not installed here (run.json
    ``plugin_components``), when that is why its stored spec does not compile."""
    gone = {}
    for key, plugin in (info.get("plugin_components") or {}).items():
        kind, _, name = key.partition(" ")
        if REGISTRY.find(kind, name) is None:
            gone[key] = plugin
    if gone:
        lines = "\n  ".join(f"{k.split(' ', 1)[0]} '{k.split(' ', 1)[1]}' comes from plugin {p}, not installed"
                            for k, p in gone.items())
        dists = sorted({p.rsplit(" ", 1)[0] + "==" + p.rsplit(" ", 1)[-1] for p in gone.values()})
        raise UserError(f"{run_dir}: the run used components of plugins this machine does not have:\n  {lines}",
                        hint=f"install them (pip install {' '.join(dists)}) and run the command again"
                             + ("; AUDITLANG_NO_PLUGINS is set, which turns installed plugins off"
                                if os.environ.get("AUDITLANG_NO_PLUGINS", "").strip() not in ("", "0") else ""))


def changed_cells(run: Run, new_plan: Plan) -> list[str]:
    """Cells of ``new_plan`` that this run did not execute as they are now (new, or changed)."""
    old = {c.id: c.hash for c in run.plan.cells}
    return [c.id for c in new_plan.cells if old.get(c.id) != c.hash]


def missing_requests(run: Run, spec: Spec, plan: Plan) -> int:
    """How many requests ``plan`` needs (stage 1, follow-ups, cross stage) that the run's
    journal does not hold under the run's engine fingerprints."""
    fps = run.fingerprints
    n = 0
    with Journal(run.run_dir) as journal:
        def count(reqs) -> int:
            by_model: dict[str, list[str]] = {}
            for r in reqs:
                by_model.setdefault(r.model, []).append(r.id)
            k = 0
            for mid, ids in by_model.items():
                fp = fps.get(mid)
                k += len(set(ids)) - (len(journal.committed(ids, fp)) if fp else 0)
            return k

        followups = FromJournal(spec, plan, journal, fps)  # each stage counted on its own, as the run executes it
        n += count(plan.requests)
        n += count(followups.stage2())
        n += count(followups.judges())
        n += count(followups.cross())
    return n


def adopt_spec(run: Run, spec_path: str | Path) -> Run:
    """``auditc report RUN_DIR --spec NEW``: re-plan NEW on the run's stored data; when every cell
    and request NEW needs was executed by this run, NEW becomes the run's spec (its sources are
    copied into the run directory); otherwise a UserError names the cells that must run first."""
    spec = compile_spec(spec_path, swaps=run.info.get("model_swaps") or None,
                        model_args=from_records(run.info.get("model_args")))
    stored = _data_files(run.run_dir, run.info)
    plan = Planner(spec, None, load_data=True, limit=run.info.get("limit"),
                   data_files={d: p for d, p in stored.items() if d in spec.objects},
                   data_meta={d: m for d, m in _data_meta(run.info).items() if d in spec.objects}).build()
    changed = changed_cells(run, plan)
    if plan.estimated:
        changed += [f"(dataset {d}: not part of this run)" for d, i in plan.datasets.items() if not i.get("available")]
    if not changed:
        missing = missing_requests(run, spec, plan)
        if missing:
            changed = [f"({missing} request(s) this run did not execute)"]
    if changed:
        shown = "\n  ".join(changed[:12]) + (f"\n  ... and {len(changed) - 12} more" if len(changed) > 12 else "")
        raise UserError(f"{spec_path} needs work this run did not do; changed or new cells:\n  {shown}",
                        hint=f"run `auditc run {spec_path} --out {run.run_dir}` to execute them "
                             "(stored results are reused); report accepts only new compare/report/metric statements")
    info = save_inputs(spec, plan, run.run_dir, **{k: v for k, v in run.info.items()
                                                  if k not in ("spec_entry", "data", "plan_hash", "format", "spec", "plan", "run_dir")})
    with stdlib_location.use(run.run_dir / STDLIB_DIR):
        new_spec = compile_spec(run.run_dir / info["spec_entry"], swaps=info.get("model_swaps") or None,
                                model_args=from_records(info.get("model_args")), confine_models=False)
        new_plan = plan_spec(new_spec, None, info.get("limit"), data_files=_data_files(run.run_dir, info),
                             data_meta=_data_meta(info))
    return Run(run.run_dir, new_spec, new_plan, info)


def write_report(spec: Spec, plan: Plan, run_dir: Path) -> Path:
    from auditlang.report import build_report  # lazy: report code (pandas, matplotlib) only when a report is written

    return build_report(spec, plan, Path(run_dir))


def run_spec(spec: Spec, plan: Plan, run_dir: Path, *, limit: int | str | None = None, engine: str | None = None,
             report: bool = True, progress: bool | str = False, retry_errors: bool = True, shard=None,
             cache_dir: str | Path | None = None, run_fields: dict[str, Any] | None = None, announce=None,
             log=print, executor=None) -> Run | None:
    """Execute a planned spec into ``run_dir`` (inputs stored first, resumable), then score and
    report it. ``limit`` must be the one the plan was built with (it is recorded for read-back);
    ``run_fields`` are recorded in run.json too (command-line choices such as model swaps);
    ``cache_dir``: a response cache shared across run directories; ``announce(msg)``: progress
    lines for the steps after execution. A shard run (``shard``) stops after execution and
    returns None: merge, then report. ``executor``: a function with ``execute_plan``'s signature
    that executes elsewhere (the Ray driver, ``auditlang.scaleout.rayexec.execute_on_ray``);
    default: this process."""
    from auditlang.execute.runner import execute_plan  # lazy: the engine machinery only for runs (not show, plan --pilot)
    from auditlang.score.stage import score_and_write  # lazy: pandas only for runs (not show, plan --pilot)

    announce = announce or (lambda msg: None)
    run_dir = Path(run_dir)
    with RunLock(run_dir) as lock:
        lock.beat(doing="writing the run's inputs (spec, data, plan)")
        recorded = Limit.parse(limit).recorded if limit is not None else None  # "10%", "10:20" as written; a count an int
        info = save_inputs(spec, plan, run_dir, limit=recorded, engine_override=engine,
                           **{"executor": {"name": "local"}, **(run_fields or {}),
                              # -M / --model-args: read back with them (load_run), disclosed by the checklist
                              "model_args": list(spec.model_args), "model_overrides": list(spec.model_overrides)})
        fps = (executor or execute_plan)(spec, plan, run_dir, engine_override=engine, progress=progress, shard=shard,
                                         retry_errors=retry_errors, log=log, beat=lock.beat, cache_dir=cache_dir)
        if shard is not None:
            record(run_dir, (), journal=True)  # what the shard's journal vouches for (store/integrity.py)
            return None
        lock.beat(doing="scoring")
        t0 = time.perf_counter()
        announce("scoring, metrics and bootstrap intervals ...")
        score_and_write(spec, plan, run_dir, fps)
        if report:
            lock.beat(doing="writing the report")
            announce(f"scored in {time.perf_counter() - t0:.1f}s; writing the report ...")
            write_report(spec, plan, run_dir)
    return Run(run_dir, spec, plan, {**info, **read_run_file(run_dir), "fingerprints": fps})


@dataclass
class RunPlan:
    """A spec planned for a run (``auditc run`` and ``auditlang.run()`` both build it with
    :func:`plan_run` and start it with :func:`start_run`): the plan, the user's allowances and
    what the run will contact, and the models whose server URL comes from the environment."""

    spec: Spec
    plan: Plan
    allow: Any
    access: list
    env_settings: dict[str, str]


def env_settings(spec: Spec, engine: str | None = None) -> dict[str, str]:
    """Models whose server URL comes from $OPENAI_BASE_URL (openai(...) naming no base_url, or
    every model under ``--engine openai``)."""
    url = os.environ.get(OPENAI_BASE_URL_ENV)
    if not url:
        return {}
    return {mid: url for mid, o in spec.of_kind("model").items()
            if (o.ctor == "openai" and "base_url" not in dict(o.param_spans))
            or (engine == "openai" and o.ctor != "openai")}


def plan_run(spec: Spec, data_root: str | None, limit: int | str | None, *, engine: str | None = None,
             allow_hosts=(), allow_secrets=(), step=None) -> RunPlan:
    """Check what the run may contact against the allowances (docs/security.md; CompileError
    E180/E181 before anything is downloaded), then plan it."""
    allow = load_allowances(list(allow_hosts), list(allow_secrets))
    access = run_access(spec, engine)
    bag = check_access(spec, access, allow)  # before planning: a hub dataset is downloaded while planning
    if bag.errors:
        raise CompileError(bag)
    offline = offline_hubs(spec, access, allow)  # hub datasets with a fallback file: not downloaded
    access = [a for a in access if a.model not in offline or a.kind != "dataset"]
    with withhold_hub_token(allow):  # the Hub token only with --allow-secret HF_TOKEN
        plan = plan_spec(spec, data_root, limit, step=step, no_download=offline)
    return RunPlan(spec, plan, allow, access, env_settings(spec, engine))


def require_cells(rp: RunPlan) -> None:
    """A plan with no cell is a UserError (`auditc run` says so after the spec's warnings)."""
    if not rp.plan.cells:
        spec = rp.spec
        raise UserError(f"nothing to run: {spec.entry.name} plans 0 cells" + (" (it declares no audit)" if not spec.of_kind("audit") else ""),
                        hint="add an audit block naming models, datasets, variants and protocols; `auditc plan` previews the cells")


def start_run(rp: RunPlan, run_dir: Path, *, limit: int | str | None, run_fields: dict[str, Any] | None = None,
              **kw: Any) -> Run | None:
    """Execute, score and report ``rp`` into ``run_dir`` (``run_spec``'s keyword arguments), with
    the allowances enforced for the run's duration and recorded in run.json with the access list
    and the environment's settings."""
    require_cells(rp)
    check_out_dir(run_dir)
    check_journal_file(Path(run_dir) / JOURNAL)  # never into a database auditlang did not create
    if kw.get("cache_dir"):
        check_journal_file(Path(kw["cache_dir"]).expanduser() / JOURNAL)
    fields = {"env_settings": {m: {"base_url": u, "from": OPENAI_BASE_URL_ENV} for m, u in rp.env_settings.items()},
              "access": access_record(rp.access, rp.allow), **(run_fields or {})}
    enforce(rp.allow)
    try:
        with withhold_hub_token(rp.allow):
            return run_spec(rp.spec, rp.plan, run_dir, limit=limit, run_fields=fields, **kw)
    finally:
        enforce(None)
