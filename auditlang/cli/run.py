"""`auditc run SPEC`: plan, write the inputs into the run directory, execute, score, report."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import sys
from functools import partial
from pathlib import Path

from auditlang.api import default_run_dir, plan_spec, run_spec
from auditlang.cli.common import EXIT_OK, StepLog, parse_swaps, print_diags, spec_warnings
from auditlang.core.diagnostics import CompileError
from auditlang.core.errors import RuntimeFailure, UsageError, UserError
from auditlang.core.trust import enforce
from auditlang.execute.access import access_record, check_access, load_allowances, offline_hubs, run_access
from auditlang.execute.runner import item_shard_key
from auditlang.resolve import compile_spec
from auditlang.resolve.models import OPENAI_BASE_URL_ENV
from auditlang.store.rundir import JOURNAL, check_out_dir
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


def env_settings(spec) -> dict[str, str]:
    """Models whose server URL comes from $OPENAI_BASE_URL (openai(...) naming no base_url)."""
    url = os.environ.get(OPENAI_BASE_URL_ENV)
    if not url:
        return {}
    return {mid: url for mid, o in spec.of_kind("model").items()
            if o.ctor == "openai" and "base_url" not in dict(o.param_spans)}


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
    display = "none" if args.no_progress else args.display
    cache_dir = args.cache or os.environ.get("AUDITLANG_CACHE_DIR") or None
    spec = compile_spec(args.spec, swaps=swaps)
    executor = ray_executor(args, spec)
    allow = load_allowances(args.allow_host, args.allow_secret)  # docs/security.md
    access = run_access(spec, args.engine)
    bag = check_access(spec, access, allow)  # before planning: a hub dataset is downloaded while planning
    if bag.errors:
        raise CompileError(bag)
    offline = offline_hubs(spec, access, allow)  # hub datasets with a fallback file: not downloaded
    access = [a for a in access if a.model not in offline or a.kind != "dataset"]
    step = StepLog() if display != "none" else None
    plan = plan_spec(spec, args.data_root, args.limit, step=step, no_download=offline)
    if step is not None:
        step(None)
    warned = spec_warnings(spec) + list(plan.warnings)  # the spec's own (W151, W159), then the data's
    if warned:
        print_diags(warned)
    if not plan.cells:
        raise UserError(f"nothing to run: {args.spec} plans 0 cells" + (" (it declares no audit)" if not spec.of_kind("audit") else ""),
                        hint="add an audit block naming models, datasets, variants and protocols; `auditc plan` previews the cells")
    for note in plan.notes:
        if "data root" in note or "fallback file" in note:
            print(f"note: {note}", file=sys.stderr)
    for name, expr in swaps.items():
        print(f"note: model {name} swapped on the command line: {expr}", file=sys.stderr)
    from_env = env_settings(spec)
    for mid, url in from_env.items():
        print(f"note: model {mid} names no base_url: using $OPENAI_BASE_URL = {url}", file=sys.stderr)
    run_dir = Path(args.out) if args.out else default_run_dir(args.spec)
    check_out_dir(run_dir)
    enforce(allow)
    try:
        return _execute(args, spec, plan, run_dir, shard_ix, display, cache_dir, swaps, from_env,
                        access_record(access, allow), executor)
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
    finally:
        enforce(None)


WRITE_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _write_failure(args, run_dir: Path, what: str) -> RuntimeFailure:
    """A full disk (or a read-only one): a runtime failure naming the path and the resume command."""
    resume = f"auditc run {args.spec} --out {run_dir}" + (f" --data-root {args.data_root}" if args.data_root else "")
    return RuntimeFailure(f"cannot write the run directory: {what}",
                          hint=f"free space (or fix permissions), then resume with `{resume}`: results already "
                               "committed are kept")


def _execute(args, spec, plan, run_dir: Path, shard_ix, display, cache_dir, swaps, from_env, access, executor) -> int:
    shard = Shard(shard_ix[0], shard_ix[1], item_shard_key(plan)) if shard_ix else None
    print(f"run {run_dir}: {len(plan.cells)} cells, {len(plan.requests)} stage-1 requests "
          f"(+{plan.deferred_count} follow-ups), naive {plan.naive_request_count}")
    run = run_spec(spec, plan, run_dir, limit=args.limit, engine=args.engine, report=not args.no_report,
                   progress=display, retry_errors=args.retry_errors, shard=shard, cache_dir=cache_dir, executor=executor,
                   announce=(lambda msg: print(msg, file=sys.stderr, flush=True)) if display != "none" else None,
                   run_fields={"model_swaps": swaps,
                               "env_settings": {m: {"base_url": u, "from": "OPENAI_BASE_URL"} for m, u in from_env.items()},
                               "response_cache": str(Path(cache_dir).resolve()) if cache_dir else None,
                               "access": access})
    if run is None:
        print(f"shard {args.shard} done; merge the shard directories with `auditc merge TARGET SHARD_DIR...`, "
              "then `auditc report TARGET`")
        return EXIT_OK
    print(f"done: {run_dir}")
    return EXIT_OK
