"""vllm_release without vLLM: which shutdown path a client takes, and reaping real processes.

The client objects are stand-ins with vLLM 0.26-0.33's attribute names; the processes are real
(multiprocessing children that ignore nothing: SIGTERM ends them, or one that ignores SIGTERM and
is killed after the wait). The path through a real vLLM client is tests/engines/test_vllm.py's
``test_close_leaves_the_engine_core_exiting_and_the_next_load_reaps_it`` (CI's vLLM venv).
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from types import SimpleNamespace

import pytest

from auditlang.engines import vllm_release


def _sleep_forever(ignore_term: bool) -> None:
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(0.05)


class _Finalizer:
    def __init__(self) -> None:
        self.detached = False

    def detach(self):
        self.detached = True
        return ("shutdown",)


class _Core:
    def __init__(self, manager=None) -> None:
        self.shutdowns = 0
        if manager is not None:
            self.resources = SimpleNamespace(engine_manager=manager)

    def shutdown(self) -> None:
        self.shutdowns += 1


def _llm(core: _Core, world_size: int | None = None):
    engine = SimpleNamespace(engine_core=core)
    if world_size is not None:  # vLLM's vllm_config.parallel_config.world_size (tensor x pipeline parallel)
        engine.vllm_config = SimpleNamespace(parallel_config=SimpleNamespace(world_size=world_size))
    return SimpleNamespace(llm_engine=engine)


@pytest.fixture()
def procs():
    ctx = multiprocessing.get_context("fork")
    started: list = []

    def start(ignore_term: bool = False):
        p = ctx.Process(target=_sleep_forever, args=(ignore_term,), daemon=True)
        p.start()
        started.append(p)
        return p

    yield start
    vllm_release._EXITING.clear()
    for p in started:
        if p.is_alive():
            p.kill()
        p.join(5)


def test_in_process_core_takes_vllms_own_shutdown() -> None:
    core = _Core()  # InprocClient: no resources
    assert vllm_release.release(_llm(core)) == 0
    assert core.shutdowns == 1 and vllm_release._EXITING == []


def test_unknown_client_shape_takes_vllms_own_shutdown(procs) -> None:
    p = procs()
    core = _Core(SimpleNamespace(processes=[p]))  # no _finalizer: a vLLM this module does not know
    assert vllm_release.release(_llm(core)) == 0
    assert core.shutdowns == 1 and vllm_release._EXITING == [] and p.is_alive()


def test_release_signals_detaches_and_reap_joins(procs) -> None:
    p = procs()
    manager = SimpleNamespace(processes=[p], _finalizer=_Finalizer(), manager_stopped=multiprocessing.Event())
    core = _Core(manager)
    assert vllm_release.release(_llm(core)) == 1
    assert core.shutdowns == 1 and manager._finalizer.detached and manager.manager_stopped.is_set()
    assert vllm_release._EXITING == [p]
    assert vllm_release.reap() == 1
    assert p.exitcode == -signal.SIGTERM and vllm_release._EXITING == []
    assert vllm_release.reap() == 0  # nothing left


def test_reap_kills_a_process_that_outlives_the_wait(procs) -> None:
    p = procs(ignore_term=True)
    time.sleep(0.2)  # let it install its SIGTERM handler
    manager = SimpleNamespace(processes=[p], _finalizer=_Finalizer())
    assert vllm_release.release(_llm(_Core(manager))) == 1
    assert vllm_release.reap(wait_s=0.3) == 1
    assert p.exitcode == -signal.SIGKILL


def test_the_registry_reaps_before_loading_an_engine(procs) -> None:
    from auditlang.core.engine import ModelConfig
    from auditlang.engines.registry import load_engine

    p = procs()
    vllm_release.release(_llm(_Core(SimpleNamespace(processes=[p], _finalizer=_Finalizer()))))
    load_engine(ModelConfig(name="d", engine="dryrun", path="x"))
    assert p.exitcode is not None and vllm_release._EXITING == []


def test_release_returns_after_vllms_liveness_monitor_stops(procs) -> None:
    """vLLM's monitor thread polls its stop event every second; release waits for it, so the
    scoring stage that follows finds no other thread and may fork."""
    import threading

    p = procs()
    stopped = threading.Event()

    def watch() -> None:  # like vLLM's: looks at its stop event between 1-second waits
        while not stopped.is_set():
            time.sleep(0.3)

    monitor = threading.Thread(target=watch, daemon=True, name="MPClientEngineMonitor")
    monitor.start()
    manager = SimpleNamespace(processes=[p], _finalizer=_Finalizer(), manager_stopped=stopped)
    assert vllm_release.release(_llm(_Core(manager))) == 1
    assert not monitor.is_alive()


def test_a_failing_client_does_not_stop_the_others(procs) -> None:
    class Broken(_Core):
        def shutdown(self) -> None:
            raise RuntimeError("engine core already gone")

    p = procs()
    ok = _Core(SimpleNamespace(processes=[p], _finalizer=_Finalizer()))
    assert vllm_release.release(_llm(Broken()), _llm(ok)) == 1
    assert ok.shutdowns == 1 and vllm_release._EXITING == [p]


def test_a_core_without_workers_is_killed_after_the_client_side_is_down(procs) -> None:
    """World size 1: the client shuts down first (so vLLM's monitor, woken by the exit, finds its
    client closed and stays silent), then the core gets SIGKILL: it is gone at once, so the
    monitor, which waits on the process, ends at once, and the next engine's GPU memory is free."""
    import threading
    from multiprocessing import connection

    p = procs(ignore_term=True)  # SIGTERM would not end it: only a kill does
    time.sleep(0.2)
    seen = {}

    class Core(_Core):
        def shutdown(self) -> None:
            seen["alive at client shutdown"] = p.is_alive()
            super().shutdown()

    def watch() -> None:  # vLLM's monitor, its stop event left out: only the process's exit ends it
        while not connection.wait([p.sentinel], timeout=1):
            pass
        seen["woken by the exit"] = True

    monitor = threading.Thread(target=watch, daemon=True, name="MPClientEngineMonitor")
    monitor.start()
    manager = SimpleNamespace(processes=[p], _finalizer=_Finalizer(), manager_stopped=threading.Event())
    core = Core(manager)
    assert vllm_release.release(_llm(core, world_size=1)) == 1
    assert not monitor.is_alive() and seen == {"alive at client shutdown": True, "woken by the exit": True}
    assert core.shutdowns == 1 and vllm_release._EXITING == [p]
    assert vllm_release.reap(wait_s=5) == 1 and p.exitcode == -signal.SIGKILL


def test_a_core_with_worker_processes_gets_sigterm_to_stop_them_itself(procs) -> None:
    p = procs()
    manager = SimpleNamespace(processes=[p], _finalizer=_Finalizer(), manager_stopped=multiprocessing.Event())
    assert vllm_release.release(_llm(_Core(manager), world_size=2)) == 1
    assert vllm_release.reap() == 1 and p.exitcode == -signal.SIGTERM
