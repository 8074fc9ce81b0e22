"""A damaged run directory or an odd `--cache` is a clear error naming the file and what to do,
never an internal error (issue 24 item 6; docs/security.md). Each test damages a finished run the
way a crash, a full disk or a careless `cp`/`rm` would, then types the command a user would."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main

from .conftest import make_project, run_dryrun


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    proj = make_project(tmp_path / "proj")
    assert run_dryrun("s.audit", "runs/r") == 0
    return proj


def _err(capsys) -> str:
    out = capsys.readouterr()
    assert "internal error" not in out.err and "Traceback" not in out.err
    return out.err


@pytest.mark.parametrize("body", [b"{not json", b"", b"[1, 2]", b"\xff\xfe"])
def test_run_json_that_is_not_json(finished, capsys, body):
    (finished / "runs/r/run.json").write_bytes(body)
    capsys.readouterr()
    for cmd in (["report", "runs/r"], ["status", "runs/r"]):
        assert main(cmd) == 1, cmd
        err = _err(capsys)
        assert "runs/r/run.json is damaged" in err and "auditc run SPEC --out runs/r" in err
    # what the hint says works: the run is resumed (nothing executed again) and run.json rewritten
    assert run_dryrun("s.audit", "runs/r") == 0
    assert main(["report", "runs/r"]) == 0


def test_truncated_records(finished, capsys):
    """A truncated records.parquet is no crash: `auditc report` finds it no longer matches the hash
    recorded at scoring and rebuilds it from the journal (store/integrity.py), saying so."""
    rec = finished / "runs/r/records.parquet"
    rec.write_bytes(rec.read_bytes()[: rec.stat().st_size // 2])
    capsys.readouterr()
    assert main(["report", "runs/r"]) == 0
    err = _err(capsys)
    assert "Traceback" not in err and "records.parquet" in err and "rebuilt from journal.sqlite" in err
    from auditlang.store.records import read_records

    assert len(read_records(rec)) > 0  # readable again


@pytest.mark.parametrize("how", ["deleted", "empty"])
def test_lost_journal(finished, capsys, how):
    j = finished / "runs/r/journal.sqlite"
    for extra in ("journal.sqlite-wal", "journal.sqlite-shm"):
        (finished / "runs/r" / extra).unlink(missing_ok=True)
    if how == "deleted":
        j.unlink()
    else:
        j.write_bytes(b"")
    capsys.readouterr()
    assert main(["status", "runs/r"]) == 1  # a diagnostic naming the file (store/integrity.py), no crash
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    what = "is missing" if how == "deleted" else "is empty (0 bytes)"
    assert f"runs/r/journal.sqlite: the journal {what}" in out.err and "rerun `auditc run SPEC --out runs/r`" in out.err
    if how == "empty":
        assert j.stat().st_size == 0  # status did not write into it


@pytest.mark.parametrize("target", ["file", "/dev/null", "/proc/auditlang-cache", "under-a-file"])
def test_odd_cache_targets(tmp_path, capsys, target):
    proj = make_project(tmp_path / "proj")
    (proj / "a-file").write_text("x", encoding="utf-8")
    path = {"file": "a-file", "under-a-file": "a-file/cache"}.get(target, target)
    assert run_dryrun("s.audit", "runs/r", "--cache", path) == 1
    err = _err(capsys)
    assert f"--cache {path}:" in err and "hint:" in err
    assert not (proj / "runs").exists()
