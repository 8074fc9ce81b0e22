"""The journal writes of one :func:`~auditlang.execute.executor.execute` call, on a thread of their own.

A commit (encode the results, one SQLite transaction, the WAL's fsync) took 5.3 s in 64 calls of
a 16,000-request stream on an H200 host, time in which the engine was not handed the follow-ups of
the answers it had just given. :class:`Writer` runs every write of the call (the requests recorded
before they run, the results, the response cache's copies) in order on one thread, with its own
connections to the journal and the cache (:meth:`Journal.reopen`), so the caller goes back to the
engine at once; the fsync releases the GIL. Reads stay on the caller's connection: nothing the
call reads is a row still queued (follow-ups are built from results in memory; a request's result
is never read before the request ran).

At most ``depth`` writes wait behind the one being written (the caller blocks on a full queue), so a
``kill -9`` loses at most those and the results not yet handed over: a rerun executes them again.
:meth:`Writer.drain` returns once every write handed over is on disk and re-raises the first
failure of the thread (a locked or full disk); after a failure nothing more is written.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

__all__ = ["Writer"]

_STOP = object()


class Writer:
    """Ordered writes on one thread: ``put(which, method, *args, **kw)`` calls
    ``getattr(<that thread's connection to which>, method)(*args, **kw)``; ``which`` is
    ``"journal"`` or ``"cache"``."""

    def __init__(self, journal: Any, cache: Any | None = None, *, depth: int = 4) -> None:
        self._sources = {"journal": journal, "cache": cache}
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="auditlang-journal-writer", daemon=True)
        self._opened = threading.Event()
        self._thread.start()
        self._opened.wait()
        self._raise()  # a journal that cannot be reopened fails here, before any work runs

    def put(self, which: str, method: str, *args: Any, **kw: Any) -> None:
        """Queue one write (blocks while ``depth`` writes wait); raises the thread's failure, if any."""
        self._raise()
        self._queue.put((which, method, args, kw))

    def drain(self) -> None:
        """Wait until every queued write is done; raises the thread's first failure."""
        if self._thread.is_alive():
            done = threading.Event()
            self._queue.put(done)
            while not done.wait(0.2) and self._thread.is_alive():
                pass
        self._raise()

    def close(self) -> None:
        """Drain, then stop the thread and close its connections (also after a failure)."""
        try:
            self.drain()
        finally:
            if self._thread.is_alive():
                self._queue.put(_STOP)
                self._thread.join()

    @property
    def failed(self) -> BaseException | None:
        return self._error

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _loop(self) -> None:
        conns: dict[str, Any] = {}
        try:
            try:
                for name, src in self._sources.items():
                    if src is not None:
                        conns[name] = src.reopen()
            except BaseException as e:  # noqa: BLE001 - handed to the caller, which raises it at once
                self._error = e
                return
            finally:
                self._opened.set()
            while True:
                item = self._queue.get()
                if item is _STOP:
                    return
                if isinstance(item, threading.Event):
                    item.set()
                elif self._error is None:  # after a failure nothing more is written
                    which, method, args, kw = item
                    try:
                        getattr(conns[which], method)(*args, **kw)
                    except BaseException as e:  # noqa: BLE001 - handed to the caller
                        self._error = e
        finally:
            for c in conns.values():
                c.close()
