"""core/workers.py: when a CPU-bound stage (scoring, cell metrics, figures) forks worker processes."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from auditlang.core import workers

ENV = "AUDITLANG_TEST_WORKERS"
linux = pytest.mark.skipif(sys.platform != "linux", reason="workers fork only on Linux")


@pytest.fixture(autouse=True)
def own_threads(monkeypatch) -> list[threading.Thread]:
    """Earlier tests in this process (Ray's, for one) leave threads running and start new ones:
    the stage sees the main thread, tqdm's monitor when alive, and the threads this test starts
    (appended to the list this fixture returns), as a fresh `auditc` process would."""
    started: list[threading.Thread] = []

    def count() -> int:
        monitor_cls = getattr(sys.modules.get("tqdm._monitor"), "TMonitor", None)
        monitors = [t for t in threading.enumerate() if monitor_cls is not None and isinstance(t, monitor_cls)]
        return 1 + sum(t.is_alive() for t in monitors) + sum(t.is_alive() for t in started)

    monkeypatch.setattr(workers.threading, "active_count", count)
    return started


@linux
def test_forced_count_is_capped_by_the_jobs(monkeypatch) -> None:
    monkeypatch.setenv(ENV, "3")
    assert workers.fork_workers(ENV, 5, min_cpus=64, cap=8) == 3
    assert workers.fork_workers(ENV, 2, min_cpus=64, cap=8) == 2
    assert workers.fork_workers(ENV, 1, min_cpus=64, cap=8) == 1
    monkeypatch.setenv(ENV, "1")
    assert workers.fork_workers(ENV, 5, min_cpus=1, cap=8) == 1


@linux
def test_default_needs_cores_and_work(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(workers, "usable_cpus", lambda: 16)
    assert workers.fork_workers(ENV, 100, min_cpus=6, cap=8) == 8
    assert workers.fork_workers(ENV, 100, min_cpus=6, cap=8, enough_work=False) == 1
    monkeypatch.setattr(workers, "usable_cpus", lambda: 4)
    assert workers.fork_workers(ENV, 100, min_cpus=6, cap=8) == 1


@linux
def test_a_live_thread_keeps_the_stage_in_this_process(monkeypatch, own_threads) -> None:
    monkeypatch.setenv(ENV, "3")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="someone-elses")
    own_threads.append(t)
    t.start()
    try:
        assert workers.fork_workers(ENV, 5, min_cpus=1, cap=8) == 1
    finally:
        stop.set()
        t.join()
    assert workers.fork_workers(ENV, 5, min_cpus=1, cap=8) == 3


@linux
@pytest.mark.parametrize("bar", ["tqdm.std", "tqdm.auto"])
def test_tqdm_monitor_left_by_a_progress_bar_does_not_block_forking(monkeypatch, bar: str) -> None:
    """transformers' "Loading weights" bar (a ``tqdm.auto`` class: its monitor lives on that
    subclass, not on ``tqdm.std.tqdm``) leaves tqdm's monitor thread running (seen on the H200 runs
    of the hf engine: scoring stayed serial); it is stopped, and tqdm restarts it later."""
    pytest.importorskip("tqdm")
    import importlib

    cls = importlib.import_module(bar).tqdm
    monkeypatch.setenv(ENV, "3")
    monkeypatch.setattr(cls, "monitor_interval", 10)
    with open(os.devnull, "w") as sink:
        for _ in cls(range(3), file=sink):
            pass
    assert cls.monitor is not None and cls.monitor.is_alive()
    assert workers.fork_workers(ENV, 5, min_cpus=1, cap=8) == 3
    assert not cls.monitor.is_alive()


@linux
def test_every_forking_stage_reads_its_thresholds_from_the_one_table(monkeypatch) -> None:
    """Scoring, cell metrics and figures name their stage; ``STAGES`` holds the thresholds (issue 37)."""
    import inspect

    from auditlang.report import figures
    from auditlang.score import cellmetrics, stage

    for mod in (figures, cellmetrics, stage):  # no caller states a threshold of its own
        src = inspect.getsource(mod)
        assert "fork_workers(" not in src and "stage_workers(" in src, mod.__name__
    for rule in workers.STAGES.values():
        monkeypatch.delenv(rule.env, raising=False)
    monkeypatch.setattr(workers, "usable_cpus", lambda: 16)
    for name, rule in workers.STAGES.items():
        assert workers.stage_workers(name, rule.min_jobs, rows=rule.min_rows) == min(rule.cap, rule.min_jobs), name
        if rule.min_rows:
            assert workers.stage_workers(name, rule.min_jobs, rows=rule.min_rows - 1) == 1, name
    monkeypatch.setattr(workers, "usable_cpus", lambda: min(r.min_cpus for r in workers.STAGES.values()) - 1)
    assert all(workers.stage_workers(name, 100, rows=10**9) == 1 for name in workers.STAGES)


def _job(x: int) -> tuple[int, int, int]:
    """(x squared, this worker's pid, how many objects its collector tracks outside the frozen generation)."""
    import gc

    with open(os.environ[ENV + "_LOG"], "a", encoding="utf-8") as f:
        f.write(f"{x}\n")
    return x * x, os.getpid(), gc.get_freeze_count()


@linux
def test_fork_map_hands_out_the_heaviest_jobs_first_and_returns_them_in_order(tmp_path, monkeypatch) -> None:
    import gc

    log = tmp_path / "order.txt"
    monkeypatch.setenv(ENV + "_LOG", str(log))
    jobs = [1, 2, 3, 4, 5]
    out = workers.fork_map(_job, jobs, 1, weights=[1, 5, 2, 9, 3])
    assert [r[0] for r in out] == [1, 4, 9, 16, 25]  # the jobs' order
    assert log.read_text().split() == ["4", "2", "5", "3", "1"]  # one worker takes them heaviest first
    assert all(r[2] > 0 for r in out)  # the children inherited this process's objects frozen
    assert gc.get_freeze_count() == 0  # and this process has them back
    log.unlink()
    assert [r[0] for r in workers.fork_map(_job, jobs, 2)] == [1, 4, 9, 16, 25]
    assert sorted(log.read_text().split()) == list("12345")  # without weights: each job once
