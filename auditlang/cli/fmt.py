"""`auditc fmt FILE...`: canonical formatting."""

from __future__ import annotations

from pathlib import Path

from auditlang.cli.common import EXIT_DIAG, EXIT_OK
from auditlang.core.diagnostics import CompileError, DiagnosticBag, did_you_mean
from auditlang.syntax.fmt import format_text
from auditlang.syntax.parse import parse_text


def cmd_fmt(args) -> int:
    bag = DiagnosticBag()
    texts = {f: _read(Path(f), bag) for f in args.files}
    if bag.errors:  # missing, a directory, unreadable: diagnostics before any file is rewritten
        raise CompileError(bag)
    rc = EXIT_OK
    for f, text in texts.items():
        p = Path(f)
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


def _read(p: Path, bag: DiagnosticBag) -> str | None:
    """The file's text, or None with a diagnostic (the same E100 as check/plan/run for a missing
    file; E111 for a directory, an unreadable file or one that is not UTF-8)."""
    if p.is_dir():
        bag.error("E111", f"cannot format '{p}': it is a directory", None,
                  hint=f"name the spec files, e.g. auditc fmt {p / '*.audit'}")
        return None
    if not p.exists():
        here = [q.name for q in p.parent.glob("*.audit")] if p.parent.is_dir() else []
        bag.error("E100", f"spec file not found: {p}", None, hint=did_you_mean(p.name, here, "specs here"))
        return None
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        bag.error("E111", f"cannot read '{p}': {getattr(e, 'strerror', None) or e}", None)
        return None
