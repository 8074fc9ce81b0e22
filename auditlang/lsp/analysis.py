"""The compiler's own diagnostics for an editor buffer: parse, load imports, resolve, check.

:func:`check_text` runs :func:`auditlang.resolve.compile_spec` on the unsaved text and maps every
diagnostic to a 0-based range in the document. A diagnostic located in another file (a broken
import) is shown on the import line that leads there, with its own ``file:line:col`` in front.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from auditlang.core.diagnostics import CompileError, Diagnostic
from auditlang.resolve import compile_spec


@dataclass(frozen=True)
class Issue:
    """A diagnostic placed in the document: 0-based lines, code-point columns, end exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int
    severity: str  # error | warning | note
    code: str
    message: str


def _message(d: Diagnostic) -> str:
    out = d.message
    for n in d.notes:
        out += f"\nnote: {n}"
    if d.hint:
        out += f"\nhint: {d.hint}"
    return out


def _first_import_line(text: str) -> int:
    for i, ln in enumerate(text.splitlines()):
        if ln.lstrip().startswith("import"):
            return i
    return 0


def check_text(text: str, path: Path, max_import_chars: int | None = None) -> list[Issue]:
    """Every error and warning ``auditc check`` would report for ``text`` saved at ``path``
    (an import over ``max_import_chars`` is one E111 instead)."""
    try:
        diags = list(compile_spec(path, text=text, max_import_chars=max_import_chars).warnings)
    except CompileError as e:
        diags = list(e.diagnostics)
    except Exception as e:  # noqa: BLE001 - an editor must keep running; show it as a diagnostic
        return [Issue(0, 0, 0, 1, "error", "E000", f"internal error in auditlang: {e!r}")]
    me = str(path.resolve())
    lines = text.splitlines() or [""]
    out: list[Issue] = []
    for d in diags:
        msg = _message(d)
        s = d.span
        if s is not None and _same(s.file, me):
            line = min(max(s.line, 1), len(lines)) - 1
            end_line = min(max(s.end_line, s.line), len(lines)) - 1
            col = max(s.col - 1, 0)
            end_col = max(s.end_col - 1, col + 1) if end_line == line else max(s.end_col - 1, 0)
            out.append(Issue(line, col, end_line, end_col, d.severity, d.code, msg))
        else:
            line = _first_import_line(text) if s is not None else 0
            where = f"{s}: " if s is not None else ""
            out.append(Issue(line, 0, line, max(1, len(lines[line])), d.severity, d.code, where + msg))
    return out


def _same(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b)
    except OSError:
        return a == b

