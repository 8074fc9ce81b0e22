"""The executor: caching, fingerprints, failures, interrupts, sharding, progress, kill -9."""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from store_fake_engine import HashEngine, arc_requests, dump_results, hash_result

from auditlang.core.engine import EngineError
from auditlang.execute import execute
from auditlang.core.requests import Request
from auditlang.store import Journal, Shard

WORKER = Path(__file__).resolve().parent / "store_worker.py"


def _clean_run(tmp_path: Path, requests: list[Request], name: str = "clean") -> list[tuple]:
    with Journal(tmp_path / name) as j:
        execute(HashEngine(), requests, j, batch_size=7, progress=False)
    return dump_results(tmp_path / name / "journal.sqlite")


def test_executes_everything_then_nothing(journal: Journal, requests_100: list[Request]) -> None:
    eng = HashEngine()
    stats = execute(eng, requests_100 + requests_100[:30], journal, batch_size=16, progress=False)
    assert (stats.requested, stats.cached, stats.executed, stats.errors) == (100, 0, 100, 0)
    assert sorted(eng.executed) == sorted(r.id for r in requests_100)  # duplicates ran once
    assert eng.batches == [16] * 6 + [4]
    assert journal.get_many([r.id for r in requests_100], stats.fp_hash) == {r.id: hash_result(r) for r in requests_100}
    again = HashEngine()
    stats2 = execute(again, requests_100, journal, batch_size=16, progress=False)
    assert (stats2.requested, stats2.cached, stats2.executed) == (100, 100, 0)
    assert again.executed == [] and again.batches == []
    assert "100 cached, 0 executed" in stats2.summary()


def test_stage_two_call_runs_only_new_requests(journal: Journal) -> None:
    stage1 = arc_requests(20)
    execute(HashEngine(), stage1, journal, progress=False)
    stage2 = arc_requests(30)  # a superset: the 20 first items are cached
    eng = HashEngine()
    stats = execute(eng, stage2, journal, progress=False)
    assert stats.executed == 20 and stats.cached == 40
    assert set(eng.executed) == {r.id for r in stage2[40:]}


def test_fingerprint_change_re_executes(journal: Journal, requests_100: list[Request]) -> None:
    execute(HashEngine(version="1"), requests_100, journal, progress=False)
    eng = HashEngine(version="2")
    stats = execute(eng, requests_100, journal, progress=False)
    assert stats.executed == 100 and stats.cached == 0
    assert len(journal.fingerprints()) == 2 and journal.counts().results == 200


def test_failures_are_stored_and_retried_only_when_asked(journal: Journal, requests_100: list[Request]) -> None:
    bad = {requests_100[3].id, requests_100[50].id}
    stats = execute(HashEngine(fail_ids=bad), requests_100, journal, batch_size=10, progress=False)
    assert stats.errors == 2 and journal.counts().errors == 2
    eng = HashEngine()
    stats = execute(eng, requests_100, journal, progress=False)
    assert stats.executed == 0 and stats.cached_errors == 2 and "retry" in stats.summary()
    stats = execute(eng, requests_100, journal, progress=False, retry_errors=True)
    assert stats.executed == 2 and set(eng.executed) == bad and stats.errors == 0
    assert journal.counts().errors == 0


def test_engine_error_keeps_committed_batches_and_rerun_resumes(tmp_path: Path, requests_100: list[Request]) -> None:
    with Journal(tmp_path / "run") as j:
        with pytest.raises(EngineError) as info:
            execute(HashEngine(raise_after=45), requests_100, j, batch_size=10, progress=False)
        msg = str(info.value)
        assert "simulated device failure" in msg and "'fake'" in msg and "rerun to resume" in msg
        assert info.value.hint == "check the GPU"
        assert j.counts().results == 45  # 4 full batches + the 5 results returned before the failure
        assert j.counts().pending == 55
        eng = HashEngine()
        stats = execute(eng, requests_100, j, batch_size=10, progress=False)
        assert stats.executed == 55 and stats.cached == 45 and j.counts().pending == 0
    assert dump_results(tmp_path / "run" / "journal.sqlite") == _clean_run(tmp_path, requests_100)


def test_keyboard_interrupt_leaves_a_consistent_journal(tmp_path: Path, requests_100: list[Request]) -> None:
    with Journal(tmp_path / "run") as j:
        with pytest.raises(KeyboardInterrupt):
            execute(HashEngine(interrupt_after=33), requests_100, j, batch_size=10, progress=False)
        assert j.counts().results == 33
        assert j._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert not j._db.in_transaction
        stats = execute(HashEngine(), requests_100, j, batch_size=10, progress=False)
        assert stats.executed == 67
    assert dump_results(tmp_path / "run" / "journal.sqlite") == _clean_run(tmp_path, requests_100)


def test_other_engine_exceptions_propagate_with_context(journal: Journal, requests_100: list[Request]) -> None:
    class Broken(HashEngine):
        def run(self, requests):  # type: ignore[override]
            yield from super().run(list(requests)[:2])
            raise ZeroDivisionError("bug in engine")

    with pytest.raises(ZeroDivisionError) as info:
        execute(Broken(), requests_100, journal, batch_size=10, progress=False)
    assert any("rerun to resume" in n for n in info.value.__notes__)
    assert journal.counts().results == 2


def test_engine_contract_violations_are_engine_errors(journal: Journal, requests_100: list[Request]) -> None:
    with pytest.raises(EngineError, match="no result for 1 of 10"):
        execute(HashEngine(drop_ids={requests_100[12].id}), requests_100, journal, batch_size=10, progress=False)
    # batches are grouped by kind (choice_logprobs first): the dropped generate request is in
    # the 6th batch; the 5 batches before it and the 9 good results of its batch are committed
    assert journal.counts().results == 59

    class Stranger(HashEngine):
        def run(self, requests):  # type: ignore[override]
            yield hash_result(arc_requests(60)[-1])

    with pytest.raises(EngineError, match="not in the batch"):
        execute(Stranger(), requests_100, journal, progress=False)


def test_requests_of_another_model_or_unsupported_kind_are_refused(journal: Journal) -> None:
    with pytest.raises(ValueError, match=r"model\(s\) \['other'\]"):
        execute(HashEngine(), arc_requests(2, model="other"), journal, progress=False)
    with pytest.raises(EngineError, match=r"cannot serve request kind\(s\) \['choice_logprobs'\]") as info:
        execute(HashEngine(kinds={"generate"}), arc_requests(2), journal, progress=False)
    assert "generate" in info.value.hint
    with pytest.raises(ValueError, match="batch_size"):
        execute(HashEngine(), arc_requests(2), journal, batch_size=0, progress=False)
    assert journal.counts().results == 0


def test_shards_run_their_part_and_label_rows(tmp_path: Path, requests_100: list[Request]) -> None:
    with Journal(tmp_path / "run") as j:
        total = 0
        for k in range(3):
            eng = HashEngine()
            stats = execute(eng, requests_100, j, progress=False, shard=Shard(k, 3))
            assert stats.requested + stats.out_of_shard == 100
            assert set(eng.executed) == {r.id for r in Shard(k, 3).select(requests_100)}
            total += stats.executed
        assert total == 100
        labels = dict(j._db.execute("SELECT shard, COUNT(*) FROM results GROUP BY shard").fetchall())
    assert sum(labels.values()) == 100 and set(labels) == {"0/3", "1/3", "2/3"}


def test_progress_bar_on_a_terminal_plain_lines_otherwise(journal: Journal, requests_100: list[Request]) -> None:
    tty = io.StringIO()
    execute(HashEngine(), requests_100[:50], journal, progress=True, description="smol stage 1",
            console=Console(file=tty, force_terminal=True, width=120))
    out = tty.getvalue()
    assert "smol stage 1" in out and "req/s" in out and "50/50" in out
    pipe = io.StringIO()
    execute(HashEngine(), requests_100[50:75], journal, progress=True, console=Console(file=pipe, force_terminal=False))
    lines = pipe.getvalue().splitlines()  # no terminal: plain lines for logs (issue 14)
    assert lines[0] == "[fake] 25 requests to run" and lines[-1].startswith("[fake] done: 25/25 requests in ")
    quiet = io.StringIO()
    execute(HashEngine(), requests_100[75:], journal, progress=False, console=Console(file=quiet, force_terminal=True))
    assert quiet.getvalue() == ""


def _count_results(db_path: Path) -> int:
    try:
        db = sqlite3.connect(db_path, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_kill_9_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    run = tmp_path / "killed"
    reqs = arc_requests(100)  # 200 requests
    # the engine hangs after 150 results, so the kill lands mid-run however loaded the machine is
    proc = subprocess.Popen([sys.executable, str(WORKER), str(run), "100", "0.01", "8", "-", "150"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _count_results(run / "journal.sqlite") < 60:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "worker made no progress"
        time.sleep(0.02)
    time.sleep(0.037)  # land somewhere inside a batch
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    committed = _count_results(run / "journal.sqlite")
    assert 60 <= committed <= 144 and committed % 8 == 0  # whole batches only
    with Journal(run) as j:
        assert j._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert j.counts().pending == 200 - committed
        done_before = {r[0] for r in dump_results(run / "journal.sqlite")}
        eng = HashEngine()
        stats = execute(eng, reqs, j, batch_size=8, progress=False)
        assert stats.executed == 200 - committed and stats.cached == committed
        assert set(eng.executed) == {r.id for r in reqs} - done_before
        assert j.counts().pending == 0
    assert dump_results(run / "journal.sqlite") == _clean_run(tmp_path, reqs)


def test_default_commit_batch_follows_the_engines_call_size(requests_100, journal) -> None:
    """Without batch_size, an engine's ``call_size`` (vLLM: its generate() chunk) sets the calls;
    otherwise 4 engine batches, at least 32."""
    from auditlang.execute import default_batch_size

    plain = HashEngine()
    assert default_batch_size(plain) == 32  # 4 x batch_size 4, raised to 32
    execute(plain, requests_100, journal, progress=False)
    assert plain.batches == [32, 32, 32, 4]
    wide = HashEngine(version="2")
    wide.call_size = 60
    assert default_batch_size(wide) == 60
    execute(wide, requests_100, journal, progress=False)
    assert wide.batches == [60, 40]
    wide.call_size = True  # not a size: ignored
    assert default_batch_size(wide) == 32


def test_streaming_engine_gets_the_whole_stage_and_commits_as_results_arrive(requests_100, tmp_path) -> None:
    """An engine declaring ``streams = True`` (vLLM) gets every request in ONE run call (its
    scheduler stays full); results are committed every batch_size as they stream, so a failure
    after 70 results keeps the 64 committed ones plus the 6 in the buffer, and a rerun executes
    exactly the other 30."""
    from auditlang.execute import default_batch_size

    eng = HashEngine(raise_after=70)
    eng.streams = True
    assert default_batch_size(eng) == 256
    with Journal(tmp_path / "run") as j:
        with pytest.raises(EngineError, match="70/100 requests of this call committed"):
            execute(eng, requests_100, j, batch_size=32, progress=False)
        assert eng.batches == [100]
        assert j.counts().results == 70
        again = HashEngine()
        again.streams = True
        stats = execute(again, requests_100, j, batch_size=32, progress=False)
        assert again.batches == [30] and stats.executed == 30 and stats.cached == 70
    assert dump_results(tmp_path / "run" / "journal.sqlite") == _clean_run(tmp_path, requests_100)


def test_scoring_reads_a_models_newest_fingerprint(tmp_path: Path) -> None:
    """After an engine upgrade a run folder holds two fingerprints of one model; replies of a
    model scored from another unit (judges) come from the newest one, not the first."""
    from auditlang.score.stage import _fp_for

    with Journal(tmp_path / "run") as j:
        old = j.register_engine({"engine": "hash", "version": "1"}, "judge")
        time.sleep(0.01)  # created_at has millisecond resolution
        new = j.register_engine({"engine": "hash", "version": "2"}, "judge")
        j.register_engine({"engine": "hash", "version": "3"}, "other")
        assert old != new
        assert _fp_for(j, "judge") == new
        assert _fp_for(j, "missing") is None
