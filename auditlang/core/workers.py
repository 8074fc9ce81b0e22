"""How many forked worker processes a CPU-bound stage may use (scoring, figure rendering).

Forked workers share the parent's objects without pickling them, so a stage splits its work
into ordered shares and concatenates the results: the output is the same as in one process.
Forking is used only where it is safe and pays: on Linux, with no other Python thread alive in
this process (forking beside running threads can leave a child waiting on a lock forever), and
with enough usable cores. An environment variable per stage overrides the choice (0 or 1: never).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["SCORE_WORKERS_ENV", "fork_map", "fork_workers", "usable_cpus"]

SCORE_WORKERS_ENV = "AUDITLANG_SCORE_WORKERS"  # scoring and cell metrics: N workers (0 or 1: never)


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


def fork_map(fn: Callable[[Any], Any], jobs: list, workers: int) -> list:
    """``[fn(job) for job in jobs]`` over ``workers`` forked processes, in the jobs' order. The
    workers inherit this process's memory (a stage leaves what ``fn`` reads in a module-level
    variable), so only the jobs and the results are pickled."""
    import multiprocessing  # lazy: only when a stage runs in workers

    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(fn, jobs, chunksize=1)


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
