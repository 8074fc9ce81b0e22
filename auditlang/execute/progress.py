"""Progress display for request execution: a rich bar with throughput and ETA.

Shown only on an interactive terminal and when asked for; otherwise every call is a no-op, so
the executor can always drive it.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

__all__ = ["ExecProgress", "RateColumn"]


class RateColumn(ProgressColumn):
    """Requests per second, averaged by rich over the last ``speed_estimate_period`` seconds."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if speed is None:
            return Text("? req/s", style="progress.data.speed")
        return Text(f"{speed:.2f} req/s" if speed < 10 else f"{speed:.0f} req/s", style="progress.data.speed")


class ExecProgress:
    """One progress bar over ``total`` requests; ``advance`` per finished request."""

    def __init__(self, total: int, description: str, *, enabled: bool = True, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = bool(enabled and total > 0 and self.console.is_terminal)
        self.errors = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                RateColumn(),
                TextColumn("[red]{task.fields[err]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=self.console,
                speed_estimate_period=60.0,
            )
            self._task = self._progress.add_task(description, total=total, err="")

    def __enter__(self) -> ExecProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, n: int = 1, *, errors: int = 0) -> None:
        self.errors += errors
        if self._progress is not None and self._task is not None:
            err = f"{self.errors} errors" if self.errors else ""
            self._progress.update(self._task, advance=n, err=err)
