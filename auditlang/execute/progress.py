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

Beside each stage's line, :class:`RunProgress` keeps the whole run: requests done / total across
every model and stage of an ``execute_plan`` call (stages not started yet count with the plan's
numbers, replaced by the exact count when they start), its rate measured over the time spent
executing (not loading models) and the eta at that rate. Plain mode prints its ``[run]`` line
after every stage line; rich mode shows it as a second bar.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TaskID, TextColumn
from rich.text import Text

from auditlang.core.terminal import visible

__all__ = ["DISPLAYS", "ExecProgress", "RunProgress", "fmt_duration", "quiet_library_bars", "resolve_display"]

DISPLAYS = ("auto", "rich", "plain", "none")
DEFAULT_INTERVAL = 10.0  # seconds between plain lines ($AUDITLANG_PROGRESS_INTERVAL)


def resolve_display(display: str | bool, console: Console) -> str:
    """``auto``/True -> rich on a terminal or in a Jupyter notebook, plain otherwise; False -> none."""
    if display is True or display == "auto":
        return "rich" if console.is_terminal or console.is_jupyter else "plain"
    if display is False or display is None:
        return "none"
    if display not in DISPLAYS:
        raise ValueError(f"display must be one of {DISPLAYS}, got {display!r}")
    if display == "rich" and not (console.is_terminal or console.is_jupyter):
        return "plain"
    return str(display)


HUB_BARS_ENV = "HF_HUB_DISABLE_PROGRESS_BARS"  # read by huggingface_hub (and through it transformers) at import


@contextlib.contextmanager
def quiet_library_bars(display: str | bool) -> Iterator[None]:
    """In ``plain`` and ``none`` display, the libraries' own tqdm bars (transformers' "Loading
    weights", Hub downloads) are off for the duration, so a log holds only auditlang's lines:
    by the environment variable for libraries imported later, and by their switches for those
    already imported (looked up in ``sys.modules``, never imported here)."""
    if resolve_display(display, Console(stderr=True)) == "rich":
        yield
        return
    old = os.environ.get(HUB_BARS_ENV)
    os.environ[HUB_BARS_ENV] = "1"
    before = {name: sys.modules.get(name) for name in ("huggingface_hub.utils", "transformers.utils.logging")}
    hub, tr = before.values()
    hub_on = hub is not None and not hub.are_progress_bars_disabled()
    tr_on = tr is not None and tr.is_progress_bar_enabled()
    if hub_on:
        hub.disable_progress_bars()
    if tr_on:
        tr.disable_progress_bar()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(HUB_BARS_ENV, None)
        else:
            os.environ[HUB_BARS_ENV] = old
        # bars on again where they were on; libraries first imported during the run read the
        # variable then and keep it (huggingface_hub refuses to override it, with a warning)
        hub, tr = (sys.modules.get(name) for name in before)
        if hub is not None and hub_on:
            hub.enable_progress_bars()
        if tr is not None and tr_on:
            tr.enable_progress_bar()


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
        bar = self.bar
        if bar.whole is not None and task.id == bar._run_task:  # the whole run's bar
            return Text(bar.whole.run.stats(), style="progress.data.speed")
        return Text(bar.stats(), style="progress.data.speed")


def _rate_text(r: float | None) -> str:
    return "? req/s" if r is None else (f"{r:.2f} req/s" if r < 10 else f"{r:.0f} req/s")


class RunProgress:
    """The whole run's requests: ``planned`` holds the plan's count per (model, part), part
    ``"stage 1"`` or ``"follow-ups"`` (stage 2, cross, judge); a stage that starts replaces its
    part's planned count by its own exact, growing total (:meth:`begin`)."""

    def __init__(self, planned: dict[tuple[str, str], int], clock: Callable[[], float] = time.monotonic,
                 display: str | bool = "auto") -> None:
        self.display = display
        self.planned = {k: int(v) for k, v in planned.items() if v}
        self.models = sorted({m for m, _ in planned})
        self.clock = clock
        self.bars: list[ExecProgress] = []
        self._open: dict[int, float] = {}  # id(bar) -> when it started
        self._busy = 0.0  # seconds inside finished stages
        self._t0 = clock()
        self._lock = threading.Lock()

    def begin(self, bar: ExecProgress, model: str, stage: str) -> None:
        parts = {"stage 1": ("stage 1",), "stages 1+2": ("stage 1", "follow-ups")}.get(stage, ("follow-ups",))
        with self._lock:
            for part in parts:
                self.planned.pop((model, part), None)
            self.bars.append(bar)
            self._open[id(bar)] = self.clock()

    def end(self, bar: ExecProgress) -> None:
        with self._lock:
            t = self._open.pop(id(bar), None)
            if t is not None:
                self._busy += self.clock() - t

    def skip(self, model: str) -> None:
        """``model`` has nothing to run (unchanged, every request stored)."""
        with self._lock:
            self.planned = {k: v for k, v in self.planned.items() if k[0] != model}

    @property
    def total(self) -> int:
        return sum(b.total for b in self.bars) + sum(self.planned.values())

    @property
    def done(self) -> float:
        return sum(b.done for b in self.bars)

    def rate(self) -> float | None:
        now = self.clock()
        busy = self._busy + sum(now - t for t in self._open.values())
        return self.done / busy if busy > 0 and self.done > 0 else None

    def eta(self) -> float | None:
        r = self.rate()
        return max(self.total - self.done, 0) / r if r else None

    def finish(self, console: Console | None = None) -> None:
        """The last ``[run]`` line (plain display), once every stage ran: the exact totals."""
        self.planned.clear()
        console = console or Console(stderr=True)
        if self.bars and resolve_display(self.display, console) == "plain":
            console.print(self.line(), highlight=False, soft_wrap=True, markup=False)

    def stats(self) -> str:
        return (f"{_rate_text(self.rate())} while executing, elapsed {fmt_duration(self.clock() - self._t0)}, "
                f"eta {fmt_duration(self.eta())}")

    def line(self) -> str:
        total, d = self.total, self.done
        pct = 100.0 * d / total if total else 100.0
        est = "; follow-ups of stages not started are the plan's estimate" if any(
            part == "follow-ups" for _, part in self.planned) else ""
        return (f"[run] {d:,.0f}/{total:,} requests ({pct:.1f}%) over {len(self.models)} model(s) and their stages, "
                f"{self.stats()}{est}")


class _Slot:
    """A stage's place in a :class:`RunProgress` (model and stage name)."""

    def __init__(self, run: RunProgress, model: str, stage: str) -> None:
        self.run, self.model, self.stage = run, model, stage


def stage_slot(run: RunProgress | None, model: str, stage: str) -> _Slot | None:
    return None if run is None else _Slot(run, model, stage)


class ExecProgress:
    """Progress over ``total`` requests. The executor calls :meth:`begin_batch` before each
    commit batch, :meth:`advance` per result, and hands :meth:`engine_work` to the engine.
    ``whole``: the stage's place in the run's :class:`RunProgress` (its line follows this one's)."""

    def __init__(self, total: int, description: str, *, enabled: bool | str = True, console: Console | None = None,
                 interval: float | None = None, clock: Callable[[], float] = time.monotonic, grows: bool = False,
                 whole: _Slot | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.whole = whole
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
            self._run_task = (self._progress.add_task("run (all models and stages)", total=max(whole.run.total, 1))
                              if whole is not None else None)

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
        rate = _rate_text(self.rate())
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
            if self.whole is not None and self._run_task is not None:
                run = self.whole.run
                self._progress.update(self._run_task, completed=run.done, total=max(run.total, 1))
        elif self.mode == "plain" and self.clock() - self._last_line >= self.interval:
            self._emit()

    def _emit(self, text: str | None = None) -> None:
        self._last_line = self.clock()
        self.console.print(visible(text or self.line()), highlight=False, soft_wrap=True, markup=False)
        if self.whole is not None:  # the whole run's line after every stage line
            self.console.print(self.whole.run.line(), highlight=False, soft_wrap=True, markup=False)

    def _tick(self) -> None:  # plain mode: a line even while an engine batch is still running
        while not self._stop.wait(max(self.interval, 0.5)):
            if self.clock() - self._last_line >= self.interval:
                self._emit()

    # -- context

    def __enter__(self) -> ExecProgress:
        self._t0 = self._last_line = self.clock()
        if self.whole is not None:
            self.whole.run.begin(self, self.whole.model, self.whole.stage)
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
        if self.whole is not None:
            self.whole.run.end(self)
        if self._progress is not None:
            self._progress.stop()
        elif self.mode == "plain":
            verb = "done" if exc_type is None else "stopped"
            self._emit(f"[{self.description}] {verb}: {self.done:,.0f}/{self.total:,} requests in "
                       f"{fmt_duration(self.clock() - self._t0)} ({self.stats().split(', elapsed')[0]}"
                       f"{f', {self.errors} errors' if self.errors else ''})")
