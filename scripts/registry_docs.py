"""The docs tables derived from the component registry (issue 26, item 1).

A docs page holds a generated table between two markers::

    <!-- registry-table: evaluator -->
    | name | parameters (default; allowed values) | rule | source |
    ...
    <!-- end registry-table -->

Usage::

    python scripts/registry_docs.py evaluator     # print the table (installed plugins included)
    python scripts/registry_docs.py --write       # rewrite every marked table in docs/*.md and README.md
    python scripts/registry_docs.py --check       # exit 1 when a marked table is out of date

Besides the component kinds, ``exit_codes`` (docs/cli.md) and ``exit_codes_line`` (README.md)
render the one exit-code table of ``auditlang/core/errors.py``. ``--write`` and ``--check`` document the built-in components only (installed plugins are
ignored). tests/test_docs_tables.py runs ``--check``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- registry-table: (\w+) -->\n)(.*?)(<!-- end registry-table -->)", re.S)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kinds", nargs="*", help="component kinds whose table to print (e.g. evaluator)")
    ap.add_argument("--write", action="store_true", help="rewrite the marked tables in docs/*.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when a marked table is out of date")
    a = ap.parse_args()
    if a.write or a.check:
        os.environ["AUDITLANG_NO_PLUGINS"] = "1"  # the docs describe the built-in components
    sys.path.insert(0, str(REPO))
    from auditlang.core.errors import exit_codes_line, exit_codes_markdown
    from auditlang.lsp.docs import registry_table as component_table

    rules = {"exit_codes": exit_codes_markdown, "exit_codes_line": exit_codes_line}  # rules said once elsewhere

    def registry_table(kind: str) -> str:
        return rules[kind]() if kind in rules else component_table(kind)

    for kind in a.kinds:
        sys.stdout.write(registry_table(kind))
    stale = []
    pages = [p for p in (REPO / "README.md",) if p.is_file()] + sorted((REPO / "docs").glob("*.md"))
    for page in pages if (a.write or a.check) else []:
        text = page.read_text(encoding="utf-8")
        new = BLOCK.sub(lambda m: m.group(1) + registry_table(m.group(2)) + m.group(4), text)
        if new != text:
            stale.append(page.relative_to(REPO))
            if a.write:
                page.write_text(new, encoding="utf-8")
    if a.check and stale:
        print(f"out of date: {', '.join(map(str, stale))}; run python scripts/registry_docs.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
