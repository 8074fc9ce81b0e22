"""Shared CLI helpers: exit codes, diagnostic printing, planning progress, --swap-model, -M /
--model-args and --limit parsing."""

from __future__ import annotations

import os
import sys
import time

from auditlang.core.diagnostics import DiagnosticBag, Span, render
from auditlang.core.errors import EXIT, UsageError
from auditlang.core.terminal import visible

# the exit codes, by name, from their one table (core/errors.py EXIT_CODES)
EXIT_OK, EXIT_DIAG, EXIT_USAGE, EXIT_RUNTIME = EXIT["ok"], EXIT["diagnostics"], EXIT["usage"], EXIT["runtime"]
EXIT_REQUEST_ERRORS, EXIT_INTERNAL, EXIT_INTERRUPTED = EXIT["request_errors"], EXIT["internal"], EXIT["interrupted"]


def say(*parts: object, file=None, **kw) -> None:
    """``print`` for lines that may quote a run's text (a server's error in the heartbeat, a model
    path, a file name): control characters shown, not sent (core/terminal.py)."""
    print(visible(" ".join(str(p) for p in parts)), file=file if file is not None else sys.stdout, **kw)


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


class StepLog:
    """Planning progress on stderr: a step that took longer than ``threshold`` seconds gets a
    line when it ends (reading a large dataset, rendering an audit's prompts)."""

    def __init__(self, threshold: float = 1.0, stream=None) -> None:
        self.threshold, self.stream = threshold, stream or sys.stderr
        self.current: str | None = None
        self.t0 = self.start = time.perf_counter()

    def __call__(self, text: str | None) -> None:
        now = time.perf_counter()
        if self.current is not None and now - self.t0 > self.threshold:
            print(f"plan: {self.current} ({now - self.t0:.1f}s)", file=self.stream, flush=True)
        self.current, self.t0 = text, now


def parse_swaps(items: list[str] | None) -> dict[str, str]:
    """``NAME=MODEL`` items of ``--swap-model`` -> {NAME: MODEL}, checked before anything runs."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, expr = item.partition("=")
        if not sep or not name.strip() or not expr.strip():
            raise UsageError(f"--swap-model {item!r}: expected NAME=MODEL",
                             hint="e.g. --swap-model smol='embedded(\"gemma3-270m\")' (MODEL in spec syntax)")
        out[name.strip()] = expr.strip()
    return out


def parse_model_args(args) -> list:
    """``-M MODEL.KEY=VALUE`` and ``--model-args KEY=VALUE,...`` of a command, in the order they
    apply (``resolve/overrides.py``); a malformed one is a usage error (exit 2)."""
    from auditlang.resolve.overrides import model_args  # lazy: the parser only for commands that compile

    return model_args(getattr(args, "model_arg", None), getattr(args, "model_args", None))


def parse_limit(text) -> int | str | None:
    """``--limit``: a count, a fraction or a range (``plan/limit.py``), as recorded; else exit 2."""
    from auditlang.plan.limit import Limit  # lazy: only for commands that plan

    try:
        limit = Limit.parse(text)
    except ValueError as e:
        raise UsageError(f"--limit: {e}", hint="--limit 10 (the first 10), --limit 10% or 0.1 (the first tenth), "
                                               "--limit 10:20 (sampled positions 10 to 19)") from None
    return None if limit is None else limit.recorded


def print_overrides(spec) -> None:
    """One note per command-line option override (``-M``, ``--model-args``): what it changed."""
    from auditlang.resolve.overrides import override_sentence  # lazy: the resolver only when overrides are printed

    for rec in getattr(spec, "model_overrides", None) or []:
        print(f"note: {override_sentence(rec)}", file=sys.stderr)


def spec_warnings(spec) -> list:
    """The spec's own warnings for `auditc plan` / `run` (W159, ...) plus W151 when the entry
    declares no audit: `auditc check` and editors do not say W151, since a fragment of shared
    definitions (models, templates, protocols) imported by other specs legitimately has none."""
    out = list(getattr(spec, "warnings", None) or [])
    if not spec.of_kind("audit"):
        bag = DiagnosticBag()
        bag.warning("W151", "the spec declares no audit: nothing is planned or run (0 cells)", Span.point(str(spec.entry)),
                    hint="add an `audit name { models = [...] datasets = [...] variants = [...] protocols = [...] }` block "
                         "(docs/language.md, 'audit NAME { ... }')")
        out += bag.warnings
    return out
