"""A local `hf(PATH)` / `vllm(PATH)` checkpoint is confined like a data file (issue 40 item 5;
docs/security.md "Files a spec may read"): outside the project root and the model roots the
user allows, `check`, `plan`, `show` and `run` stop with E118 at the path, before anything reads
the folder (its config, tokenizer or chat template). The embedded models' cache, the Hugging
Face hub cache and `$AUDITLANG_MODEL_ROOT` stay allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditlang.cli import main

from .conftest import BASE, make_project

SECRET = "SECRET-CHAT-TEMPLATE-7c1f"


def _checkpoint(folder: Path) -> Path:
    """A folder that looks like a checkpoint to the tokenizer loaders (its chat template is the secret)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": SECRET + "{{ messages }}"}),
                                                  encoding="utf-8")
    return folder


def _spec(path: str, ctor: str = "hf") -> str:
    return BASE.replace('embedded("smollm2-135m-instruct", dtype=float32,', f'{ctor}("{path}", dtype=float32,')


COMMANDS = (["check", "s.audit"], ["plan", "s.audit", "--data-root", "data"],
            ["show", "s.audit", "*", "--data-root", "data"],
            ["run", "s.audit", "--data-root", "data", "--engine", "dryrun", "--no-progress", "--out", "runs/r"])


@pytest.mark.parametrize("ctor", ["hf", "vllm"])
def test_a_checkpoint_outside_the_project_is_refused(tmp_path, ctor):
    ckpt = _checkpoint(tmp_path / "elsewhere" / "ckpt")
    proj = make_project(tmp_path / "proj", spec=_spec(str(ckpt), ctor))
    env = {k: v for k, v in os.environ.items() if k != "AUDITLANG_MODEL_ROOT"}
    for cmd in COMMANDS:
        proc = subprocess.run([sys.executable, "-m", "auditlang.cli", *cmd], capture_output=True, text=True,
                              cwd=proj, env=env)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1, (cmd, out)
        assert "s.audit:4:" in out and "error[E118]" in out and f"resolves to {ckpt}" in out, (cmd, out)
        assert "AUDITLANG_MODEL_ROOT" in out and SECRET not in out and "Traceback" not in out, cmd
    assert not (proj / "runs/r").exists()


def test_relative_dotdot_and_a_symlink_out_are_refused(tmp_path, capsys):
    ckpt = _checkpoint(tmp_path / "elsewhere" / "ckpt")
    proj = make_project(tmp_path / "proj")
    (proj / "models").mkdir()
    (proj / "models" / "link").symlink_to(ckpt)
    for path in ("../elsewhere/ckpt", "models/link", "~/../../" + str(ckpt).lstrip("/")):
        (proj / "s.audit").write_text(_spec(path), encoding="utf-8")
        capsys.readouterr()
        assert main(["check", "s.audit"]) == 1, path
        err = capsys.readouterr().err
        assert "E118" in err and f"local checkpoint '{path}'" in err, (path, err)


def test_allowed_checkpoints_still_compile(tmp_path, capsys, monkeypatch):
    """Inside the project, under $AUDITLANG_MODEL_ROOT, and the converted embedded checkpoints in
    $AUDITLANG_CACHE/models (tests/gpu and benchmarks write `vllm("<that dir>")`); a Hub id is no path."""
    outside = _checkpoint(tmp_path / "elsewhere" / "ckpt")
    cache = tmp_path / "cache"
    converted = _checkpoint(cache / "models" / "smollm2-135m-instruct")
    proj = make_project(tmp_path / "proj")
    _checkpoint(proj / "models" / "mine")
    monkeypatch.setenv("AUDITLANG_CACHE", str(cache))
    for path in ("models/mine", str(proj / "models" / "mine"), str(converted), "HuggingFaceTB/SmolLM2-135M-Instruct"):
        (proj / "s.audit").write_text(_spec(path, "vllm"), encoding="utf-8")
        capsys.readouterr()
        assert main(["check", "s.audit"]) == 0, (path, capsys.readouterr().err)
    (proj / "s.audit").write_text(_spec(str(outside)), encoding="utf-8")
    assert main(["check", "s.audit"]) == 1
    monkeypatch.setenv("AUDITLANG_MODEL_ROOT", str(tmp_path / "elsewhere"))
    capsys.readouterr()
    assert main(["check", "s.audit"]) == 0, capsys.readouterr().err


def test_a_swapped_model_is_the_users_own(tmp_path, capsys):
    """`--swap-model NAME=hf("/abs")` is typed by the user outside the spec: not confined."""
    ckpt = _checkpoint(tmp_path / "elsewhere" / "ckpt")
    make_project(tmp_path / "proj")
    capsys.readouterr()
    rc = main(["plan", "s.audit", "--data-root", "data", "--no-requests",
               "--swap-model", f'smol=hf("{ckpt}", dtype=float32, max_tokens=8)'])
    assert rc == 0, capsys.readouterr().err
