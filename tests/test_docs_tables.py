"""The docs tables generated from the component registry are current (issue 26, item 1): a
parameter added to an evaluator's ``Params`` changes docs/evaluators.md or fails here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_docs_tables_match_the_registry() -> None:
    r = subprocess.run([sys.executable, "scripts/registry_docs.py", "--check"], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert r.returncode == 0, r.stderr
    text = (REPO / "docs" / "evaluators.md").read_text(encoding="utf-8")
    assert "<!-- registry-table: evaluator -->\n| name |" in text  # the table is there, not an empty block
    assert "| `regex_reparse` | `tail` (150)" in text and "| `first_char` | `case_sensitive` (true)" in text
    text = (REPO / "docs" / "prompts.md").read_text(encoding="utf-8")  # perturbations: their classes' Params
    assert "<!-- registry-table: perturbation -->\n| name |" in text
    assert "| `space_insertion` | `seed` (none), `n_spaces` (1)" in text


def test_a_stale_table_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "registry_docs.py").write_text((REPO / "scripts" / "registry_docs.py").read_text())
    (tmp_path / "docs" / "x.md").write_text("<!-- registry-table: evaluator -->\n| old |\n<!-- end registry-table -->\n")
    r = subprocess.run([sys.executable, "scripts/registry_docs.py", "--check"], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert r.returncode == 1 and "docs/x.md" in r.stderr
