"""Helpers shared by command modules."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

import click

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def pass_db(f: Callable[Concatenate[Any, P], R]) -> Callable[P, R]:
    """Inject the resolved :class:`evaluator.core.db.Database` as the first argument."""

    @click.pass_context
    @functools.wraps(f)
    def wrapper(ctx: click.Context, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return f(ctx.obj.db, *args, **kwargs)

    return wrapper


def pass_api(f: Callable[Concatenate[Any, P], R]) -> Callable[P, R]:
    """Inject the :class:`evaluator.api.Pgeval` of the resolved database as the first argument:
    a command parses its options, calls one method of it and prints what it returns."""

    @click.pass_context
    @functools.wraps(f)
    def wrapper(ctx: click.Context, /, *args: P.args, **kwargs: P.kwargs) -> R:
        from ...api import Pgeval

        return f(Pgeval(ctx.obj.db), *args, **kwargs)

    return wrapper


@overload
def parse_list(value: str | None, *, what: str = "value") -> list[str]: ...


@overload
def parse_list(value: str | None, cast: Callable[[str], T], what: str = "value") -> list[T]: ...


def parse_list(
    value: str | None, cast: Callable[[str], Any] = str, what: str = "value"
) -> list[Any]:
    """'3,5,10' -> [3, 5, 10]; raises a click error naming the bad item."""
    if value is None:
        return []
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            out.append(cast(item))
        except ValueError:
            raise click.BadParameter(f"'{item}' is not a valid {what}") from None
    return out


def measures_from(
    k: str | None, ndcg_k: str | None, mrr_k: str | None, extra: str | None = None
) -> list[str]:
    """The measure names the options of ``flags.MEASURES`` ask for."""
    from ...api.vocabulary import measures_for, ranked_measures

    names = measures_for(
        parse_list(k, int, "cut-off"),
        parse_list(ndcg_k, int, "cut-off"),
        parse_list(mrr_k, int, "cut-off"),
    )
    return names + [m for m in ranked_measures(extra or "", "measures") if m not in names]


# ---- progress on stderr ------------------------------------------------------------------------
class ProgressBar(Protocol):
    """What the commands use of a progress display: rich's ``Progress`` on a terminal, else
    :class:`evaluator.core.progress.LineProgress` (task ids are theirs)."""

    @property
    def live(self) -> Any: ...  # .is_started

    @property
    def console(self) -> Any: ...  # .print(text, soft_wrap=...)

    @property
    def tasks(self) -> Any: ...  # by task id: .total

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def add_task(self, description: str, /, *, total: float | None = ...) -> Any: ...

    def update(
        self,
        task: Any,
        /,
        *,
        advance: float | None = ...,
        completed: float | None = ...,
        description: str | None = ...,
    ) -> None: ...

    def advance(self, task: Any, n: float = ..., /) -> None: ...


def progress_bar(*, transient: bool, unit: str = "") -> ProgressBar:
    """The progress display of long commands (see :mod:`evaluator.core.progress`); piped, its
    lines are wrapped as the other plain text on stderr (at $COLUMNS when set, words whole)."""
    import sys

    from ...core.progress import progress_bar as make
    from ..output import text_width, wrapped

    return make(
        transient=transient, unit=unit, fit=lambda text: wrapped(text, text_width(sys.stderr))
    )


class OneTask:
    """A progress bar on stderr with one task, started with its first report (so that an early
    error prints one line only) and stopped when the ``with`` block ends; ``warn`` prints a
    warning above it."""

    def __init__(self, unit: str = "") -> None:
        self.bar = progress_bar(transient=True, unit=unit)
        self.warn = warn_above(self.bar)
        self.task: Any = None  # the bar's id of the task, once started

    def __enter__(self) -> OneTask:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar.live.is_started:
            self.bar.stop()

    def show(self, description: str, done: float | None = None, total: float | None = None) -> None:
        """The task as ``description``, ``done`` of ``total`` (read when the task starts)."""
        if self.task is None:
            self.bar.start()
            self.task = self.bar.add_task(description, total=total)
        self.bar.update(self.task, completed=done, description=description)


def warn_above(bar: ProgressBar) -> Callable[[str], None]:
    """An ``on_warning`` callback printing 'warning: ...' above ``bar``, wrapped at words."""
    import sys

    from rich.markup import escape

    from ..output import text_width, wrapped

    def say(message: str) -> None:
        text = wrapped(f"warning: {message}", text_width(sys.stderr))
        bar.console.print("[yellow]warning:[/]" + escape(text[len("warning:") :]), soft_wrap=True)

    return say
