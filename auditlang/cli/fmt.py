"""`auditc fmt FILE...`: canonical formatting`."""

from __future__ import annotations

from pathlib import Path

from auditlang.cli.common import EXIT_DIAG, EXIT_OK


def cmd_fmt(args) -> int:
    from auditlang.syntax.fmt import format_text
    from auditlang.syntax.parse import parse_text

    from auditlang.core.diagnostics import CompileError, DiagnosticBag, did_you_mean

    missing = [Path(f) for f in args.files if not Path(f).is_file()]
    if missing:  # the same E100 diagnostic as check/plan/run, before any file is rewritten
        bag = DiagnosticBag()
        for p in missing:
            here = [q.name for q in p.parent.glob("*.audit")] if p.parent.is_dir() else []
            bag.error("E100", f"spec file not found: {p}", None, hint=did_you_mean(p.name, here, "specs here"))
        raise CompileError(bag)
    rc = EXIT_OK
    for f in args.files:
        p = Path(f)
        text = p.read_text(encoding="utf-8")
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
