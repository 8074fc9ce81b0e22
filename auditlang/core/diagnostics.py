"""Diagnostics: every user-facing problem, with a location, a caret excerpt and a hint.

A :class:`Diagnostic` is data; :func:`render` turns it into text. Compiler stages collect
diagnostics in a :class:`DiagnosticBag` so that several errors are reported in one pass, and
raise :class:`CompileError` (carrying the bag) at stage boundaries.
"""

from __future__ import annotations


import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from auditlang.core.errors import AuditlangError
from auditlang.core.terminal import visible


@dataclass(frozen=True)
class Span:
    """A source range. Lines and columns are 1-based; ``end_col`` is exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @staticmethod
    def point(file: str, line: int = 1, col: int = 1) -> "Span":
        return Span(file, line, col, line, col + 1)


Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class Diagnostic:
    code: str  # stable id, e.g. "E101"; listed in docs/diagnostics.md
    message: str
    span: Span | None = None
    hint: str | None = None
    severity: Severity = "error"
    notes: tuple[str, ...] = ()


class SourceCache:
    """File texts by path, so diagnostics can quote source lines."""

    _texts: dict[str, str] = {}

    @classmethod
    def put(cls, file: str, text: str) -> None:
        cls._texts[file] = text

    @classmethod
    def line(cls, file: str, line: int) -> str | None:
        text = cls._texts.get(file)
        if text is None:
            try:
                text = Path(file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return None
            cls._texts[file] = text
        lines = text.splitlines()
        if 1 <= line <= len(lines):
            return lines[line - 1]
        return None


MAX_EXCERPT = 160  # characters of a source line shown under a diagnostic
MAX_MESSAGE = 1000  # characters of a message (a message can quote user text)


def render(d: Diagnostic, color: bool = False) -> str:
    """``file:line:col: error[E101]: message`` + source line + caret + hint."""
    red, yellow, cyan, bold, reset = ("\x1b[31m", "\x1b[33m", "\x1b[36m", "\x1b[1m", "\x1b[0m") if color else ("",) * 5
    sev_color = red if d.severity == "error" else yellow if d.severity == "warning" else cyan
    where = visible(f"{d.span}: ") if d.span else ""
    msg = d.message if len(d.message) <= MAX_MESSAGE else d.message[:MAX_MESSAGE] + f"... ({len(d.message)} characters)"
    msg = visible(msg)  # data and spec text quoted in a message: control characters shown, not sent
    out = [f"{bold}{where}{sev_color}{d.severity}[{d.code}]{reset}{bold}: {msg}{reset}"]
    if d.span:
        src = SourceCache.line(d.span.file, d.span.line)
        if src is not None:
            gutter = f"{d.span.line:>4} | "
            src = src.expandtabs(1)
            col = d.span.col
            width = (d.span.end_col - d.span.col) if d.span.end_line == d.span.line else max(1, len(src) - d.span.col + 1)
            if len(src) > MAX_EXCERPT:  # a window around the column, so a huge line prints small
                start = max(0, col - 1 - MAX_EXCERPT // 3)
                src = ("..." if start else "") + src[start:start + MAX_EXCERPT] + "..."
                col = col - start + (3 if start else 0)
                width = min(width, MAX_EXCERPT)
            width = max(1, min(width, max(1, len(src) - col + 1)))
            # control characters become one-column pictures (C1/bidi: escapes): re-measure the caret
            col, width = len(visible(src[:col - 1])) + 1, max(1, len(visible(src[col - 1:col - 1 + width])))
            src = visible(src)
            out.append(gutter + src)
            out.append(" " * (len(gutter) + col - 1) + sev_color + "^" * width + reset)
    for n in d.notes:
        out.append(f"  note: {visible(n)}")
    if d.hint:
        out.append(f"  {cyan}hint{reset}: {visible(d.hint)}")
    return "\n".join(out)


@dataclass
class DiagnosticBag:
    items: list[Diagnostic] = field(default_factory=list)
    _seen: set[Diagnostic] = field(default_factory=set, repr=False, compare=False)

    def add(self, d: Diagnostic) -> None:
        if len(self._seen) != len(self.items):  # items appended or replaced from outside
            self._seen = set(self.items)
        if d not in self._seen:  # a set: thousands of diagnostics stay linear
            self._seen.add(d)
            self.items.append(d)

    def error(self, code: str, message: str, span: Span | None = None, hint: str | None = None, notes: Iterable[str] = ()) -> None:
        self.add(Diagnostic(code, message, span, hint, "error", tuple(notes)))

    def warning(self, code: str, message: str, span: Span | None = None, hint: str | None = None) -> None:
        self.add(Diagnostic(code, message, span, hint, "warning"))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "warning"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise CompileError(self)


class CompileError(AuditlangError):
    """Raised at a stage boundary when a spec has errors; carries every diagnostic found."""

    def __init__(self, bag: DiagnosticBag) -> None:
        self.bag = bag
        super().__init__("\n\n".join(render(d) for d in bag.items))

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.bag.items


def did_you_mean(name: str, candidates: Iterable[str], what: str = "") -> str | None:
    """A hint: the closest candidates, else the available ones."""
    cands = sorted(set(candidates))
    pool = cands
    if len(cands) > 200:  # thousands of names (a generated spec): compare with the likely ones only
        pool = [c for c in cands if c[:1].lower() == name[:1].lower() and abs(len(c) - len(name)) <= 3][:200]
    close = difflib.get_close_matches(name, pool, n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
    if cands:
        shown = ", ".join(cands[:12]) + (", …" if len(cands) > 12 else "")
        return f"available{(' ' + what) if what else ''}: {shown}"
    return None
