"""`auditc run SPEC`: plan, write the inputs into the run directory, execute, score, report."""

from __future__ import annotations

from pathlib import Path

from auditlang.api import default_run_dir, plan_spec, run_spec
from auditlang.cli.common import EXIT_OK
from auditlang.core.errors import UsageError
from auditlang.execute.runner import item_shard_key
from auditlang.resolve import compile_spec
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
    shard_ix = parse_shard(args.shard)
    spec = compile_spec(args.spec)
    plan = plan_spec(spec, args.data_root, args.limit)
    run_dir = Path(args.out) if args.out else default_run_dir(args.spec)
    shard = Shard(shard_ix[0], shard_ix[1], item_shard_key(plan)) if shard_ix else None
    print(f"run {run_dir}: {len(plan.cells)} cells, {len(plan.requests)} stage-1 requests "
          f"(+{plan.deferred_count} follow-ups), naive {plan.naive_request_count}")
    run = run_spec(spec, plan, run_dir, limit=args.limit, engine=args.engine, report=not args.no_report,
                   progress=not args.no_progress, retry_errors=args.retry_errors, shard=shard)
    if run is None:
        print(f"shard {args.shard} done; merge the shard directories with `auditc merge TARGET SHARD_DIR...`, "
              "then `auditc report TARGET`")
        return EXIT_OK
    print(f"done: {run_dir}")
    return EXIT_OK
