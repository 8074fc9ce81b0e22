"""`auditc run SPEC`: plan, write the inputs into the run directory, execute, score, report."""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

from auditlang.cli.common import print_diags
from auditlang.api import default_run_dir, plan_spec, write_report
from auditlang.core.errors import RuntimeFailure, UsageError, UserError
from auditlang.execute.runner import execute_plan, item_shard_key
from auditlang.resolve import compile_spec
from auditlang.store.inputs import save_inputs
from auditlang.store.rundir import JOURNAL, check_out_dir
from auditlang.store.runlock import RunLock
from auditlang.store.shards import Shard


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


def cmd_run(args) -> int:
    from auditlang.core.diagnostics import CompileError
    from auditlang.execute.access import access_record, check_access, enforce, load_allowances, run_access

    shard_ix = parse_shard(args.shard)
    spec = compile_spec(args.spec)
    plan = plan_spec(spec, args.data_root, args.limit)
    if plan.warnings:
        print_diags(plan.warnings)
    allow = load_allowances(args.allow_host, args.allow_secret)
    access = run_access(spec, args.engine)
    bag = check_access(spec, access, allow)
    if bag.errors:
        raise CompileError(bag)
    run_dir = Path(args.out) if args.out else default_run_dir(args.spec)
    check_out_dir(run_dir)
    enforce(allow)
    try:
        return _execute(args, spec, plan, run_dir, shard_ix, access_record(access, allow))
    except shutil.Error as e:  # copytree gathers per-file failures: (src, dst, why)
        first = e.args[0][0] if e.args and isinstance(e.args[0], list) and e.args[0] else (None, None, str(e))
        raise _write_failure(args, run_dir, f"{first[2]} (and {max(0, len(e.args[0]) - 1)} more files)"
                             if isinstance(e.args[0], list) else str(e)) from None
    except OSError as e:
        if e.errno in WRITE_FAILURES:
            raise _write_failure(args, run_dir, f"{e.strerror}: {e.filename or run_dir}") from None
        raise
    except sqlite3.OperationalError as e:
        if any(w in str(e).lower() for w in ("disk is full", "disk i/o", "readonly", "unable to open")):
            raise _write_failure(args, run_dir, f"{e} (the journal {run_dir / JOURNAL})") from None
        raise
    finally:
        enforce(None)


WRITE_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _write_failure(args, run_dir: Path, what: str) -> RuntimeFailure:
    """A full disk (or a read-only one): a runtime failure naming the path and the resume command."""
    resume = f"auditc run {args.spec} --out {run_dir}" + (f" --data-root {args.data_root}" if args.data_root else "")
    return RuntimeFailure(f"cannot write the run directory: {what}",
                          hint=f"free space (or fix permissions), then resume with `{resume}`: results already "
                               "committed are kept")


def _execute(args, spec, plan, run_dir: Path, shard_ix, access: list) -> int:
    from auditlang.score.stage import score_and_write

    with RunLock(run_dir) as lock:
        lock.beat(doing="writing the run's inputs (spec, data, plan)")
        save_inputs(spec, plan, run_dir, limit=args.limit, engine_override=args.engine, access=access)
        shard = Shard(shard_ix[0], shard_ix[1], item_shard_key(plan)) if shard_ix else None
        print(f"run {run_dir}: {len(plan.cells)} cells, {len(plan.requests)} stage-1 requests "
              f"(+{plan.deferred_count} follow-ups), naive {plan.naive_request_count}")
        fps = execute_plan(spec, plan, run_dir, engine_override=args.engine, progress=not args.no_progress,
                           shard=shard, retry_errors=args.retry_errors, beat=lock.beat)
        if shard is not None:
            print(f"shard {args.shard} done; merge the shard directories with `auditc merge TARGET SHARD_DIR...`, "
                  "then `auditc report TARGET`")
            return 0
        lock.beat(doing="scoring")
        score_and_write(spec, plan, run_dir, fps)
        if not args.no_report:
            lock.beat(doing="writing the report")
            write_report(spec, plan, run_dir)
    print(f"done: {run_dir}")
    return 0
