"""``execute(followups=...)``: follow-ups built from results handed to the journal run in the same
call; a streaming engine takes them from its feed while it still serves the others (issue 22: no
stage barrier), any other engine runs them in further calls. The call's writes go to disk in order
(auditlang/execute/writer.py), so a follow-up's row is never on disk before the result it was built
from, and a kill loses nothing a rerun cannot rebuild."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from store_fake_engine import HashEngine, dump_results

from auditlang.core.engine import EngineError, Feed
from auditlang.core.requests import Prompt, Request, Result
from auditlang.execute import execute
from auditlang.store import Journal


class FeedEngine(HashEngine):
    """Takes requests from its feed two at a time, as vLLM's stream does, and refills when idle."""

    streams = True

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.taken: list[str] = []
        self.done_at_take: list[int] = []  # requests finished when each later batch was taken

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        feed = requests if isinstance(requests, Feed) else Feed(requests)
        self.batches.append(0)
        queue: list[Request] = []
        while True:
            new = feed.take()
            if new and self.taken:
                self.done_at_take.append(len(self.executed))
            self.taken += [r.id for r in new]
            queue += new
            if not queue:
                if feed.refill():
                    continue
                return
            step, queue = queue[:2], queue[2:]
            self.batches[-1] += len(step)
            yield from HashEngine.run(self, step)
            self.batches.pop()  # HashEngine.run counted the step as a call of its own


def _verbal(res: Result) -> Request:
    return Request.make("fake", "generate", Prompt(text=f"How confident are you in {res.samples[0].text}?"), max_tokens=4)


class Builder:
    """Follow-ups of generate answers; :meth:`check`: every result it was given is on disk once
    ``execute`` returned."""

    def __init__(self, journal: Journal) -> None:
        self.journal, self.calls, self.built, self.parents = journal, [], set(), []

    def __call__(self, results: list[Result]) -> list[Request]:
        self.parents += [r.request_id for r in results]
        self.calls.append(len(results))
        out = [_verbal(r) for r in results if r.kind == "generate" and r.error is None and r.request_id not in self.built]
        self.built.update(r.id for r in out)  # a follow-up has none of its own
        return out

    def check(self) -> None:
        fps = list(self.journal.fingerprints())
        ids = list(dict.fromkeys(self.parents))
        assert ids and any(len(self.journal.committed(ids, fp)) == len(ids) for fp in fps), "a parent not committed"


def _clean(tmp_path: Path, reqs: list[Request]) -> list[tuple]:
    with Journal(tmp_path / "clean") as j:
        execute(HashEngine(), reqs, j, batch_size=7, progress=False, followups=Builder(j))
    return dump_results(tmp_path / "clean" / "journal.sqlite")


def test_streaming_engine_takes_followups_while_it_serves_the_rest(requests_100, tmp_path) -> None:
    eng = FeedEngine()
    with Journal(tmp_path / "run") as j:
        build = Builder(j)
        stats = execute(eng, requests_100, j, batch_size=8, progress=False, followups=build)
        build.check()
    assert len(eng.batches) == 1 and eng.batches[0] == 150  # one run call: 100 + 50 follow-ups
    assert (stats.requested, stats.executed, stats.cached, stats.errors) == (150, 150, 0, 0)
    first_followup = next(i for i, rid in enumerate(eng.taken) if rid not in {r.id for r in requests_100})
    assert first_followup == 100 and len(build.calls) > 5  # taken after the first commit, not at the end
    # requests run in kind order (50 choice_logprobs, then the 50 answers): the follow-ups of the
    # first answers reached the engine with the first commit of answers, while it served the rest
    assert eng.done_at_take[0] <= 50 + 8
    assert dump_results(tmp_path / "run" / "journal.sqlite") == _clean(tmp_path, requests_100)


def test_other_engines_run_followups_in_further_calls(requests_100, tmp_path) -> None:
    eng = HashEngine()
    with Journal(tmp_path / "run") as j:
        build = Builder(j)
        stats = execute(eng, requests_100, j, batch_size=40, progress=False, followups=build)
        build.check()
        assert stats.executed == 150
        again = HashEngine()
        assert execute(again, requests_100, j, batch_size=40, progress=False, followups=Builder(j)).executed == 0
    assert sum(eng.batches) == 150 and eng.batches[:3] == [40, 40, 20]
    assert dump_results(tmp_path / "run" / "journal.sqlite") == _clean(tmp_path, requests_100)


def test_a_failure_midway_keeps_what_was_committed_and_a_rerun_builds_the_rest(requests_100, tmp_path) -> None:
    with Journal(tmp_path / "run") as j:
        with pytest.raises(EngineError, match="70/1[0-9][0-9] requests of this call committed"):
            execute(FeedEngine(raise_after=70), requests_100, j, batch_size=16, progress=False, followups=Builder(j))
        assert j.counts().results == 70
        again = FeedEngine()
        stats = execute(again, requests_100, j, batch_size=16, progress=False, followups=Builder(j))
        assert stats.executed == 80 and stats.cached == 70  # follow-ups of stored answers built from the journal
    assert dump_results(tmp_path / "run" / "journal.sqlite") == _clean(tmp_path, requests_100)


def test_failed_answers_get_no_followup_and_are_retried_with_theirs(requests_100, tmp_path) -> None:
    bad = [r.id for r in requests_100 if r.kind == "generate"][:3]
    with Journal(tmp_path / "run") as j:
        stats = execute(FeedEngine(fail_ids=bad), requests_100, j, batch_size=16, progress=False, followups=Builder(j))
        assert (stats.executed, stats.errors) == (147, 3)
        stats = execute(FeedEngine(), requests_100, j, batch_size=16, progress=False, followups=Builder(j),
                        retry_errors=True)
        assert (stats.executed, stats.errors) == (6, 0)  # the 3 answers, then their follow-ups
    assert dump_results(tmp_path / "run" / "journal.sqlite") == _clean(tmp_path, requests_100)


def test_progress_counts_the_followups_as_they_join(requests_100, tmp_path) -> None:
    import io

    from rich.console import Console

    buf = io.StringIO()
    with Journal(tmp_path / "run") as j:
        execute(FeedEngine(), requests_100, j, batch_size=16, progress="plain", followups=Builder(j),
                console=Console(file=buf, width=200), description="m stages 1+2")
    text = buf.getvalue()
    assert "[m stages 1+2] 100 requests to run, and the follow-ups of their answers as they are committed" in text
    assert "[m stages 1+2] done: 150/150 requests" in text


def test_kill_9_while_followups_stream_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    """Issue 22 item 2 with stage 2 in the stream: a ``kill -9`` loses only uncommitted results
    (whole commit batches stay), and the rerun builds the follow-ups of the stored answers and
    runs exactly what is missing."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from store_fake_engine import arc_requests

    worker = Path(__file__).resolve().parent / "store_worker.py"
    run, reqs = tmp_path / "killed", arc_requests(100)  # 200 requests + 100 follow-ups
    proc = subprocess.Popen([sys.executable, str(worker), str(run), "100", "0.01", "8", "-", "230", "followups"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _results(run) < 120:  # past the first answers' follow-ups
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "worker made no progress"
        time.sleep(0.02)
    time.sleep(0.037)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    committed = _results(run)
    assert 120 <= committed <= 224 and committed % 8 == 0  # whole commit batches only
    with Journal(run) as j:
        assert j._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        again = FeedEngine()
        stats = execute(again, reqs, j, batch_size=8, progress=False, followups=Builder(j))
        assert stats.executed == 300 - committed and stats.cached == committed
    assert dump_results(run / "journal.sqlite") == _clean(tmp_path, reqs)


def _results(run: Path) -> int:
    import sqlite3

    if not (run / "journal.sqlite").exists():
        return 0
    db = sqlite3.connect(run / "journal.sqlite")
    try:
        return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # the worker is still creating the schema
        return 0
    finally:
        db.close()
