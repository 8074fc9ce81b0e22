"""Shared CLI helpers: exit codes and diagnostic printing."""

from __future__ import annotations

import os
import sys

from auditlang.core.diagnostics import render

EXIT_OK, EXIT_DIAG, EXIT_USAGE, EXIT_RUNTIME, EXIT_INTERNAL = 0, 1, 2, 3, 70


def _color() -> bool:
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR")


MAX_SHOWN = 50  # diagnostics printed in full; the rest are counted


def print_diags(diags) -> None:
    """Print diagnostics (errors first, at most ``MAX_SHOWN``) and a count line."""
    diags = list(diags)
    ordered = sorted(diags, key=lambda d: d.severity != "error")
    for d in ordered[:MAX_SHOWN]:
        print(render(d, color=_color()), file=sys.stderr)
        print(file=sys.stderr)
    if len(ordered) > MAX_SHOWN:
        print(f"... and {len(ordered) - MAX_SHOWN} more diagnostic(s) not shown", file=sys.stderr)
    n_err = sum(1 for d in diags if d.severity == "error")
    n_warn = sum(1 for d in diags if d.severity == "warning")
    if n_err or n_warn:
        print(f"{n_err} error(s), {n_warn} warning(s)", file=sys.stderr)
