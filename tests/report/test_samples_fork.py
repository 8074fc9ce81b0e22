"""The sample browser written in a forked child beside the report build (issue 36: 2.5 s of the
report at 16,000 requests): `auditc report RUN_DIR` with the child forced on writes the same
bytes as with it off, the child really wrote them, a child that fails is not trusted (the files
are written again in the build's process, and an error there is raised as in a serial build), and
a build that fails leaves no child behind. User path: `auditc run` then `auditc report` on a
machine with 4 usable cores or more (AUDITLANG_SAMPLES_FORK=1 / 0 forces it on / off)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.core import workers
from auditlang.core.requests import Request, Result
from auditlang.report import samples
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the child is forked only on Linux")

SPEC = """import "stdlib/s000"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model m = hf("org/scripted", dtype=float32, max_tokens=4)
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
"""


def _script(req: Request) -> Result | None:
    text = prompt_text(req)
    k = sum(map(ord, text)) % 4
    if req.kind == "choice_logprobs":
        return Result(request_id=req.id, kind=req.kind,
                      choice_logprobs={c: -0.1 - i * (k + 1) for i, c in enumerate(req.p["choices"])})
    if req.kind == "generate" and "confidence" in text:
        return generation(req, f"0.{k + 5}")
    if req.kind == "generate":
        return generation(req, "ABCA"[k])
    return None


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch) -> Path:
    workers._stop_tqdm_monitor()
    if threading.active_count() > 1:  # the build would (rightly) not fork beside them
        pytest.skip("threads left running by earlier tests in this process")
    use_scripted_engine(monkeypatch, _script)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "arc.jsonl").write_text(number_items(12), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.setenv(workers.SAMPLES_FORK_ENV, "0")
    rc = main(["run", str(tmp_path / "s.audit"), "--data-root", str(tmp_path / "data"), "--out", str(tmp_path / "run"),
               "--no-progress"])
    assert rc == 0
    return tmp_path / "run"


def _report_files(run: Path) -> dict[str, bytes]:
    report = run / "report"
    return {p.relative_to(report).as_posix(): p.read_bytes() for p in sorted(report.rglob("*"))
            if p.is_file() and ".figures-cache" not in p.parts}


def _spy_forks(monkeypatch) -> list[int]:
    """The pids of the children the sample browser forks."""
    pids: list[int] = []
    real = samples.fork_call

    def spy(fn, *args):
        call = real(fn, *args)
        pids.append(call._pid)
        return call
    monkeypatch.setattr(samples, "fork_call", spy)
    return pids


def test_auditc_report_with_the_child_writes_the_serial_bytes(run_dir: Path, monkeypatch, capsys) -> None:
    serial = _report_files(run_dir)
    assert {"samples.html", "samples.data.js", "report.html"} <= set(serial)
    pids = _spy_forks(monkeypatch)
    writers: list[int] = []
    real_write = samples.write_samples
    monkeypatch.setattr(samples, "write_samples", lambda *a, **k: writers.append(os.getpid()) or real_write(*a, **k))
    (run_dir / "report" / "samples.data.js").unlink()  # so the child's file is the one compared
    monkeypatch.setenv(workers.SAMPLES_FORK_ENV, "1")
    assert main(["report", str(run_dir)]) == 0
    assert len(pids) == 1 and writers == []  # forked, and this process never wrote the page
    assert _report_files(run_dir) == serial
    assert threading.active_count() == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)  # reaped


def test_the_rule_forks_only_with_four_cores_or_when_forced(monkeypatch) -> None:
    monkeypatch.delenv(workers.SAMPLES_FORK_ENV, raising=False)
    monkeypatch.setattr(workers, "usable_cpus", lambda: 2)  # CI's machine: in the build's process
    assert workers.fork_side("samples") is False
    monkeypatch.setattr(workers, "usable_cpus", lambda: 4)
    assert workers.fork_side("samples") is (threading.active_count() == 1)
    monkeypatch.setenv(workers.SAMPLES_FORK_ENV, "0")
    assert workers.fork_side("samples") is False
    monkeypatch.setattr(workers, "usable_cpus", lambda: 1)
    monkeypatch.setenv(workers.SAMPLES_FORK_ENV, "1")
    assert workers.fork_side("samples") is (threading.active_count() == 1)
    started = threading.Event()
    t = threading.Thread(target=started.wait)
    t.start()
    try:
        assert workers.fork_side("samples") is False  # never beside another thread
    finally:
        started.set()
        t.join()


def test_a_failed_child_is_not_trusted_and_the_error_is_raised_in_the_build(run_dir: Path, monkeypatch) -> None:
    serial = _report_files(run_dir)
    parent = os.getpid()
    real_write = samples.write_samples
    calls: list[str] = []

    def flaky(*a, **k):
        if os.getpid() != parent:
            (run_dir / "report" / "samples.data.js").write_text("half a file", encoding="utf-8")
            raise RuntimeError("disk full in the child")
        calls.append("parent")
        return real_write(*a, **k)
    monkeypatch.setattr(samples, "write_samples", flaky)
    monkeypatch.setenv(workers.SAMPLES_FORK_ENV, "1")
    build = samples.SamplesBuild(run_dir, {}, title="Samples: s")
    assert build.forked
    paths = build.finish()
    assert "RuntimeError: disk full in the child" in build.child_error
    assert calls == ["parent"] and {p.name for p in paths} == {"samples.html", "samples.data.js"}
    assert main(["report", str(run_dir)]) == 0
    assert calls == ["parent", "parent"]
    assert _report_files(run_dir) == serial  # the half file was written over

    def broken(*a, **k):
        raise ValueError("records.parquet unreadable")
    monkeypatch.setattr(samples, "write_samples", broken)
    build = samples.SamplesBuild(run_dir, {}, title="Samples: s")
    with pytest.raises(ValueError, match="unreadable"):  # as a serial build raises it
        build.finish()
    assert "ValueError: records.parquet unreadable" in build.child_error


def test_a_child_killed_by_a_signal_is_reported_and_close_stops_a_working_one(run_dir: Path, monkeypatch) -> None:
    parent = os.getpid()
    real_write = samples.write_samples

    def dies(*a, **k):
        if os.getpid() != parent:
            os.kill(os.getpid(), 9)
        return real_write(*a, **k)
    monkeypatch.setattr(samples, "write_samples", dies)
    monkeypatch.setenv(workers.SAMPLES_FORK_ENV, "1")
    build = samples.SamplesBuild(run_dir, {})
    build.finish()
    assert build.child_error == "the child process was ended by signal 9"
    assert (run_dir / "report" / "samples.data.js").read_text(encoding="utf-8").startswith("window.AUDITC_SAMPLES")

    monkeypatch.setattr(samples, "write_samples", lambda *a, **k: time.sleep(60))
    build = samples.SamplesBuild(run_dir, {})
    pid = build._child._pid
    t0 = time.monotonic()
    build.close()
    assert time.monotonic() - t0 < 30  # killed, not waited for
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    build.close()  # twice: nothing


def test_a_report_build_that_fails_leaves_no_child(run_dir: Path, monkeypatch) -> None:
    from auditlang import report

    pids = _spy_forks(monkeypatch)
    monkeypatch.setattr(samples, "write_samples", lambda *a, **k: time.sleep(60))
    monkeypatch.setattr(report, "build_checklist", lambda *a: (_ for _ in ()).throw(RuntimeError("checklist bug")))
    monkeypatch.setenv(workers.SAMPLES_FORK_ENV, "1")
    monkeypatch.setenv("AUDITLANG_FIGURE_WORKERS", "1")
    t0 = time.monotonic()
    assert main(["report", str(run_dir)]) != 0  # an internal error, reported by the CLI
    assert time.monotonic() - t0 < 30
    assert len(pids) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)
