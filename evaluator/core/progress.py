"""Progress on stderr: a rich bar with done/total, elapsed time and ETA on a terminal; when
stderr is not a terminal (a pipe, a CI log), one line at most every ``PGEVAL_PROGRESS_INTERVAL``
seconds (default 10), the first after that interval, so that short commands print nothing, and
none before the first piece of work is done (an input refused before it prints its error only).

:class:`LineProgress` offers the part of ``rich.progress.Progress`` the commands use."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress

INTERVAL_S = 10.0


def interval() -> float:
    try:
        return max(0.0, float(os.environ.get("PGEVAL_PROGRESS_INTERVAL", INTERVAL_S)))
    except ValueError:
        return INTERVAL_S


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float = 0.0
    # (seconds elapsed, completed) when the last line was printed: the rate since then is the
    # ETA's, so that work slowing down (a larger ef_search) shows in it at the next line
    last: tuple[float, float] | None = None


class _Live:
    is_started = False


class _Console:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def print(self, text: object, **_kw: Any) -> None:
        from rich.text import Text

        print(Text.from_markup(str(text)).plain, file=self.stream, flush=True)


class LineProgress:
    """``unit="bytes"``: amounts shown as sizes (1.2 MB/45.6 MB) rather than counts; ``fit``:
    what a line becomes as printed (the command line's: wrapped at $COLUMNS, as its other
    plain text), else it is printed whole."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        every: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        unit: str = "",
        fit: Callable[[str], str] | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.unit = unit
        self.fit = fit
        self.every = interval() if every is None else every
        self.clock = clock
        self.live = _Live()
        self.console = _Console(self.stream)
        self.tasks: dict[int, _Task] = {}
        self._started = self._last = 0.0

    def start(self) -> None:
        self.live.is_started = True
        self._started = self._last = self.clock()

    def stop(self) -> None:
        self.live.is_started = False

    def add_task(self, description: str, total: float | None = None, **_kw: Any) -> int:
        tid = len(self.tasks)
        self.tasks[tid] = _Task(description, total)
        self._tick(tid)
        return tid

    def update(
        self,
        task: int,
        *,
        advance: float | None = None,
        completed: float | None = None,
        total: float | None = None,
        description: str | None = None,
        **_kw: Any,
    ) -> None:
        t = self.tasks[task]
        if total is not None:
            t.total = total
        if description is not None:
            t.description = description
        if completed is not None:
            t.completed = completed
        if advance:
            t.completed += advance
        self._tick(task)

    def advance(self, task: int, n: float = 1) -> None:
        self.update(task, advance=n)

    def _tick(self, task: int) -> None:
        now = self.clock()
        if now - self._last < self.every or now == self._started:
            return
        if not self.tasks[task].completed:  # nothing done yet: a check may still refuse the
            return  # input, whose one-line error is then the only line (issue 40, item 4)
        self._last = now
        t = self.tasks[task]
        text = line(t, now - self._started, self.unit)
        t.last = (now - self._started, t.completed)
        print(self.fit(text) if self.fit else text, file=self.stream, flush=True)


def line(task: _Task, elapsed: float, unit: str = "") -> str:
    """'progress: sweep ef_search=40 1350/4500 (30%), 12 s elapsed, ETA 28 s'; with
    ``unit="bytes"``: 'progress: import run.trec 1.2 MB/4.5 MB (27%), ...'. The ETA is the
    work left at the rate since the task's previous line (the whole run's for its first)."""
    amount = _size if unit == "bytes" else lambda n: str(int(n))
    done = amount(task.completed)
    if not task.total:
        return f"progress: {task.description} {done} done, {elapsed:.0f} s elapsed"
    share = min(1.0, task.completed / task.total)
    since, then = task.last or (0.0, 0.0)
    if task.completed <= then or elapsed <= since:
        since, then = 0.0, 0.0
    rate = (task.completed - then) / (elapsed - since) if elapsed > since else 0.0
    left = max(task.total - task.completed, 0.0)
    eta = f", ETA {left / rate:.0f} s" if share > 0 and rate > 0 and left > 0 else ""
    if left == 0:  # (what follows the last piece: no "ETA 0 s" before a silence)
        eta = ", finishing"
    return (
        f"progress: {task.description} {done}/{amount(task.total)} ({share:.0%}), "
        f"{elapsed:.0f} s elapsed{eta}"
    )


def _size(n: float) -> str:
    from rich.filesize import decimal

    return decimal(int(n))


def progress_bar(
    *, transient: bool, unit: str = "", fit: Callable[[str], str] | None = None
) -> Progress | LineProgress:
    """A rich progress bar on stderr (description, bar, done/total, elapsed time, ETA) on a
    terminal, else a :class:`LineProgress` (``fit``: see there). ``unit="bytes"`` shows amounts
    as sizes (reading a file). Start it when the first piece of work begins, so that an early
    error prints one line only."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    if not console.is_terminal:
        return LineProgress(unit=unit, fit=fit)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn() if unit == "bytes" else MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=transient,
    )
