"""Helpers shared by command modules."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

import click

from ..output import F

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


# ---- options several commands share (one meaning, one help text) -----------------------------
_MEASURE_OPTIONS = (
    click.option(
        "--k",
        "k",
        metavar="3,5,10",
        help="Recall/Precision/Hit cut-offs (definitions: docs/METRICS.md). [default: 3,5,10]",
    ),
    click.option("--ndcg-k", metavar="5,10", help="nDCG cut-offs. [default: 5,10]"),
    click.option("--mrr-k", metavar="20", help="MRR cut-offs. [default: 20]"),
    click.option(
        "--measures",
        "extra_measures",
        metavar="NAMES",
        help="More ranked measures, after those of --k, --ndcg-k and --mrr-k: name@K, or rprec "
        "(R-precision, no cut-off) or map (average precision over the whole list; map@K cuts "
        "it at K); e.g. rprec,map,recall@100.",
    ),
    click.option(
        "--rel",
        type=int,
        default=1,
        show_default=True,
        help="Lowest grade (0-3) that counts as relevant.",
    ),
)


def measure_options(f: F) -> F:
    """``--k``, ``--ndcg-k``, ``--mrr-k``, ``--measures`` (read them with :func:`measures_from`)
    and ``--rel``."""
    for option in reversed(_MEASURE_OPTIONS):
        f = option(f)
    return f


def measures_from(
    k: str | None, ndcg_k: str | None, mrr_k: str | None, extra: str | None = None
) -> list[str]:
    """The measure names the options of :func:`measure_options` ask for."""
    from ...api.vocabulary import measures_for, ranked_measures

    names = measures_for(
        parse_list(k, int, "cut-off"),
        parse_list(ndcg_k, int, "cut-off"),
        parse_list(mrr_k, int, "cut-off"),
    )
    return names + [m for m in ranked_measures(extra or "", "measures") if m not in names]


def statement_timeout_option() -> Callable[[F], F]:
    """``--statement-timeout`` of the commands that run stages (the pipeline's default)."""
    from ...api.vocabulary import PIPELINE_DEFAULTS

    return click.option(
        "--statement-timeout",
        default=PIPELINE_DEFAULTS.statement_timeout,
        show_default=True,
        metavar="DURATION",
        help="Cancel any statement on the knowledge base that runs longer (e.g. 30s, 5min; "
        "0 = no limit). Applied with SET LOCAL and recorded in every run's settings.",
    )


def group_options(help: str) -> Callable[[F], F]:
    """``--group-by COLUMN`` (what a group is measured as: ``help``) and ``--max-groups`` of the
    commands that measure per tenant (run pipeline, sweep, advise, watch)."""
    from ...api.vocabulary import DEFAULT_MAX_GROUPS

    group_by = click.option(
        "--group-by",
        default=None,
        metavar="COLUMN",
        help=help,
    )
    max_groups = click.option(
        "--max-groups",
        type=click.IntRange(1, 10000),
        default=DEFAULT_MAX_GROUPS,
        show_default=True,
        help="With --group-by: at most this many groups, the largest half and the smallest half.",
    )

    def apply(f: F) -> F:
        return group_by(max_groups(f))

    return apply


def isolate_index_option() -> Callable[[F], F]:
    """``--isolate-index`` of the commands that run ANN stages (pipeline, sweep)."""
    return click.option(
        "--isolate-index",
        is_flag=True,
        help="Drop the column's other vector indexes inside each ANN stage's transaction and roll "
        "back (takes an ACCESS EXCLUSIVE lock on the table for the stage; needs the table's "
        "owner; not READ ONLY).",
    )


def no_checksum_option() -> Callable[[F], F]:
    """``--no-checksum``: the fingerprint without the knowledge-base table's content checksum."""
    return click.option(
        "--no-checksum",
        is_flag=True,
        help="Skip the content checksum of the knowledge-base table in the fingerprint (one scan "
        "of the table); keep the row count. For very large tables.",
    )


def min_score_option() -> Callable[[F], F]:
    """``--min-score``: when an unanswerable query counts as having returned nothing."""
    from ...api.vocabulary import kinds_listing, vector_kinds

    return click.option(
        "--min-score",
        type=float,
        default=None,
        metavar="SCORE",
        help="Threshold for unanswerable queries ('returned nothing'). It follows the run's "
        "score direction: where scores are similarities (imports, bm25, merge, rerank) a "
        "result counts as returned when its score is at least SCORE; where they are "
        f"distances (vector stages: {kinds_listing(vector_kinds())}; lower is better) when its "
        "distance is at most SCORE. An unanswerable query with no such result is counted "
        "as having returned nothing. Without it: no result at all.",
    )


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
    """The progress display of long commands (see :mod:`evaluator.core.progress`)."""
    from ...core.progress import progress_bar as make

    return make(transient=transient, unit=unit)


def warn_above(bar: ProgressBar) -> Callable[[str], None]:
    """An ``on_warning`` callback printing 'warning: ...' above ``bar``, wrapped at words."""
    import sys

    from rich.markup import escape

    from ..output import text_width, wrapped

    def say(message: str) -> None:
        text = wrapped(f"warning: {message}", text_width(sys.stderr))
        bar.console.print("[yellow]warning:[/]" + escape(text[len("warning:") :]), soft_wrap=True)

    return say


def levels_option() -> Callable[[F], F]:
    """``--levels``: show acceptance levels (the metric contract's, for a general-domain
    knowledge base; docs/METRICS.md)."""
    return click.option(
        "--levels",
        is_flag=True,
        help="Show acceptance levels (excellent/good/pass/fail): docs/METRICS.md's for a "
        "knowledge base in a general domain, not levels of your test set.",
    )
