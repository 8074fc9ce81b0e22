"""`hub(...)` names a Hub dataset, never a local folder (issue 24 item 1; docs/security.md).

A stranger's spec that writes `hub("/abs/dir")`, `hub("../../dir")`, or a Hub id that a folder of
the same name in the working directory shadows (a symlink to somewhere else) must not read that
folder: local data goes through jsonl(...)/csv(...), confined to the project and data roots.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditlang.cli import main

SECRET = "HUB-PATH-SECRET-0815"
ROWS = "".join(json.dumps({"id": f"q{i}", "question": f"{SECRET} {i}?", "choices": ["a", "b", "c", "d"],
                           "answer": "a"}) + "\n" for i in range(6))


def _spec(hub_id: str) -> str:
    return f"""import "stdlib/s000"
dataset d = hub("{hub_id}", "train", task=multiple_choice, size=6)
model m = embedded("smollm2-135m-instruct", max_tokens=4)
audit a {{
  models = [m]
  datasets = [d]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
}}
"""


@pytest.fixture
def stranger(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """(project folder, a folder outside it holding data files the spec must not read); offline."""
    pytest.importorskip("datasets")
    outside = tmp_path / "outside" / "private"
    outside.mkdir(parents=True)
    (outside / "train.jsonl").write_text(ROWS, encoding="utf-8")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "auditlang.toml").write_text("", encoding="utf-8")
    monkeypatch.chdir(proj)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    return proj, outside


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_a_path_as_hub_id_is_a_diagnostic_and_nothing_is_read(stranger, capsys, how):
    proj, outside = stranger
    hub_id = str(outside) if how == "absolute" else "../outside/private"
    (proj / "s.audit").write_text(_spec(hub_id), encoding="utf-8")
    for cmd in (["check", "s.audit"], ["plan", "s.audit"], ["plan", "s.audit", "--format", "json"],
                ["run", "s.audit", "--engine", "dryrun", "--out", "runs/r", "--display", "none"]):
        assert main(cmd) == 1, cmd
        out = capsys.readouterr()
        assert "error[E123]" in out.err and "s.audit:2:" in out.err and "NAMESPACE/NAME" in out.err
        assert "jsonl(" in out.err  # the hint says how to read a local file
        assert SECRET not in out.out + out.err
    assert not (proj / "runs").exists()


def test_a_folder_shadowing_a_hub_id_is_not_read(stranger, capsys):
    """`hub("org/data")` with ./org/data a symlink to a private folder: the Hub id is looked up
    on the Hub (here: the empty offline cache), never in the working directory."""
    proj, outside = stranger
    (proj / "org").mkdir()
    (proj / "org" / "data").symlink_to(outside, target_is_directory=True)
    (proj / "s.audit").write_text(_spec("org/data"), encoding="utf-8")
    assert main(["plan", "s.audit", "--format", "json"]) == 0
    out = capsys.readouterr()
    plan = json.loads(out.out)
    assert not plan["datasets"]["d"]["available"] and plan["estimated"]
    assert SECRET not in out.out + out.err
    assert main(["run", "s.audit", "--engine", "dryrun", "--out", "runs/r", "--display", "none"]) == 1
    out = capsys.readouterr()
    assert "cannot run" in out.err and SECRET not in out.out + out.err
    assert not list(proj.glob("runs/r/data/**/*.jsonl"))
