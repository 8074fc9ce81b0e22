"""User-facing runtime errors (not spec diagnostics): printed without a traceback."""

from __future__ import annotations


class UserError(Exception):
    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class RuntimeFailure(UserError):
    """Missing engine package, unreachable server, model load failure: the run can be resumed."""

    exit_code = 3
