"""`auditc run SPEC`: plan, write the inputs into the run directory, execute, score, report."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import sys
from functools import partial
from pathlib import Path

from auditlang.api import default_run_dir, plan_run, require_cells, start_run
from auditlang.cli.common import (
    EXIT_OK, StepLog, parse_limit, parse_model_args, parse_swaps, print_diags, print_overrides, spec_warnings)
from auditlang.core.errors import RequestErrors, RuntimeFailure, UsageError, UserError
from auditlang.core.terminal import visible
from auditlang.execute.runner import item_shard
from auditlang.resolve import compile_spec
from auditlang.core.engine_options import OPENAI_BASE_URL_ENV
from auditlang.store.journal import check_journal_file
from auditlang.store.rundir import CELLS_CSV, JOURNAL, RECORDS, check_cache_dir, check_out_dir, read_run_file
from auditlang.store.shards import SHARD_FIELD, Shard, merge_command
from auditlang.store.inputs import clear_outputs, run_owner


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``I/N`` -> (I, N), checked before anything is planned or written."""
    if text is None:
        return None
    try:
        s = Shard.parse(text)
        if not 0 <= s.index < s.count:
            raise ValueError(f"invalid shard {text!r}: the index must be 0..{s.count - 1} for {s.count} shards")
    except ValueError as e:
        raise UsageError(f"--shard: {e}", hint="--shard 0/4 runs the first of four shards (0-based)") from None
    return s.index, s.count


def ray_executor(args, spec):
    """The Ray driver as ``run_spec``'s executor when ``--executor ray`` (or the spec's settings
    say ``executor = ray`` and no ``--executor`` is given); else None (this process)."""
    name = args.executor or spec.settings.executor
    if name != "ray":
        if args.address or args.ray_shards is not None:
            raise UsageError("--address and --ray-shards apply only to the Ray executor",
                             hint="add --executor ray (or `executor = ray` in the spec's settings)")
        return None
    if args.shard:
        raise UsageError("--shard does not combine with the Ray executor: it shards the run itself",
                         hint="use --ray-shards K for K item shards per model, or --executor local with --shard")
    if args.ray_shards is not None and args.ray_shards < 1:
        raise UsageError(f"--ray-shards must be >= 1, got {args.ray_shards}", hint="--ray-shards 4")
    from auditlang.scaleout.rayexec import execute_on_ray, require_ray  # lazy: Ray only for --executor ray

    require_ray()
    return partial(execute_on_ray, address=args.address, shards=args.ray_shards)


def cmd_run(args) -> int:
    shard_ix = parse_shard(args.shard)
    swaps = parse_swaps(args.swap_model)
    args.limit = parse_limit(args.limit)  # a count, fraction or range, as recorded
    display = "none" if args.no_progress else args.display
    cache_dir = args.cache or os.environ.get("AUDITLANG_CACHE_DIR") or None
    if cache_dir:
        check_cache_dir(cache_dir)  # a file, /dev/null or an unwritable path: a clear error before planning
        check_journal_file(Path(cache_dir).expanduser() / JOURNAL)  # a user's own journal.sqlite is not ours
    spec = compile_spec(args.spec, swaps=swaps, model_args=parse_model_args(args))
    executor = ray_executor(args, spec)
    step = StepLog() if display != "none" else None
    try:  # the pipeline auditlang.run() takes too (api.plan_run, api.start_run)
        rp = plan_run(spec, args.data_root, args.limit, engine=args.engine, allow_hosts=args.allow_host,
                      allow_secrets=args.allow_secret, step=step)
    finally:
        if step is not None:
            step(None)
    plan = rp.plan
    warned = spec_warnings(spec) + list(plan.warnings)  # the spec's own (W151, W159), then the data's
    if warned:
        print_diags(warned)
    require_cells(rp)
    for note in plan.notes:
        if "data root" in note or "fallback file" in note:
            print(visible(f"note: {note}"), file=sys.stderr)
    for name, expr in swaps.items():
        print(visible(f"note: model {name} swapped on the command line: {expr}"), file=sys.stderr)
    print_overrides(spec)
    for mid, url in rp.env_settings.items():
        print(f"note: model {mid} names no base_url: using ${OPENAI_BASE_URL_ENV} = {url}", file=sys.stderr)
    run_dir = Path(args.out) if args.out else default_run_dir(args.spec)
    check_out_dir(run_dir)
    check_journal_file(run_dir / JOURNAL)
    _check_owner(args, spec, run_dir)
    try:
        return _execute(args, rp, run_dir, shard_ix, display, cache_dir, swaps, executor)
    except shutil.Error as e:  # copytree gathers per-file failures: (src, dst, why)
        errs = e.args[0] if e.args and isinstance(e.args[0], list) and e.args[0] else None
        what = f"{errs[0][2]} (and {len(errs) - 1} more files)" if errs else str(e)
        raise _write_failure(args, run_dir, what) from None
    except OSError as e:
        if e.errno in WRITE_FAILURES:
            raise _write_failure(args, run_dir, f"{e.strerror}: {e.filename or run_dir}") from None
        raise
    except sqlite3.OperationalError as e:
        if any(w in str(e).lower() for w in ("disk is full", "disk i/o", "readonly", "unable to open")):
            raise _write_failure(args, run_dir, f"{e} (the journal {run_dir / JOURNAL})") from None
        raise


def _check_owner(args, spec, run_dir: Path) -> None:
    """Refuse a run directory that holds a run of another spec file, unless ``--replace``."""
    owner = run_owner(spec, run_dir)
    if owner is None:
        return
    if not getattr(args, "replace", False):
        raise UserError(f"{run_dir} holds a run of another spec, {owner} (this is {args.spec}); refusing to replace "
                        "its plan, records and report, nothing was written",
                        hint=f"run into another folder (--out runs/NAME), or pass --replace to make {run_dir} a run "
                             f"of {args.spec}")
    print(f"note: --replace: {run_dir} held a run of {owner}; its records and report are removed", file=sys.stderr)
    clear_outputs(run_dir)


WRITE_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _write_failure(args, run_dir: Path, what: str) -> RuntimeFailure:
    """A full disk (or a read-only one): a runtime failure naming the path and the resume command."""
    resume = f"auditc run {args.spec} --out {run_dir}" + (f" --data-root {args.data_root}" if args.data_root else "")
    return RuntimeFailure(f"cannot write the run directory: {what}",
                          hint=f"free space (or fix permissions), then resume with `{resume}`: results already "
                               "committed are kept")


def _execute(args, rp, run_dir: Path, shard_ix, display, cache_dir, swaps, executor) -> int:
    plan = rp.plan
    shard = item_shard(plan, *shard_ix) if shard_ix else None
    say(f"run {run_dir}: {len(plan.cells)} cells, {len(plan.requests)} stage-1 requests "
        f"(+{plan.deferred_count} follow-ups), naive {plan.naive_request_count}")
    run = start_run(rp, run_dir, limit=args.limit, engine=args.engine, report=not args.no_report,
                    progress=display, retry_errors=not args.keep_errors, shard=shard, cache_dir=cache_dir, executor=executor,
                    log=say, announce=say if display != "none" else None,
                    run_fields={"model_swaps": swaps, SHARD_FIELD: shard_record(plan, shard),
                                "response_cache": str(Path(cache_dir).resolve()) if cache_dir else None})
    if run is None:
        command, target, missing = merge_command(run_dir)
        say(f"shard {args.shard} done; " + (f"when shard(s) {', '.join(missing)} are done too, " if missing else "")
            + f"merge the shards with `{command}`, then `auditc report {target}`")
    else:
        say(f"done: {run_dir}")
    _raise_request_errors(args, run_dir)
    return EXIT_OK


def shard_record(plan, shard: Shard | None) -> dict | None:
    """run.json's ``shard``: which shard this directory runs and its stage-1 requests per model
    (what `auditc status` counts it against); None for a whole run."""
    if shard is None:
        return None
    per_model: dict[str, dict] = {}
    for r in plan.requests:
        per_model.setdefault(r.model, {})[r.id] = r
    return {"index": shard.index, "count": shard.count,
            "requests": {m: len(shard.select(reqs.values())) for m, reqs in per_model.items()}}


def say(msg: str) -> None:
    """A line of the run's story (header, model loads, totals, done): on stderr, with the
    progress and stage lines, so `> out 2> err` keeps it in one file."""
    print(visible(msg), file=sys.stderr, flush=True)


def _raise_request_errors(args, run_dir: Path) -> None:
    """Exit 4 (:class:`RequestErrors`) when requests failed in the engine: their count and the
    first message, from run.json's ``last_run`` (else the records' missing items, e.g. failures
    kept by --keep-errors on a model that was not loaded again)."""
    last = read_run_file(run_dir).get("last_run", {})
    count, first = int(last.get("errors") or 0), str(last.get("first_error") or "")
    if (not count or not first) and (run_dir / RECORDS).is_file():  # the Ray executor names no first error
        from auditlang.store.records import read_records  # lazy: pandas/pyarrow only after a run

        df = read_records(run_dir / RECORDS)
        bad = df[df["status"] != "ok"]
        if len(bad):
            ids = {json.loads(rids).get(json.loads(x).get("failed_role", "")) or err
                   for rids, x, err in zip(bad["request_ids"], bad["extras"], bad["error"])}
            count, first = count or len(ids), first or str(bad["error"].iat[0])
    if not count:
        return
    resume = f"auditc run {args.spec} --out {run_dir}" + (f" --data-root {args.data_root}" if args.data_root else "")
    raise RequestErrors(
        f"{count} request{'s' if count != 1 else ''} failed in the engine (first: {first}); their items are missing "
        f"from the metrics, never scored (n_error in {run_dir / CELLS_CSV} and the report)",
        hint=f"fix the cause, then `{resume}` retries exactly the failed requests")
