"""`auditc run SPEC`: plan, write the inputs into the run directory, execute, score, report."""

from __future__ import annotations

from pathlib import Path

from auditlang.cli.common import print_diags
from auditlang.api import default_run_dir, plan_spec, write_report
from auditlang.core.errors import UsageError, UserError
from auditlang.execute.runner import execute_plan, item_shard_key
from auditlang.resolve import compile_spec
from auditlang.store.inputs import save_inputs
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
    from auditlang.score.stage import score_and_write

    shard_ix = parse_shard(args.shard)
    spec = compile_spec(args.spec)
    plan = plan_spec(spec, args.data_root, args.limit)
    if plan.warnings:
        print_diags(plan.warnings)
    run_dir = Path(args.out) if args.out else default_run_dir(args.spec)
    with RunLock(run_dir) as lock:
        lock.beat(doing="writing the run's inputs (spec, data, plan)")
        save_inputs(spec, plan, run_dir, limit=args.limit, engine_override=args.engine)
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
