"""`auditc fmt FILE...`: canonical formatting`."""

from __future__ import annotations

from pathlib import Path

from auditlang.cli.common import EXIT_DIAG, EXIT_OK


def cmd_fmt(args) -> int:
    from auditlang.syntax.fmt import format_text
    from auditlang.syntax.parse import parse_text

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
