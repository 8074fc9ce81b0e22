"""The Ray driver's progress: units done/total per model, requests/s and an eta, as plain lines
(one per finished unit, and one every ``interval`` seconds while units run), fit for a terminal
and for a job log alike; and :func:`plain_worker_logs`, which keeps Ray's coloured worker-log
prefixes out of a log file."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from auditlang.store.rundir import JOURNAL


def committed_results(unit_dir: Path) -> int:
    """Results committed in a unit's journal (read-only; 0 when it does not exist yet)."""
    path = Path(unit_dir) / JOURNAL
    if not path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


class DriverProgress:
    """Counts per model; ``line()`` renders the current state."""

    def __init__(self, units_per_model: dict[str, int], stage1_total: int, followup_ratio: float) -> None:
        self.total = dict(units_per_model)
        self.done = {m: 0 for m in units_per_model}
        self.expected = max(1, round(stage1_total * (1 + followup_ratio)))  # an estimate: follow-ups are built at run time
        self.finished_requests = 0  # committed by finished units (executed + cached)
        self.executed = 0
        self.t0 = time.monotonic()

    def unit_done(self, model: str, executed: int, cached: int) -> None:
        self.done[model] = self.done.get(model, 0) + 1
        self.finished_requests += executed + cached
        self.executed += executed

    def line(self, running_requests: int = 0) -> str:
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        units = ", ".join(f"{m} {self.done[m]}/{self.total[m]}" for m in self.total)
        done_units, all_units = sum(self.done.values()), sum(self.total.values())
        done = self.finished_requests + running_requests
        rate = (self.executed + running_requests) / elapsed
        if done_units == all_units:
            eta = "0s"
        elif rate > 0:
            eta = f"~{max(0.0, (self.expected - done) / rate):.0f}s"
        else:
            eta = "unknown"
        return (f"[ray] units {done_units}/{all_units} ({units}); requests ~{done}/{self.expected}; "
                f"{rate:.1f} req/s; elapsed {elapsed:.0f}s; eta {eta}")


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")  # CSI sequences: colours, cursor moves


class _PlainStream:
    """A text stream that drops ANSI escape sequences before writing to the one it wraps."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(_ANSI.sub("", text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _plain(stream: TextIO) -> bool:
    """Whether output to ``stream`` should carry no colour: not a terminal, or NO_COLOR is set."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return not tty or bool(os.environ.get("NO_COLOR"))


@contextlib.contextmanager
def plain_worker_logs() -> Iterator[None]:
    """While the Ray driver runs: the worker log lines Ray forwards to this process (prefixed
    ``(UnitWorker pid=...)`` in colour codes whatever the output is) reach a log file, ``nohup`` or
    CI without escape sequences; a terminal keeps its colours (unless NO_COLOR is set)."""
    saved = sys.stdout, sys.stderr
    if _plain(sys.stdout):
        sys.stdout = _PlainStream(sys.stdout)  # type: ignore[assignment]
    if _plain(sys.stderr):
        sys.stderr = _PlainStream(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
