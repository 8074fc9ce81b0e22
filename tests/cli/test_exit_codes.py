"""The exit codes are said once (core/errors.py ``EXIT_CODES``): every error class, the CLI's
``--help``, docs/cli.md and README.md read that table (issue 37, item 2)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import auditlang
from auditlang.core.errors import EXIT_CODES, AuditlangError, exit_codes_line, exit_codes_markdown

REPO = Path(__file__).resolve().parents[2]


def _error_classes():
    import pkgutil
    import importlib

    for m in pkgutil.walk_packages(auditlang.__path__, "auditlang."):
        if m.name.endswith("__main__") or m.name.startswith(("auditlang.engines.vllm", "auditlang.scaleout.ray",
                                                             "auditlang.lsp")):
            continue  # the CLI entry (it runs), optional packages behind extras
        mod = importlib.import_module(m.name)
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if issubclass(cls, AuditlangError):
                yield cls


def test_every_error_class_exits_with_a_code_of_the_table():
    codes = {e.code for e in EXIT_CODES}
    classes = set(_error_classes())
    assert len(classes) >= 10
    assert {c.exit_code for c in classes} <= codes, {c.__name__: c.exit_code for c in classes}


def test_help_docs_and_readme_render_the_one_table():
    out = subprocess.run([sys.executable, "-m", "auditlang.cli", "--help"], capture_output=True, text=True,
                         cwd=REPO).stdout
    for e in EXIT_CODES:
        assert f"\n  {e.code:<4} " in out, e
    assert exit_codes_markdown() in (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert exit_codes_line() in readme
    for code in (4, 130):  # the two the README once left out
        assert f" {code} " in exit_codes_line()
