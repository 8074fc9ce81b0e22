"""Closing a vLLM engine without waiting for its engine-core process to exit.

vLLM's own shutdown (``engine_core.shutdown()``) sends the engine-core process SIGTERM and then
waits for it (up to ``VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS``, 5 s, then SIGKILL). The process
takes that long to tear down (5.2 s on the CPU build; about 4 s on an H200), and nothing the run
does next needs it gone: scoring and the report read the store, and every answer was received.
So :func:`release` shuts the client side down at once (its sockets and output thread), ends the
process and does not wait for it; vLLM's liveness monitor thread sees the stop and is waited for,
so a stage may fork workers. An engine core with no processes of its own (world size 1: the model
runs in the core itself) is sent SIGKILL, after the client side is down: it is gone in
milliseconds, which wakes vLLM's monitor at once (it waits on the process, else polls its stop
event once a second) and gives the GPU memory back before the next engine loads; a core with
worker processes (tensor or pipeline parallel) gets SIGTERM, so it stops its workers itself. :func:`reap` waits for the processes, with vLLM's own limit and
SIGKILL after it, before the next engine loads (it needs the GPU memory back:
``registry.load_engine`` and ``VLLMEngine`` call it) and at interpreter exit.

Only vLLM clients that expose ``resources.engine_manager.processes`` (read in 0.26 and 0.32)
take this path; for any other shape, or an in-process engine core, :func:`release` is vLLM's
own blocking shutdown. Importing this module does not import vLLM.
"""

from __future__ import annotations

import atexit
import threading
import time
from typing import Any

__all__ = ["reap", "release"]

_EXITING: list[Any] = []  # engine-core processes signalled and not yet reaped
_REGISTERED = False
DEFAULT_WAIT_S = 5.0  # vLLM's VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS default
MONITOR_THREADS = frozenset({"MPClientEngineMonitor"})  # the engine-core liveness monitor (vLLM 0.26, 0.32)
MONITOR_WAIT_S = 2.0  # it checks its stop event once a second


def release(*llms: Any) -> int:
    """Shut down each ``llm``'s engine core; the number of engine cores left to exit (reaped
    later by :func:`reap`); the others took vLLM's own blocking shutdown. Returns once vLLM's
    liveness-monitor threads have ended (a killed core's exit wakes them at once; else they see
    the stop at their next 1-second poll), so a stage that follows may fork workers."""
    deferred = 0
    for llm in llms:
        try:
            deferred += _release_one(llm)
        except Exception:  # noqa: BLE001 - best effort; the process may be gone already
            pass
    if deferred:
        for t in threading.enumerate():
            if t.name in MONITOR_THREADS and t is not threading.current_thread():
                t.join(MONITOR_WAIT_S)
    return deferred


def _release_one(llm: Any) -> bool:
    core = llm.llm_engine.engine_core
    manager = getattr(getattr(core, "resources", None), "engine_manager", None)
    procs = list(getattr(manager, "processes", None) or ())
    finalizer = getattr(manager, "_finalizer", None)
    if not procs or finalizer is None or not hasattr(finalizer, "detach"):
        core.shutdown()  # in-process core, or a vLLM this module does not know: vLLM's own path
        return False
    kill = _world_size(llm) == 1  # no worker process of the core's own to stop
    if not kill:
        for p in procs:
            if p.is_alive():
                p.terminate()
    finalizer.detach()  # the client's shutdown below must not wait for the processes
    stopped = getattr(manager, "manager_stopped", None)
    if stopped is not None:
        stopped.set()  # vLLM's liveness monitor: an exit now is expected, not a failure
    _remember(procs)
    try:
        core.shutdown()  # client side: sockets, output thread; its finalizer dead, the monitor stays silent
    finally:
        if kill:
            for p in procs:
                if p.is_alive():
                    p.kill()
    return True


def _world_size(llm: Any) -> int | None:
    """The engine core's tensor x pipeline parallel size (None when this vLLM does not say)."""
    try:
        size = llm.llm_engine.vllm_config.parallel_config.world_size
    except AttributeError:
        return None
    return size if isinstance(size, int) else None


def reap(wait_s: float = DEFAULT_WAIT_S) -> int:
    """Wait for every released engine-core process to exit (SIGKILL after ``wait_s``); the
    number of processes reaped."""
    procs, _EXITING[:] = list(_EXITING), []
    running = [p for p in procs if p.is_alive()]
    deadline = time.monotonic() + wait_s
    for p in running:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in running:
        if p.is_alive():
            p.kill()
            p.join(wait_s)
    return len(procs)


def _remember(procs: list[Any]) -> None:
    global _REGISTERED
    _EXITING.extend(procs)
    if not _REGISTERED:
        atexit.register(reap)
        _REGISTERED = True
