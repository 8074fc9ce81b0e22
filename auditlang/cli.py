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
import json
import os
import sys
import traceback
from pathlib import Path

from auditlang import __version__
from auditlang.diagnostics import CompileError, render
from auditlang.lsp.command import add_lsp_command

EXIT_OK, EXIT_DIAG, EXIT_USAGE, EXIT_RUNTIME, EXIT_INTERNAL = 0, 1, 2, 3, 70


def _color() -> bool:
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR")


def _print_diags(diags) -> None:
    for d in diags:
        print(render(d, color=_color()), file=sys.stderr)
        print(file=sys.stderr)
    n_err = sum(1 for d in diags if d.severity == "error")
    n_warn = sum(1 for d in diags if d.severity == "warning")
    if n_err or n_warn:
        print(f"{n_err} error(s), {n_warn} warning(s)", file=sys.stderr)


def cmd_check(args) -> int:
    from auditlang.resolve import compile_spec

    spec = compile_spec(args.spec)
    if spec.warnings:
        _print_diags(spec.warnings)
    n = {k: len(spec.of_kind(k)) for k in ("dataset", "model", "variant", "protocol", "evaluator", "audit", "compare")}
    print(f"{args.spec}: ok (" + ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in n.items() if v) + ")")
    return EXIT_OK


def cmd_plan(args) -> int:
    from auditlang.plan.planner import build_plan
    from auditlang.plan.summary import print_summary
    from auditlang.resolve import compile_spec

    spec = compile_spec(args.spec)
    plan = build_plan(spec, data_root=args.data_root, load_data=not args.no_data)
    if args.format == "json":
        text = json.dumps(plan.to_dict(include_requests=not args.no_requests), indent=None if args.compact else 1, ensure_ascii=False)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text + "\n")
        return EXIT_OK
    print_summary(spec, plan, show_cells=args.cells)
    return EXIT_OK


def cmd_fmt(args) -> int:
    from auditlang.syntax.fmt import format_text
    from auditlang.syntax.parse import parse_text

    rc = EXIT_OK
    for f in args.files:
        p = Path(f)
        text = p.read_text(encoding="utf-8")
        parse_text(text, str(p))  # diagnostics for broken files
        out = format_text(text, str(p))
        if args.check:
            if out != text:
                print(f"would reformat {p}")
                rc = EXIT_DIAG
        elif out != text:
            p.write_text(out, encoding="utf-8")
            print(f"reformatted {p}")
    return rc


def cmd_run(args) -> int:
    from auditlang.run.runner import run_spec

    return run_spec(args)


def cmd_rescore(args) -> int:
    from auditlang.run.rescore import rescore

    return rescore(args)


def cmd_report(args) -> int:
    from auditlang.run.reporting import report_cmd

    return report_cmd(args)


def cmd_merge(args) -> int:
    from auditlang.run.runner import read_run_file, write_run_file
    from auditlang.store.shards import merge_journals

    target = Path(args.target)
    sources = [Path(s) for s in args.sources]
    for s in sources:
        if not (s / "journal.sqlite").exists():
            from auditlang.errors import UserError

            raise UserError(f"{s} has no journal.sqlite", hint="pass the --out directories of `auditc run --shard` runs")
    target.mkdir(parents=True, exist_ok=True)
    rep = merge_journals(target, sources)
    info = read_run_file(target)
    for s in sources:
        src = read_run_file(s)
        for k, v in src.items():
            if k == "fingerprints":
                info.setdefault("fingerprints", {}).update(v)
            else:
                info.setdefault(k, v)
    write_run_file(target, info)
    print(f"merged {len(sources)} shard(s) into {target}: {rep}")
    return EXIT_OK


def cmd_status(args) -> int:
    from auditlang.run.status import status_cmd

    return status_cmd(args)


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
    p.add_argument("--engine", choices=["hf", "vllm", "openai"], help="override every model's engine")
    p.add_argument("--limit", type=int, help="use only the first N sampled items of each dataset")
    p.add_argument("--shard", help="run shard I of N, e.g. 0/4 (merge with `auditc merge`)")
    p.add_argument("--retry-errors", action="store_true", help="re-execute requests that failed before")
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
        _print_diags(e.diagnostics)
        return EXIT_DIAG
    except KeyboardInterrupt:
        print("interrupted; the run directory is consistent — rerun to resume", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001
        from auditlang.errors import UserError

        if isinstance(e, UserError):
            print(f"error: {e}", file=sys.stderr)
            if getattr(e, "hint", None):
                print(f"  hint: {e.hint}", file=sys.stderr)
            return e.exit_code
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
