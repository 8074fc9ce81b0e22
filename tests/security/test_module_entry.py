"""`python -m auditlang.cli` run from a stranger's folder imports no plugin shipped in that folder,
like the `auditc` script (issue 24 item 9; docs/security.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# a component, so `check` looks the registry up (plugins load on the first lookup)
SPEC = 'model m = embedded("smollm2-135m-instruct")\nevaluator e = first_char()\n'


def test_module_entry_point_does_not_import_a_plugin_from_the_working_directory(tmp_path):
    folder = tmp_path / "downloaded-paper"
    folder.mkdir()
    marker = tmp_path / "PWNED"
    (folder / "evil_plugin.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\ndef register():\n    pass\n",
        encoding="utf-8")
    dist = folder / "evil_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evil-plugin\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[auditlang.plugins]\nevil = evil_plugin:register\n", encoding="utf-8")
    (folder / "paper.audit").write_text(SPEC, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "AUDITLANG_NO_PLUGINS"}
    env["PYTHONPATH"] = str(REPO)
    p = subprocess.run([sys.executable, "-m", "auditlang.cli", "check", "paper.audit"], cwd=folder, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert not marker.exists(), "the plugin in the working directory was imported"
    # the same folder on the import path on purpose (the user's choice) does load it: the test can fail
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(folder)])
    p = subprocess.run([sys.executable, "-m", "auditlang.cli", "check", "paper.audit"], cwd=folder, env=env,
                       capture_output=True, text=True, timeout=120)
    assert marker.exists()
