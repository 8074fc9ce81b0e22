"""The guards themselves (issue 26, item 6): a missing golden file fails unless an update is
asked for explicitly; the layer test sees every form of import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

GOLDEN_USER = '''
from pathlib import Path

def test_uses_a_golden(golden):
    golden(Path(__file__).parent / "goldens" / "new.txt", "output\\n")
'''


def _pytest(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "AUDITLANG_UPDATE_GOLDENS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder), *args],
                          capture_output=True, text=True, cwd=folder, env={**clean, **env}, timeout=300)


def test_a_missing_golden_fails_unless_an_update_is_asked_for(tmp_path: Path) -> None:
    shutil.copyfile(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_g.py").write_text(GOLDEN_USER, encoding="utf-8")
    target = tmp_path / "goldens" / "new.txt"
    r = _pytest(tmp_path)  # no $CI, no flag: the old fixture wrote the file and passed here
    assert r.returncode == 1 and "golden file" in r.stdout and "is missing" in r.stdout, r.stdout[-2000:]
    assert not target.exists()
    assert _pytest(tmp_path, "--update-goldens").returncode == 0 and target.read_text() == "output\n"
    target.write_text("stale\n")
    assert _pytest(tmp_path).returncode == 1  # a differing golden fails
    assert _pytest(tmp_path, AUDITLANG_UPDATE_GOLDENS="1").returncode == 0 and target.read_text() == "output\n"
