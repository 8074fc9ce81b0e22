"""Progress of request execution: a rich bar, plain log lines, or nothing.

Counts advance as results stream from the engine and, for engines that report it, after each
*engine* batch or finished request inside a commit batch (the engine protocol's optional
``progress_hook``, core/engine.py ``ProgressHook``: the engine calls ``report_progress`` with the
requests' worth of work it just finished; the hf engine does per scoring forward batch and per
finished generation), so the display moves long before a commit batch of 64+ requests lands.

Rates are honest: requests done divided by the seconds since execution started (no short
window that turns one burst of 64 results into "80,000 req/s"); the eta is what is left at that
rate. ``display``: ``rich`` (a bar; only on a terminal), ``plain`` (one line when a phase starts,
then a line every ``interval`` seconds and one at the end, for logs, ``nohup``, CI and cluster
jobs), ``none``, or ``auto`` (rich on a terminal, else plain).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TaskID, TextColumn
from rich.text import Text

from auditlang.core.terminal import visible

__all__ = ["DISPLAYS", "ExecProgress", "fmt_duration", "resolve_display"]

DISPLAYS = ("auto", "rich", "plain", "none")
DEFAULT_INTERVAL = 10.0  # seconds between plain lines ($AUDITLANG_PROGRESS_INTERVAL)


def resolve_display(display: str | bool, console: Console) -> str:
    """``auto``/True -> rich on a terminal, plain otherwise; False -> none."""
    if display is True or display == "auto":
        return "rich" if console.is_terminal else "plain"
    if display is False or display is None:
        return "none"
    if display not in DISPLAYS:
        raise ValueError(f"display must be one of {DISPLAYS}, got {display!r}")
    if display == "rich" and not console.is_terminal:
        return "plain"
    return str(display)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


def _interval() -> float:
    try:
        return float(os.environ.get("AUDITLANG_PROGRESS_INTERVAL", DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL


class _StatsColumn(ProgressColumn):
    """Rate, elapsed and eta, computed at each render (so elapsed ticks during a long batch)."""

    def __init__(self, bar: ExecProgress) -> None:
        super().__init__()
        self.bar = bar

    def render(self, task: Task) -> Text:
        return Text(self.bar.stats(), style="progress.data.speed")


class ExecProgress:
    """Progress over ``total`` requests. The executor calls :meth:`begin_batch` before each
    commit batch, :meth:`advance` per result, and hands :meth:`engine_work` to the engine."""

    def __init__(self, total: int, description: str, *, enabled: bool | str = True, console: Console | None = None,
                 interval: float | None = None, clock: Callable[[], float] = time.monotonic, grows: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.mode = resolve_display(enabled, self.console) if total > 0 else "none"
        self.enabled = self.mode != "none"
        self.total, self.description = total, description
        self.grows = grows  # follow-ups join the total as results commit (:meth:`grow`)
        self.interval = _interval() if interval is None else float(interval)
        self.clock = clock
        self.errors = 0
        self.results = 0  # results yielded so far
        self._base = 0  # results before the current commit batch
        self._batch = 0  # size of the current commit batch
        self._work = 0.0  # engine-reported work inside the current commit batch
        self._t0 = clock()
        self._last_line = self._t0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._lock = threading.Lock()
        if self.mode == "rich":
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), _StatsColumn(self),
                console=self.console, transient=False)
            self._task = self._progress.add_task(description, total=total)

    # -- numbers

    @property
    def done(self) -> float:
        """Requests' worth of work finished: results, or the engine's finer report when ahead."""
        inside = max(self.results - self._base, min(self._work, float(self._batch)))
        return min(float(self.total), self._base + inside)

    def rate(self) -> float | None:
        elapsed = self.clock() - self._t0
        return self.done / elapsed if elapsed > 0 and self.done > 0 else None

    def eta(self) -> float | None:
        r = self.rate()
        return (self.total - self.done) / r if r else None

    def stats(self) -> str:
        r = self.rate()
        rate = "? req/s" if r is None else (f"{r:.2f} req/s" if r < 10 else f"{r:.0f} req/s")
        err = f", {self.errors} errors" if self.errors else ""
        return f"{rate}, elapsed {fmt_duration(self.clock() - self._t0)}, eta {fmt_duration(self.eta())}{err}"

    def line(self) -> str:
        d = self.done
        pct = 100.0 * d / self.total if self.total else 100.0
        return f"[{self.description}] {d:,.0f}/{self.total:,} requests ({pct:.1f}%), {self.stats()}"

    # -- events

    def begin_batch(self, size: int) -> None:
        with self._lock:
            self._base, self._batch, self._work = self.results, size, 0.0
        self._refresh()

    def grow(self, n: int) -> None:
        """``n`` more requests joined the running call (follow-ups built from its results)."""
        with self._lock:
            self.total += n
            self._batch += n
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=self.total)
        self._refresh()

    def engine_work(self, units: float) -> None:
        """Called by an engine (its ``progress_hook``) with the requests' worth of work it just
        finished inside the current ``run`` call."""
        with self._lock:
            self._work += float(units)
        self._refresh()

    def advance(self, n: int = 1, *, errors: int = 0) -> None:
        with self._lock:
            self.results += n
            self.errors += errors
        self._refresh()

    def _refresh(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done)
        elif self.mode == "plain" and self.clock() - self._last_line >= self.interval:
            self._emit()

    def _emit(self, text: str | None = None) -> None:
        self._last_line = self.clock()
        self.console.print(visible(text or self.line()), highlight=False, soft_wrap=True, markup=False)

    def _tick(self) -> None:  # plain mode: a line even while an engine batch is still running
        while not self._stop.wait(max(self.interval, 0.5)):
            if self.clock() - self._last_line >= self.interval:
                self._emit()

    # -- context

    def __enter__(self) -> ExecProgress:
        self._t0 = self._last_line = self.clock()
        if self._progress is not None:
            self._progress.start()
        elif self.mode == "plain":
            self._emit(f"[{self.description}] {self.total:,} requests to run"
                       + (", and the follow-ups of their answers as they are committed" if self.grows else ""))
            if self.interval > 0:
                self._ticker = threading.Thread(target=self._tick, daemon=True, name="auditlang-progress")
                self._ticker.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        if self._progress is not None:
            self._progress.stop()
        elif self.mode == "plain":
            verb = "done" if exc_type is None else "stopped"
            self._emit(f"[{self.description}] {verb}: {self.done:,.0f}/{self.total:,} requests in "
                       f"{fmt_duration(self.clock() - self._t0)} ({self.stats().split(', elapsed')[0]}"
                       f"{f', {self.errors} errors' if self.errors else ''})")
