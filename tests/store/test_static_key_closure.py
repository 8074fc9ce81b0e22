"""The cross-run cache key (execute/static_key.py) hashes the engine module's real auditlang
import closure, so an edit of any module the engine runs (hf_generate.py, gen.py, params.py,
vllm_stream.py, ...) makes the next run load the model again instead of reusing results the old
code computed (issue 37)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from auditlang.core.capabilities import ENGINE_CLASSES
from auditlang.execute.static_key import import_closure

PKG = Path(__file__).resolve().parents[2] / "auditlang"

KEY = """
import json, sys
from auditlang.core.engine import ModelConfig
from auditlang.execute.static_key import static_key
print(json.dumps(static_key(ModelConfig(name="m", engine="dryrun", path="x"))))
from auditlang.execute import static_key as sk
print(json.dumps({e: sk._sources(e) for e in ("hf", "vllm", "dryrun")}))
"""


def _keys(root: Path) -> tuple[str, dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", KEY], env=env, capture_output=True, text=True, check=True,
                         cwd=root).stdout.splitlines()
    return json.loads(out[0]), json.loads(out[1])


def test_closure_reaches_every_engine_module_it_runs():
    hf = import_closure(ENGINE_CLASSES["hf"][0])
    for m in ("hf", "hfstack", "embedded", "gen", "hf_generate", "hf_scoring", "params"):
        assert f"auditlang.engines.{m}" in hf, m
    vllm = import_closure(ENGINE_CLASSES["vllm"][0])
    for m in ("vllm_engine", "vllm_stream", "vllm_release", "gen", "params"):
        assert f"auditlang.engines.{m}" in vllm, m
    assert "auditlang.core.requests" in hf  # the request/result contract the engine fills
    assert all(name.startswith("auditlang") for name in hf)


@pytest.mark.parametrize(("edited", "changes"), [
    ("engines/hf_generate.py", {"hf", "vllm"}),  # vLLM's engine reuses hf's scoring stack
    ("engines/vllm_stream.py", {"vllm"}),
    ("engines/dryrun.py", {"dryrun"}),
])
def test_editing_a_module_of_the_closure_changes_that_engines_key(tmp_path, edited, changes):
    shutil.copytree(PKG, tmp_path / "auditlang", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "stdlib").symlink_to(PKG.parent / "stdlib")
    dry_before, before = _keys(tmp_path)
    f = tmp_path / "auditlang" / edited
    f.write_text(f.read_text() + "\n# an edit of the generation loop\n")
    dry_after, after = _keys(tmp_path)
    assert {e for e in before if before[e] != after[e]} == changes
    assert (dry_before != dry_after) == ("dryrun" in changes)  # the whole static key follows
