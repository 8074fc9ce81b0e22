"""The one error root, with one subclass per kind of failure.

Everything auditlang raises on purpose derives from :class:`AuditlangError` and carries an exit
code and an optional hint; the CLI prints it without a traceback. Spec problems are
:class:`~auditlang.core.diagnostics.CompileError` (file:line:col diagnostics). Any other
exception that reaches the CLI is an internal error (a bug), exit 70.
"""

from __future__ import annotations


class AuditlangError(Exception):
    """Root of every deliberate auditlang error."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class UserError(AuditlangError):
    """A user-facing problem outside the spec text: a run directory, a data file, a flag value."""


class UsageError(UserError):
    """A command-line value that cannot be used (exit 2, like argparse's own usage errors)."""

    exit_code = 2


class RuntimeFailure(UserError):
    """Missing engine package, unreachable server, model load failure: the run can be resumed."""

    exit_code = 3


class RequestErrors(AuditlangError):
    """A run that finished (scored, report written) with requests that failed in their engine:
    their items are missing from the metrics (``n_error``), never scored. Rerun to retry them."""

    exit_code = 4
