"""stdlib/templates/INDEX.md lists every template with the variables it really reads."""

from __future__ import annotations

import re

from auditlang.prompts import STDLIB_TEMPLATES_DIR, compile_stdlib_template, list_stdlib_templates

ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<vars>[^|]*) \|", re.MULTILINE)


def test_index_matches_the_template_files() -> None:
    index = (STDLIB_TEMPLATES_DIR / "INDEX.md").read_text(encoding="utf-8")
    rows = {m["name"]: m["vars"].strip() for m in ROW.finditer(index)}
    assert sorted(rows) == list_stdlib_templates()
    for name, listed in rows.items():
        expected = sorted(compile_stdlib_template(name).variables)
        got = [] if listed == "—" else re.findall(r"`([^`]+)`", listed)
        assert got == expected, name
