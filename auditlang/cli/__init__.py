"""``auditc``: check, plan, fmt, run, rescore, report and status.

Exit codes (docs/cli.md):
  0  success
  1  the spec, its data or a stored run has user-facing problems (diagnostics printed)
  2  command-line usage error
  3  a runtime failure outside the spec: missing engine package, unreachable server, model
     load failure (the run directory stays consistent; rerun to resume)
  70 internal error (a bug in auditlang; please report it with the traceback shown)
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from auditlang import __version__
from auditlang.cli.check import cmd_check
from auditlang.cli.common import EXIT_DIAG, EXIT_INTERNAL, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, print_diags  # noqa: F401
from auditlang.cli.fmt import cmd_fmt
from auditlang.cli.lsp import add_lsp_command
from auditlang.cli.merge import cmd_merge
from auditlang.cli.plan import cmd_plan
from auditlang.cli.report import cmd_report
from auditlang.cli.rescore import cmd_rescore
from auditlang.cli.run import cmd_run
from auditlang.cli.status import cmd_status
from auditlang.core.diagnostics import CompileError
from auditlang.core.errors import AuditlangError


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="auditc", description="Compile and run reliability audits of language models.")
    ap.add_argument("--version", action="version", version=f"auditc {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("check", help="validate a spec (no data, no models)")
    p.add_argument("spec")
    p.set_defaults(fn=cmd_check)

    p = sub.add_parser("plan", help="preview every cell and request without touching a model")
    p.add_argument("spec")
    p.add_argument("--data-root", help="folder holding the data files (else $AUDITLANG_DATA_ROOT)")
    p.add_argument("--format", choices=["rich", "json"], default="rich")
    p.add_argument("--cells", action="store_true", help="list every cell")
    p.add_argument("--output", "-o", help="write the JSON plan to this file")
    p.add_argument("--no-data", action="store_true", help="do not read data files: estimate from declared sizes")
    p.add_argument("--no-requests", action="store_true", help="JSON: omit the request bodies")
    p.add_argument("--compact", action="store_true", help="JSON: no indentation")
    p.set_defaults(fn=cmd_plan)

    p = sub.add_parser("fmt", help="format spec files canonically (idempotent)")
    p.add_argument("files", nargs="+")
    p.add_argument("--check", action="store_true", help="only report files that would change (exit 1)")
    p.set_defaults(fn=cmd_fmt)

    p = sub.add_parser("run", help="execute a spec: generations, scores, metrics, report")
    p.add_argument("spec")
    p.add_argument("--out", help="run directory (default runs/<spec name>)")
    p.add_argument("--data-root")
    p.add_argument("--engine", choices=["hf", "vllm", "openai", "dryrun"],
                   help="override every model's engine (dryrun: no model, empty outputs; checks the pipeline)")
    p.add_argument("--limit", type=int, help="use only the first N sampled items of each dataset")
    p.add_argument("--shard", help="run shard I of N, e.g. 0/4 (merge with `auditc merge`)")
    p.add_argument("--retry-errors", action="store_true", help="re-execute requests that failed before")
    p.add_argument("--executor", choices=["local", "ray"],
                   help="where to execute (default: the spec's settings executor, else local); ray: see docs/scale-out.md")
    p.add_argument("--address", help="--executor ray: the Ray cluster to join (HOST:PORT, or auto); default $RAY_ADDRESS "
                                     "or a new local cluster")
    p.add_argument("--ray-shards", type=int, metavar="K", help="--executor ray: item shards per model (default 4)")
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("rescore", help="re-score stored generations under another evaluator (no model loaded)")
    p.add_argument("run_dir")
    p.add_argument("--evaluator", action="append", required=True,
                   help="evaluator name (first_char, regex_reparse, exact_match, lenient_match, alias_match); repeatable")
    p.set_defaults(fn=cmd_rescore)

    p = sub.add_parser("report", help="(re)write the report of a run directory from stored results")
    p.add_argument("run_dir")
    p.add_argument("--spec", help="report under an edited spec: accepted when it needs no work the run did not do "
                                  "(new compare/report/metric statements); it then becomes the run's spec")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("merge", help="merge shard run directories into one (then `auditc report`)")
    p.add_argument("target")
    p.add_argument("sources", nargs="+")
    p.set_defaults(fn=cmd_merge)

    p = sub.add_parser("status", help="what a run directory holds and what is left to do")
    p.add_argument("run_dir")
    p.set_defaults(fn=cmd_status)

    add_lsp_command(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) if e.code in (0, None) else EXIT_USAGE
    try:
        return args.fn(args)
    except CompileError as e:
        print_diags(e.diagnostics)
        return EXIT_DIAG
    except KeyboardInterrupt:
        print("interrupted; the run directory is consistent — rerun to resume", file=sys.stderr)
        return 130
    except AuditlangError as e:
        print(f"error: {e}", file=sys.stderr)
        if e.hint:
            print(f"  hint: {e.hint}", file=sys.stderr)
        return e.exit_code
    except Exception:  # noqa: BLE001  (anything else is a bug by definition)
        print("internal error (a bug in auditlang — please report it):", file=sys.stderr)
        traceback.print_exc()
        return EXIT_INTERNAL


def entry() -> None:
    """The ``auditc`` console script: :func:`main`, then a fast exit. After a run with a model
    loaded, the interpreter's own teardown (freeing the model, finalising thousands of torch and
    transformers modules) took about 1 s on a 2-core machine. Non-daemon threads are joined,
    atexit handlers run (logging, vLLM, multiprocessing) and the streams are flushed as in a
    normal exit; only that teardown is skipped. Tests call :func:`main`, which never exits."""
    import atexit
    import threading

    rc = main()
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to flush
            pass
    os._exit(rc)


if __name__ == "__main__":
    entry()
