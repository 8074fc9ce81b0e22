"""``auditc``: check, plan, show, fmt, run, rescore, report, view, diff, merge and status.

Exit codes: the one table ``core.errors.EXIT_CODES``, printed by ``auditc --help`` (docs/cli.md).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading
import traceback

from auditlang.core.version import __version__
from auditlang.cli.common import (  # noqa: F401
    EXIT_DIAG, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, print_diags)
from auditlang.core.diagnostics import CompileError
from auditlang.core.errors import AuditlangError, exit_codes_help
from auditlang.core.terminal import visible

def _handler(command: str):
    """``cmd_<command>`` of ``auditlang.cli.<command>``: each subcommand's module is imported only
    when that subcommand runs, so `auditc --version` and `auditc check` never load pandas, the
    engines or the report (benchmarks/bench_startup.py)."""
    return getattr(importlib.import_module(f"auditlang.cli.{command}"), f"cmd_{command}")  # lazy: a subcommand's module only when it runs


class _EngineNames:
    """``--engine``'s choices, read from the component registry only when argparse checks or
    lists them, so building the parser (``--version``, ``check``) loads no registry or plugin."""

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())

    @staticmethod
    def _names() -> tuple[str, ...]:
        from auditlang.core.capabilities import engine_names  # lazy: the registry, only when --engine is given

        return tuple(engine_names())


def _access_args(p: argparse.ArgumentParser) -> None:
    """What a run may contact and read (docs/security.md)."""
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="let this spec contact HOST: model servers, Hub downloads of datasets and weights "
                        "(loopback needs no permission); repeatable")
    p.add_argument("--allow-secret", action="append", default=[], metavar="NAME",
                   help="let the run read the environment variable NAME (api_key_env, HF_TOKEN); repeatable")


def _model_args(p: argparse.ArgumentParser) -> None:
    """``-M`` and ``--model-args``: override declared models' options (resolve/overrides.py)."""
    p.add_argument("-M", "--model-arg", dest="model_arg", action="append", default=[], metavar="MODEL.KEY=VALUE",
                   help="set option KEY of the spec's model MODEL, VALUE in spec syntax (e.g. -M smol.dtype=bfloat16, "
                        "-M smol.max_tokens=64,batch_size=4); checked like the spec's own parameters; repeatable; "
                        "wins over --model-args; recorded in run.json and the checklist")
    p.add_argument("--model-args", action="append", default=[], metavar="KEY=VALUE,...",
                   help="set options of every model the audits evaluate (their models lists; judges are left alone), "
                        "as lm-eval's --model_args: e.g. --model-args dtype=float32,batch_size=8; repeatable")


def _limit(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--limit", metavar="N|F|A:B",
                   help=f"{what} only part of each dataset's sampled items: a count (10: the first 10), a fraction "
                        "(0.1 or 10%%: the first tenth, rounded up) or a range of sampled positions (10:20: positions "
                        "10 to 19, 0-based)")


EXIT_CODES = exit_codes_help() + "\n\ndocs/cli.md documents every command and flag."


def _sub(sub, name: str, help: str, description: str, examples: str):
    return sub.add_parser(name, help=help, description=description, epilog="examples:\n" + examples,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="auditc", description="Compile and run reliability audits of language models.",
        epilog="typical loop:\n  auditc check spec.audit\n  auditc plan spec.audit --limit 10\n"
               "  auditc run spec.audit --limit 10\n  auditc status runs/spec\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"auditc {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _sub(sub, "check", "validate a spec (no data, no models)",
             "Parse, resolve and validate a spec and its imports. No data file is read and no model is touched;\n"
             "problems are printed as diagnostics with file:line:col, a caret excerpt and a hint (exit 1).",
             "  auditc check examples/quickstart.audit")
    p.add_argument("spec", help="the .audit file to check")
    _model_args(p)

    p = _sub(sub, "plan", "preview every cell and request without touching a model",
             "Build the plan a run would execute: cells by axis, datasets, unique requests by model, kind and\n"
             "stage, naive vs deduplicated counts and token estimates. With the data present, the stage-1 count is\n"
             "exactly what `auditc run` executes; without it (or with --no-data) counts are estimated from the\n"
             "declared sample sizes and marked as such.",
             "  auditc plan examples/quickstart.audit\n"
             "  auditc plan examples/quickstart.audit --limit 10        # the run `auditc run --limit 10` does\n"
             "  auditc plan spec.audit --no-data                         # estimate from declared sizes\n"
             "  auditc plan spec.audit --format json -o plan.json --no-requests\n"
             "  auditc plan spec.audit --precision                       # half-widths and MDDs at the declared N\n"
             "  auditc plan spec.audit --precision --pilot runs/pilot    # the same, from a pilot run's records\n"
             "  auditc plan spec.audit --gpu h200 --gpus 8 --executor ray  # engine start, GPU time and wall per model")
    p.add_argument("spec", help="the .audit file to plan")
    p.add_argument("--data-root", help="folder holding the data files; overrides the spec's settings data_root "
                                       "(a note says so), else $AUDITLANG_DATA_ROOT")
    _limit(p, "plan")
    p.add_argument("--format", choices=["rich", "json"], default="rich", help="rich: a summary (default); json: the whole plan")
    p.add_argument("--cells", action="store_true", help="list every cell with its item count and content hash")
    p.add_argument("--output", "-o", metavar="FILE", help="write the JSON plan to this file (with --format json)")
    p.add_argument("--no-data", action="store_true", help="do not read data files: estimate from declared sizes")
    _access_args(p)
    p.add_argument("--no-requests", action="store_true", help="JSON: omit the request bodies")
    p.add_argument("--compact", action="store_true", help="JSON: no indentation")
    p.add_argument("--swap-model", action="append", default=[], metavar="NAME=MODEL",
                   help="plan with the spec's model NAME replaced by MODEL, as `auditc run --swap-model`")
    _model_args(p)
    p.add_argument("--precision", action="store_true",
                   help="also plan precision: each cell's and metric's expected interval half-width at the declared N "
                        "and the minimum detectable difference of paired contrasts (docs/cli.md)")
    p.add_argument("--pilot", metavar="RUN_DIR",
                   help="with --precision: estimate from a finished pilot run's records (bootstrap, scaled to N) "
                        "instead of the analytic approximation")
    p.add_argument("--precision-p", type=float, default=0.5, metavar="P",
                   help="planning accuracy for the analytic approximation (default 0.5, the widest)")
    p.add_argument("--precision-rho", type=float, default=0.0, metavar="RHO",
                   help="assumed item-level correlation of two paired cells for the analytic MDD (default 0)")
    p.add_argument("--gpu", metavar="KIND",
                   help="estimate each model's engine start, GPU time and total wall on this GPU kind (h200, h100, ...) "
                        "from the shipped throughput table (auditlang/plan/throughput.json; docs/cli.md)")
    p.add_argument("--gpus", type=int, default=1, metavar="N", help="with --gpu: GPUs available (default 1)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="with --gpu: how `auditc run` will run the models: in turn (local) or packed onto --gpus (ray)")
    p.add_argument("--throughput-from", metavar="RUN_DIR",
                   help="with --gpu: refresh the table's rows from a pilot run's measured start and engine seconds "
                        "(run.json timing)")

    p = _sub(sub, "show", "the exact prompts a cell sends for one item (tokenizer only, no weights)",
             "For every cell matching CELL_OR_PATTERN (a cell id or an fnmatch glob over cell ids, as `auditc plan\n"
             "--cells` lists them): each stage-1 request of one item with its kind, parameters, seed and request id,\n"
             "the other cells that share it, and its prompt as the model receives it: the chat template applied with\n"
             "the model's tokenizer (no weights loaded; for embedded models the converted checkpoint's tokenizer).\n"
             "Without a local tokenizer the messages are printed role-tagged, and the output says so. Follow-ups\n"
             "(stage 2: P(True), verbalized confidence, constrained re-prompts, judges) are built by the run's own\n"
             "builder from a placeholder answer, <answer> (or, where a follow-up shows the answer as the evaluator\n"
             "reads it, the item's gold answer), and said so; with --run RUN_DIR from the answers stored there.",
             "  auditc show examples/quickstart.audit 'quickstart/smollm2/capitals/*/s000.token_norm/s000.first_char'\n"
             "  auditc show examples/quickstart.audit '*/gemma3/arithmetic/*verbal_decimal*' --item 3\n"
             "  auditc show examples/quickstart.audit '*/gemma3/arithmetic/*verbal_decimal*' --run runs/quickstart")
    p.add_argument("spec", help="the .audit file")
    p.add_argument("cell", metavar="CELL_OR_PATTERN", help="a cell id or an fnmatch glob over cell ids (quote it in the shell)")
    p.add_argument("--item", type=int, default=0, metavar="N",
                   help="position of the item among the dataset's sampled items (default 0: the first)")
    p.add_argument("--data-root", metavar="DIR", help="folder holding the data files; overrides the spec's data_root (a note says so)")
    _limit(p, "plan")
    p.add_argument("--run", metavar="RUN_DIR",
                   help="show the answers stored in this run directory and build the follow-ups from them "
                        "(else from the placeholder answer <answer>)")
    _model_args(p)
    _access_args(p)

    p = _sub(sub, "fmt", "format spec files canonically (idempotent)",
             "Rewrite spec files in canonical layout; comments are kept and formatting twice changes nothing.",
             "  auditc fmt spec.audit\n  auditc fmt --check specs/*.audit      # exit 1 when a file would change")
    p.add_argument("files", nargs="+", metavar="FILE", help=".audit files to format in place")
    p.add_argument("--check", action="store_true", help="only report files that would change (exit 1)")

    p = _sub(sub, "run", "execute a spec: generations, scores, metrics, report",
             "Plan, store the run's inputs (spec, stdlib, data, plan) in the run directory, execute every request\n"
             "model by model (stage 1 and its follow-ups in one engine load; judges last), score every cell,\n"
             "compute metrics with bootstrap intervals and write the report. Resumable: rerun the same command\n"
             "after an interruption; an unchanged spec executes nothing.",
             "  auditc run examples/quickstart.audit --limit 10\n"
             "  auditc run spec.audit --out runs/a --engine dryrun      # whole pipeline, no model\n"
             "  auditc run spec.audit --swap-model smol='embedded(\"gemma3-270m\")' --out runs/gemma\n"
             "  auditc run spec.audit --cache ~/.cache/auditlang/responses --display plain 2> run.log\n"
             "  auditc run spec.audit --shard 0/4 --out runs/s0          # then `auditc merge`\n"
             "  auditc run spec.audit --executor ray --address HEAD:6379 # a Ray cluster (docs/scale-out.md)")
    p.add_argument("spec", help="the .audit file to run")
    p.add_argument("--out", metavar="DIR", help="run directory (default runs/<spec name>)")
    p.add_argument("--replace", action="store_true",
                   help="let this spec take over --out when it holds a run of another spec (its records and report "
                        "are removed; stored results the new plan shares are reused)")
    p.add_argument("--data-root", metavar="DIR", help="folder holding the data files; overrides the spec's data_root (a note says so)")
    p.add_argument("--engine", choices=_EngineNames(), metavar="ENGINE",
                   help="override every model's engine: %(choices)s (dryrun: no model, empty outputs; checks the pipeline)")
    _limit(p, "run")
    p.add_argument("--shard", metavar="I/N", help="run shard I of N, e.g. 0/4 (merge with `auditc merge`)")
    p.add_argument("--keep-errors", action="store_true",
                   help="do not retry requests whose stored result is a failure (by default a rerun retries exactly those)")
    p.add_argument("--retry-errors", action="store_true", help=argparse.SUPPRESS)  # retrying is the default now; still accepted
    p.add_argument("--no-report", action="store_true", help="stop after scoring and metrics (`auditc report` writes it later)")
    p.add_argument("--display", choices=["auto", "rich", "plain", "none"], default="auto",
                   help="progress: rich bar, plain log lines on stderr (every $AUDITLANG_PROGRESS_INTERVAL s, default 10), "
                        "or none; auto = rich on a terminal, plain otherwise")
    p.add_argument("--no-progress", action="store_true", help="the same as --display none")
    p.add_argument("--swap-model", action="append", default=[], metavar="NAME=MODEL",
                   help="replace the spec's model NAME by MODEL, a model expression in spec syntax "
                        "(e.g. smol='embedded(\"gemma3-270m\")' or smol='hf(\"Qwen/Qwen2.5-0.5B-Instruct\")'); it replaces the whole declaration, parameters included; repeatable; "
                        "recorded in run.json and the checklist")
    _model_args(p)
    p.add_argument("--cache", metavar="DIR", help="response cache shared across run directories (else $AUDITLANG_CACHE_DIR): "
                                                  "results found there under the same request id and engine fingerprint are reused")
    _access_args(p)
    p.add_argument("--executor", choices=["local", "ray"],
                   help="where to execute (default: the spec's settings executor, else local); ray: see docs/scale-out.md")
    p.add_argument("--address", metavar="HOST:PORT", help="--executor ray: the Ray cluster to join (or auto); "
                                                          "default $RAY_ADDRESS or a new local cluster")
    p.add_argument("--ray-shards", type=int, metavar="K", help="--executor ray: item shards per model (default 4)")

    p = _sub(sub, "rescore", "re-score stored generations under another evaluator (no model loaded)",
             "Score a run's stored generations again under other evaluators, with no model loaded. Each\n"
             "--evaluator [LABEL=]EXPR is compiled as `evaluator LABEL = EXPR` in the run's stored spec and gets\n"
             "its own folder RUN_DIR/rescore/LABEL/ (records.parquet, cells.csv, cells.md, rescore.json), which\n"
             "`auditc report` shows and `auditc diff` takes as a run.",
             "  auditc rescore runs/quickstart --evaluator exact_match --evaluator lenient_match\n"
             "  auditc rescore runs/quickstart --evaluator 'loose=regex_reparse(tail=50, case_sensitive=false)'")
    p.add_argument("run_dir", help="a run directory written by `auditc run`")
    p.add_argument("--evaluator", action="append", required=True,
                   metavar="[LABEL=]EXPR",
                   help="an evaluator that needs no model call: a name of the run's spec (its own, or ns.name of an "
                        "imported stdlib module), a registered one (first_char, exact_match, ...) or a call with "
                        "parameters (regex_reparse(tail=50)); LABEL names its folder; repeatable")

    p = _sub(sub, "report", "(re)write the report of a run directory from stored results",
             "Rebuild RUN_DIR/report/ from stored results (no model loaded), under the spec, stdlib and data\n"
             "stored in the run directory.",
             "  auditc report runs/quickstart\n  auditc report runs/quickstart --spec quickstart_more_compares.audit")
    p.add_argument("run_dir", help="a run directory written by `auditc run` or `auditc merge`")
    p.add_argument("--spec", help="report under an edited spec: accepted when it needs no work the run did not do "
                                  "(new compare/report/metric statements); it then becomes the run's spec")

    p = _sub(sub, "view", "browse every sample of a run: prompts, follow-ups, answers, labels (static HTML)",
             "Write RUN_DIR/report/samples.html (and samples.data.js beside it): every cell x item of the run with\n"
             "each request's prompt as sent (chat templates applied with the model's local tokenizer, no weights),\n"
             "every follow-up (P(True), verbalized confidence, constrained re-prompts, judges), the raw answers,\n"
             "the parsed label and confidence, correctness, parse failures and errors; filters by cell, model,\n"
             "dataset, protocol, correctness, status and parse failure. One self-contained page, no network.",
             "  auditc view runs/quickstart                 # writes the page and prints its file:// address\n"
             "  auditc view runs/quickstart --open          # and opens it in the default browser\n"
             "  auditc view runs/quickstart --serve --port 8765   # serve report/ on 127.0.0.1")
    p.add_argument("run_dir", help="a run directory written by `auditc run` or `auditc merge`")
    p.add_argument("--serve", action="store_true", help="serve the report folder on http://127.0.0.1:PORT until Ctrl-C")
    p.add_argument("--port", type=int, default=8765, help="--serve: the port (default 8765; 0 picks a free one)")
    p.add_argument("--open", action="store_true", help="open the page in the default web browser")
    p.add_argument("--no-chat-template", action="store_true",
                   help="show chat prompts as role-tagged messages (no tokenizer read)")

    p = _sub(sub, "diff", "compare two run directories cell by cell with paired bootstrap intervals",
             "Match the cells of RUN_A and RUN_B by cell id (unmatched cells are listed) and, for each shared cell\n"
             "and metric, report B - A with a paired percentile bootstrap interval over the items both runs scored\n"
             "(the same resampled items on both sides) and whether the interval excludes 0 at the level. The runs\n"
             "may come from the same spec (e.g. two models swapped in with --swap-model) or from two specs.\n"
             "--match pairs cells that differ only by a name; RUN_A or RUN_B may be a rescore folder\n"
             "RUN_DIR/rescore/NAME (`auditc rescore`).",
             "  auditc diff runs/a runs/b\n"
             "  auditc diff runs/a runs/b --metric accuracy --metric brier --format csv > diff.csv\n"
             "  auditc diff runs/a runs/b --resamples 2000 --seed 7 --level 0.99\n"
             "  auditc diff runs/a runs/a --match smol=gemma    # gemma - smol inside one run\n"
             "  auditc diff runs/a runs/a/rescore/strict --match evaluator")
    p.add_argument("run_a", metavar="RUN_A", help="the reference run directory (A)")
    p.add_argument("run_b", metavar="RUN_B", help="the run directory compared with it (B); differences are B - A")
    p.add_argument("--metric", action="append", default=[], metavar="M",
                   help="a metric label of the audits (e.g. accuracy, s000.ece10) or a registered metric name; "
                        "repeatable (default: every metric of the cell's audit in both runs)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="table (default), csv or json on stdout")
    p.add_argument("--resamples", type=int, metavar="B", help="bootstrap resamples (default: the audit's bootstrap, else 1000)")
    p.add_argument("--seed", type=int, metavar="S", help="bootstrap seed (default: the audit's bootstrap seed, else 42)")
    p.add_argument("--level", type=float, metavar="L", help="interval level (default: the audit's, else 0.95)")
    p.add_argument("--match", action="append", default=[], metavar="KEY",
                   help="pair cells that differ only by a name: an axis (model, dataset, variant, protocol, "
                        "evaluator) or A_NAME=B_NAME (e.g. smol=gemma; RUN_A and RUN_B may be one run); repeatable")

    p = _sub(sub, "merge", "merge shard run directories into one (then `auditc report`)",
             "Merge the run directories of `auditc run --shard I/N` into TARGET: every shard must have run the\n"
             "same plan (same plan hash). Prints what was merged; then `auditc report TARGET` scores and reports.",
             "  auditc run spec.audit --shard 0/2 --out runs/s0\n  auditc run spec.audit --shard 1/2 --out runs/s1\n"
             "  auditc merge runs/all runs/s0 runs/s1 && auditc report runs/all")
    p.add_argument("target", help="run directory to merge into (created when missing)")
    p.add_argument("sources", nargs="+", metavar="SHARD_DIR", help="--out directories of the shard runs")

    p = _sub(sub, "status", "what a run directory holds and what is left to do",
             "Whether a run is live, interrupted or finished, and committed vs missing requests per model.\n"
             "Reads only the run directory (no spec compiled, no data read).",
             "  auditc status runs/quickstart")
    p.add_argument("run_dir", help="a run directory written by `auditc run`")

    p = _sub(sub, "lsp", "language server for editors (stdio; needs the `lsp` extra)",
             "The language server: the compiler's diagnostics as you type, hover docs, completion of "
             "stdlib names and parameters, go to definition and formatting, over stdio (docs/editors.md).",
             "  auditc lsp            # started by the editor (VS Code extension in editors/vscode)")
    p.add_argument("--stdio", action="store_true", help="accepted for editors that pass it; stdio is the only transport")
    return ap


def main(argv: list[str] | None = None) -> int:
    return _guarded(lambda: _dispatch(argv))


def _dispatch(argv: list[str] | None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) if e.code in (0, None) else EXIT_USAGE
    return _handler(args.command)(args)


def _guarded(work) -> int:
    """Run ``work``; every deliberate error becomes its message and exit code, anything else is
    reported as an internal error (exit 70) with its traceback."""
    try:
        return work()
    except CompileError as e:
        print_diags(e.diagnostics)
        return EXIT_DIAG
    except KeyboardInterrupt:
        print("interrupted; the run directory is consistent — rerun to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except AuditlangError as e:  # messages may quote data or a server's answer: control characters shown
        print(visible(f"error: {e}"), file=sys.stderr)
        if e.hint and e.hint not in str(e):  # a TemplateError's message already carries its hint
            print(visible(f"  hint: {e.hint}"), file=sys.stderr)
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
