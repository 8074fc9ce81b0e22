"""Nothing is written before the consent checks, and nothing into files auditlang did not create
(issue 40 item 6; docs/security.md):

- `--engine openai` asks about the host it would contact, `$OPENAI_BASE_URL`, not api.openai.com,
  and refuses before the run directory exists;
- `--cache DIR` holding a user's own `journal.sqlite` is refused, the file untouched;
- a folder whose `run.json` merely holds a `format` key (another tool's, or a forged
  `auditlang.run/2` without the hashes auditlang records) is not taken for a run directory.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from auditlang.cli import main

from .conftest import make_project, run_dryrun


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_engine_openai_asks_about_the_base_url_it_would_use(tmp_path, monkeypatch):
    proj = make_project(tmp_path / "proj")
    env = {**os.environ, "OPENAI_BASE_URL": "http://evil.example.com:9/v1"}
    cmd = [sys.executable, "-m", "auditlang.cli", "run", "s.audit", "--data-root", "data", "--out", "runs/r",
           "--engine", "openai", "--no-progress", "--allow-host", "api.openai.com"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=proj, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "error[E180]" in proc.stderr and "'evil.example.com' (http://evil.example.com:9/v1)" in proc.stderr
    assert "--allow-host evil.example.com" in proc.stderr and "Traceback" not in proc.stderr
    assert not (proj / "runs").exists()  # refused before anything was written
    # `auditc plan` lists the same host for the same override
    monkeypatch.setenv("OPENAI_BASE_URL", "http://evil.example.com:9/v1")
    from auditlang.execute.access import run_access
    from auditlang.resolve import compile_spec

    (acc,) = [a for a in run_access(compile_spec(proj / "s.audit"), "openai") if a.kind == "model"]
    assert (acc.host, acc.url_from) == ("evil.example.com", "environment")


def test_cache_with_a_users_own_journal_is_refused(tmp_path, capsys):
    proj = make_project(tmp_path / "proj")
    mine = proj / "notes" / "journal.sqlite"
    mine.parent.mkdir()
    db = sqlite3.connect(mine)
    db.execute("CREATE TABLE diary (day TEXT, entry TEXT)")
    db.execute("INSERT INTO diary VALUES ('mon', 'private')")
    db.commit()
    db.close()
    before = _snapshot(mine.parent)
    capsys.readouterr()
    assert run_dryrun("s.audit", "runs/r", "--cache", "notes") == 1
    err = capsys.readouterr().err
    assert "notes/journal.sqlite is not an auditlang journal" in err and "diary" in err and "Traceback" not in err
    assert _snapshot(mine.parent) == before  # no table, no -wal file added
    assert not (proj / "runs").exists()


def test_a_cache_auditlang_created_is_reused(tmp_path, capsys):
    make_project(tmp_path / "proj")
    assert run_dryrun("s.audit", "runs/a", "--cache", "cache") == 0
    capsys.readouterr()
    assert run_dryrun("s.audit", "runs/b", "--cache", "cache") == 0
    assert "from the response cache" in capsys.readouterr().err


@pytest.mark.parametrize("run_json", [{"format": "acme-tracker/3", "id": 7},
                                      {"format": "auditlang.run/2", "spec_entry": "spec/project/s.audit"}])
@pytest.mark.parametrize("extra", ["notes.txt", "data"])
def test_a_foreign_run_json_with_a_format_key_is_not_a_run_directory(tmp_path, capsys, run_json, extra):
    proj = make_project(tmp_path / "proj")
    folder = proj / "results"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps(run_json), encoding="utf-8")
    (folder / "plan.json").write_text('{"mine": true}', encoding="utf-8")
    if extra == "data":  # only names auditlang writes, but no run of it was ever started here
        (folder / "data").mkdir()
        (folder / "data" / "x.csv").write_text("a,b\n1,2\n", encoding="utf-8")
        (folder / "report").mkdir()
        (folder / "report" / "index.md").write_text("# my report\n", encoding="utf-8")
    else:
        (folder / extra).write_text("keep me\n", encoding="utf-8")
    before = _snapshot(folder)
    capsys.readouterr()
    assert run_dryrun("s.audit", "results") == 1
    err = capsys.readouterr().err
    assert "results" in err and "nothing was written" in err and "Traceback" not in err, err
    assert _snapshot(folder) == before


def test_merge_refuses_a_foreign_target(tmp_path, capsys):
    proj = make_project(tmp_path / "proj")
    assert run_dryrun("s.audit", "runs/s0", "--shard", "0/1") == 0
    folder = proj / "results"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"format": "auditlang.run/2"}), encoding="utf-8")
    (folder / "mine.txt").write_text("keep me\n", encoding="utf-8")
    before = _snapshot(folder)
    capsys.readouterr()
    assert main(["merge", "results", "runs/s0"]) == 1
    assert "nothing was written" in capsys.readouterr().err
    assert _snapshot(folder) == before


def test_a_real_run_directory_still_resumes(tmp_path, capsys):
    proj = make_project(tmp_path / "proj")
    assert run_dryrun("s.audit", "runs/r") == 0
    (proj / "runs/r/notes.txt").write_text("mine\n", encoding="utf-8")  # the user's own file beside the run
    for name in ("heartbeat.json", "run.lock"):
        (proj / "runs/r" / name).unlink(missing_ok=True)
    capsys.readouterr()
    assert run_dryrun("s.audit", "runs/r") == 0  # owned: run.json vouches for plan.json
    assert "executed 0" in capsys.readouterr().err
    # plan.json replaced by another file: run.json no longer vouches for the folder
    (proj / "runs/r/plan.json").write_text('{"mine": true}', encoding="utf-8")
    capsys.readouterr()
    assert run_dryrun("s.audit", "runs/r") == 1
    err = capsys.readouterr().err
    assert "names an auditlang run, but" in err and "plan.json" in err and "nothing was written" in err
