"""The executor's journal writer (auditlang/execute/writer.py): every write of a call in order on a
thread of its own connection, on disk when ``drain`` returns; a failure is raised to the caller at
its next write or drain, and nothing after it is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_fake_engine import HashEngine

from auditlang.core.requests import Prompt, Request
from auditlang.execute import execute
from auditlang.execute.writer import Writer
from auditlang.store import Journal


def _reqs(n: int) -> list[Request]:
    return [Request.make("fake", "generate", Prompt(text=f"question {i}"), max_tokens=4) for i in range(n)]


def _results(reqs: list[Request]):
    return list(HashEngine().run(reqs))


def test_writes_land_in_order_and_are_on_disk_after_drain(tmp_path: Path) -> None:
    reqs = _reqs(30)
    with Journal(tmp_path) as j:
        fp = j.register_engine({"engine": "fake"}, "fake")
        w = Writer(j)
        for i in range(0, 30, 10):
            w.put("journal", "put_requests", reqs[i:i + 10], fp)
            w.put("journal", "put_results", _results(reqs[i:i + 10]), fp)
        w.drain()
        with Journal(tmp_path) as other:  # another connection sees every row
            assert other.counts(fp).results == 30 and other.counts(fp).pending == 0
        w.close()


def test_a_failed_write_is_raised_to_the_caller_and_stops_later_writes(tmp_path: Path) -> None:
    reqs = _reqs(20)
    with Journal(tmp_path) as j:
        fp = j.register_engine({"engine": "fake"}, "fake")
        w = Writer(j)
        w.put("journal", "put_results", _results(reqs[:10]), fp)
        w.put("journal", "put_results", _results(reqs[10:15]), "no-such-fingerprint")  # raises in the thread
        try:  # queued behind the failure, or refused when the thread failed already
            w.put("journal", "put_results", _results(reqs[15:]), fp)
        except ValueError:
            pass
        with pytest.raises(ValueError, match="unknown engine fingerprint"):
            w.drain()
        with pytest.raises(ValueError, match="unknown engine fingerprint"):
            w.put("journal", "put_results", _results(reqs[15:]), fp)
        with pytest.raises(ValueError):
            w.close()
        assert j.counts(fp).results == 10  # the write before the failure only


def test_a_journal_that_cannot_be_reopened_fails_before_any_work(tmp_path: Path) -> None:
    class Broken:
        def reopen(self):
            raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        Writer(Broken())


def test_execute_returns_with_every_result_on_disk(tmp_path: Path) -> None:
    reqs = _reqs(50)
    with Journal(tmp_path) as j:
        stats = execute(HashEngine(), reqs, j, batch_size=7, progress=False)
        with Journal(tmp_path) as other:
            assert other.counts().results == stats.executed == 50
