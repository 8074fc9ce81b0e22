"""How many forked worker processes a CPU-bound stage may use (scoring, figure rendering).

Forked workers share the parent's objects without pickling them, so a stage splits its work
into ordered shares and concatenates the results: the output is the same as in one process.
Forking is used only where it is safe and pays: on Linux, with no other Python thread alive in
this process (forking beside running threads can leave a child waiting on a lock forever), and
with enough usable cores. An environment variable per stage overrides the choice (0 or 1: never).
``fork_map_async`` forks the same workers but lets this process go on while they work (the
report's figures render while its tables are built); until its results are collected the pool's
threads are alive, so ``fork_workers`` answers 1 to any other stage meanwhile: nothing else forks.
``fork_call`` runs one function in one forked child beside this process (the report's sample
browser); the child starts no thread here, so a pool may still fork after it.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FIGURE_WORKERS_ENV", "SAMPLES_FORK_ENV", "SCORE_WORKERS_ENV", "STAGES", "AsyncMap", "ForkedCall", "StageRule",
           "fork_call", "fork_map", "fork_map_async", "fork_side", "fork_workers", "stage_workers", "usable_cpus"]

SCORE_WORKERS_ENV = "AUDITLANG_SCORE_WORKERS"  # scoring and cell metrics: N workers (0 or 1: never)
FIGURE_WORKERS_ENV = "AUDITLANG_FIGURE_WORKERS"  # figures: N workers (0 or 1: never)
SAMPLES_FORK_ENV = "AUDITLANG_SAMPLES_FORK"  # the sample browser beside the report: 1 always, 0 never


@dataclass(frozen=True)
class StageRule:
    """When one stage forks, unless ``env`` names a number: ``min_cpus`` usable cores, at least
    ``min_jobs`` shares and ``min_rows`` rows of work; at most ``cap`` workers."""

    env: str
    min_cpus: int
    cap: int = 8
    min_jobs: int = 2
    min_rows: int = 0


# the thresholds of every stage that forks, said once (the callers name their stage)
STAGES: dict[str, StageRule] = {
    # score/stage.py: records. 5,000 rows: serial scoring of the 8 B/100-item s000 run (~10k rows) took
    # 2.6 s on the 16-core H100 host, the forked 1 B/200 run (~21k rows) 1.1 s (results/issue36/session30 n8, n1 .json)
    "score": StageRule(SCORE_WORKERS_ENV, min_cpus=6, min_rows=5_000),
    "cell_metrics": StageRule(SCORE_WORKERS_ENV, min_cpus=6, min_jobs=16, min_rows=20_000),  # bootstrap per cell
    "figures": StageRule(FIGURE_WORKERS_ENV, min_cpus=4),  # report/figures.py
    "samples": StageRule(SAMPLES_FORK_ENV, min_cpus=4, cap=1, min_jobs=1),  # report/samples.py, one side process
}


def stage_workers(stage: str, jobs: int, *, rows: int = 0, enough_work: bool = True) -> int:
    """:func:`fork_workers` under ``STAGES[stage]``: ``jobs`` shares, ``rows`` rows of work in all."""
    r = STAGES[stage]
    enough = enough_work and jobs >= r.min_jobs and rows >= r.min_rows
    return fork_workers(r.env, jobs, min_cpus=r.min_cpus, cap=r.cap, enough_work=enough)


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def fork_workers(env: str, jobs: int, *, min_cpus: int, cap: int, enough_work: bool = True) -> int:
    """Workers for ``jobs`` independent shares: 1 (stay in this process) unless the host has
    ``min_cpus`` usable cores and ``enough_work``, or ``$env`` names a number."""
    forced = os.environ.get(env, "").strip()
    if forced:
        try:
            n = int(forced)
        except ValueError:
            n = 1
    else:
        cpus = usable_cpus()
        if cpus < min_cpus or not enough_work:
            return 1
        n = min(cap, cpus - 1)
    if n <= 1 or jobs < 2 or sys.platform != "linux":
        return 1
    _stop_tqdm_monitor()
    if threading.active_count() > 1:
        return 1
    return min(n, jobs)


def fork_map(fn: Callable[[Any], Any], jobs: list, workers: int, weights: list[float] | None = None) -> list:
    """``[fn(job) for job in jobs]`` over ``workers`` forked processes, in the jobs' order. The
    workers inherit this process's memory (a stage leaves what ``fn`` reads in a module-level
    variable), so only the jobs and the results are pickled. ``weights`` (one per job, e.g. its
    rows): the jobs are handed out heaviest first (a free worker takes the next), which shortens
    the longest worker's run; the results still come back in the jobs' order."""
    import multiprocessing  # lazy: only when a stage runs in workers

    order = sorted(range(len(jobs)), key=lambda i: -weights[i]) if weights is not None else list(range(len(jobs)))
    with _frozen():
        pool = multiprocessing.get_context("fork").Pool(workers)  # forks every worker now
    with pool:
        done = pool.map(fn, [jobs[i] for i in order], chunksize=1)
    out: list = [None] * len(jobs)
    for i, r in zip(order, done, strict=True):
        out[i] = r
    return out


class _frozen:
    """Around a fork: this process's objects moved to the garbage collector's permanent
    generation (``gc.freeze``), so a child's collections never walk (and so never copy, page by
    page) the parent's heap it inherited; moved back in this process afterwards."""

    def __enter__(self) -> None:
        gc.freeze()

    def __exit__(self, *exc: object) -> None:
        gc.unfreeze()


class AsyncMap:
    """The pending results of :func:`fork_map_async`."""

    def __init__(self, pool: Any, result: Any) -> None:
        self._pool, self._result = pool, result

    def get(self) -> list:
        """``[fn(job) for job in jobs]``, waiting for the workers (a worker's exception is raised
        here); the workers and the pool's threads are gone when it returns."""
        try:
            return self._result.get()
        finally:
            self.close()

    def close(self) -> None:
        """Stop the workers without waiting for their results (nothing when already stopped)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()  # joins the pool's threads
            pool.join()


def fork_map_async(fn: Callable[[Any], Any], jobs: list, workers: int) -> AsyncMap:
    """:func:`fork_map` that returns at once: the workers are forked now (multiprocessing forks a
    pool's processes before it starts its threads), inherit this process's memory as it is now, and
    work while this process goes on; ``get()`` collects the results in the jobs' order. Call it
    where :func:`fork_workers` said more than 1 (no other thread alive), and ``get()`` or
    ``close()`` the result on every path: until then the pool's threads are alive (so no other
    stage forks: ``fork_workers`` says 1) and so are the workers."""
    import multiprocessing  # lazy: only when a stage runs in workers

    with _frozen():
        pool = multiprocessing.get_context("fork").Pool(workers)
    try:
        return AsyncMap(pool, pool.map_async(fn, jobs, chunksize=1))
    except BaseException:
        pool.terminate()
        pool.join()
        raise


def fork_side(stage: str) -> bool:
    """Whether ``STAGES[stage]``'s one job runs in a forked child beside this process: ``$env``
    is 1 (0: never), or unset and the host has the rule's usable cores; on Linux only, and only
    with no other Python thread alive."""
    r = STAGES[stage]
    forced = os.environ.get(r.env, "").strip()
    if forced:
        ok = forced == "1"
    else:
        ok = usable_cpus() >= r.min_cpus
    if not ok or sys.platform != "linux":
        return False
    _stop_tqdm_monitor()
    return threading.active_count() == 1


class ForkedCall:
    """The pending end of :func:`fork_call`: ``wait()`` once, or ``close()`` (on every path)."""

    def __init__(self, pid: int, fd: int) -> None:
        self._pid, self._fd = pid, fd

    def wait(self) -> str | None:
        """Wait for the child; None when ``fn`` returned, else what went wrong (its traceback, or
        how the child ended). The child is reaped when it returns."""
        chunks = []
        try:
            while chunk := os.read(self._fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(self._fd)
            pid, self._pid = self._pid, 0
            _, status = os.waitpid(pid, 0)
        text = b"".join(chunks).decode("utf-8", "replace")
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and not text:
            return None
        if os.WIFSIGNALED(status):
            return text or f"the child process was ended by signal {os.WTERMSIG(status)}"
        return text or f"the child process exited with status {os.waitstatus_to_exitcode(status)}"

    def close(self) -> None:
        """Stop the child without waiting for its work (nothing when already reaped)."""
        pid, self._pid = self._pid, 0
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # pragma: no cover - it exited and was reaped elsewhere
                pass
            os.waitpid(pid, 0)
            os.close(self._fd)


def fork_call(fn: Callable[..., Any], *args: Any) -> ForkedCall:
    """``fn(*args)`` in one forked child that works while this process goes on (its return value
    is dropped: ``fn`` writes files). Call it where :func:`fork_side` said True. The child ends
    with ``os._exit`` (no exit handlers, no buffered output of this process written twice); an
    exception in it comes back as text through a pipe."""
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    gc.freeze()  # as _frozen, but only this process unfreezes
    pid = os.fork()
    if pid != 0:
        gc.unfreeze()
    if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
        code = 0
        try:
            os.close(r)
            try:
                fn(*args)
                msg = b""
            except BaseException:  # noqa: BLE001 - every failure goes back to the parent as text
                msg, code = traceback.format_exc().encode("utf-8", "replace"), 1
            view = memoryview(msg)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(code)
    os.close(w)
    return ForkedCall(pid, r)


def _stop_tqdm_monitor() -> None:
    """Stop tqdm's monitor threads, which the first progress bar of each tqdm class starts and
    leaves running (transformers' "Loading weights" bar, a ``tqdm.auto`` subclass whose monitor
    lives on the subclass, does): a monitor only adjusts how often a slow bar redraws, tqdm
    starts a new one with the next bar, and left alive it would keep every stage from forking.
    Nothing when tqdm was never imported."""
    monitor_cls = getattr(sys.modules.get("tqdm._monitor"), "TMonitor", None)
    if monitor_cls is None:
        return
    for t in threading.enumerate():
        if isinstance(t, monitor_cls):
            try:
                t.exit()  # sets its stop event and joins it (it wakes at once)
            except Exception:  # noqa: BLE001 - best effort: a live thread only keeps the stage in this process
                pass
