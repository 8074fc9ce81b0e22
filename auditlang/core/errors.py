"""The one error root, with one subclass per kind of failure.

Everything auditlang raises on purpose derives from :class:`AuditlangError` and carries an exit
code and an optional hint; the CLI prints it without a traceback. Spec problems are
:class:`~auditlang.core.diagnostics.CompileError` (file:line:col diagnostics). Any other
exception that reaches the CLI is an internal error (a bug), exit 70.
"""

from __future__ import annotations

import textwrap
from typing import NamedTuple


class ExitCode(NamedTuple):
    """One exit code of ``auditc``: said here once, rendered into ``auditc --help``, docs/cli.md
    and README.md (``scripts/registry_docs.py``), and read by the error classes and the CLI."""

    code: int
    name: str
    short: str  # README's one-line summary
    meaning: str  # docs/cli.md's table and ``--help``


EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(0, "ok", "ok", "success"),
    ExitCode(1, "diagnostics", "diagnostics (spec, data or run problems)",
             "user-facing problems: spec diagnostics (with `file:line:col`, caret and hint), data errors, a bad run "
             "directory or evaluator name, a run-directory file that no longer matches the hash its stage recorded "
             "(plan, spec or data copy, journal: the message names the file; docs/outputs.md), an `--out` that is not "
             "new, empty or a run directory, a host or secret not allowed, `fmt --check` when a file would change"),
    ExitCode(2, "usage", "usage", "command-line usage error (an unknown flag, a bad `--shard`, `--swap-model` or "
             "`--limit` value)"),
    ExitCode(3, "runtime", "runtime failure (missing engine package, unreachable server; rerun resumes)",
             "runtime failure outside the spec: missing engine package (or Ray for `--executor ray`), model that "
             "cannot load, unreachable server, a full or read-only disk (the message names the path and the resume "
             "command). The run directory stays consistent; rerun to resume"),
    ExitCode(4, "request_errors", "request errors (the run finished; failed items are missing, rerun retries them)",
             "`auditc run` finished with request errors: the engine failed some requests (a server's HTTP 500, a "
             "prompt longer than the context, a parameter the engine rejects). The run is scored and its report "
             "written; the failed items are missing from every metric, never counted as wrong answers (records "
             "`status`, `n_error` per cell, the checklist's \"Request errors\" entry). The count and the first error "
             "are printed; rerunning the same command retries exactly the failed requests"),
    ExitCode(70, "internal", "internal error (a bug; reported with its traceback)",
             "internal error (a bug in auditlang), printed with its traceback and labelled as such"),
    ExitCode(130, "interrupted", "interrupted (Ctrl-C; committed work is kept)",
             "interrupted (Ctrl-C); committed work is kept"),
)
EXIT: dict[str, int] = {e.name: e.code for e in EXIT_CODES}


def exit_codes_markdown() -> str:
    """docs/cli.md's table of exit codes."""
    rows = "".join(f"| {e.code} | {e.meaning} |\n" for e in EXIT_CODES)
    return "| code | meaning |\n|---|---|\n" + rows


def exit_codes_line() -> str:
    """README.md's one-line summary of the exit codes."""
    return "Exit codes: " + " · ".join(f"{e.code} {e.short}" for e in EXIT_CODES) + ".\n"


def exit_codes_help() -> str:
    """The exit codes as ``auditc --help`` prints them (Markdown code spans shown plain)."""
    lines = ["exit codes:"]
    for e in EXIT_CODES:
        body = textwrap.wrap(e.meaning.replace("`", ""), width=88)
        lines.append(f"  {e.code:<4} {body[0]}")
        lines.extend(f"       {b}" for b in body[1:])
    return "\n".join(lines)


class AuditlangError(Exception):
    """Root of every deliberate auditlang error."""

    exit_code = EXIT["diagnostics"]

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class UserError(AuditlangError):
    """A user-facing problem outside the spec text: a run directory, a data file, a flag value."""


class UsageError(UserError):
    """A command-line value that cannot be used (exit 2, like argparse's own usage errors)."""

    exit_code = EXIT["usage"]


class RuntimeFailure(UserError):
    """Missing engine package, unreachable server, model load failure: the run can be resumed."""

    exit_code = EXIT["runtime"]


class RequestErrors(AuditlangError):
    """A run that finished (scored, report written) with requests that failed in their engine:
    their items are missing from the metrics (``n_error``), never scored. Rerun to retry them."""

    exit_code = EXIT["request_errors"]
