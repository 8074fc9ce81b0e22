"""`auditc fmt FILE...`: canonical formatting."""

from __future__ import annotations

from pathlib import Path

from auditlang.cli.common import EXIT_DIAG, EXIT_OK, print_diags
from auditlang.core.diagnostics import CompileError, DiagnosticBag, did_you_mean
from auditlang.syntax.fmt import format_text
from auditlang.syntax.parse import parse_text


def cmd_fmt(args) -> int:
    rc = EXIT_OK
    bag = DiagnosticBag()
    for f in args.files:
        p = Path(f)
        text = _read(p, bag)
        if text is None:
            continue
        try:
            parse_text(text, str(p))  # diagnostics for broken files
        except CompileError as e:
            for d in e.diagnostics:
                bag.add(d)
            continue
        out = format_text(text, str(p))
        if args.check:
            if out != text:
                print(f"would reformat {p}")
                rc = EXIT_DIAG
        elif out != text:
            p.write_text(out, encoding="utf-8")
            print(f"reformatted {p}")
    if bag.errors:
        print_diags(bag.items)
        return EXIT_DIAG
    return rc


def _read(p: Path, bag: DiagnosticBag) -> str | None:
    """The file's text, or None with a diagnostic (missing, a directory, unreadable, not UTF-8)."""
    if p.is_dir():
        bag.error("E111", f"cannot format '{p}': it is a directory", None,
                  hint=f"name the spec files, e.g. auditc fmt {p / '*.audit'}")
        return None
    if not p.exists():
        here = [q.name for q in p.parent.glob("*.audit")] if p.parent.is_dir() else []
        bag.error("E100", f"file not found: {p}", None, hint=did_you_mean(p.name, here, "specs here"))
        return None
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        bag.error("E111", f"cannot read '{p}': {getattr(e, 'strerror', None) or e}", None)
        return None
