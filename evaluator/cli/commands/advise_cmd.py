"""`pgeval advise`: which index design to have, built how, queried how, on the user's own table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from ...api import vocabulary
from ...api.vocabulary import ADVISE_DEFAULTS, advise_kinds, ann_kinds, kinds_listing
from ..flags import (
    BUDGETS,
    BUILDING,
    EMBEDDER,
    FIND,
    GROUPING,
    MEASURING,
    PLOT,
    QUERY_SOURCE,
    SET,
    TARGET,
    formats,
)
from ..option_groups import GroupedCommand, group, opt
from ..output import echo_line, emit, info, printed_json
from .common import pass_api
from .query_options import group_queries_words

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import AdviseResult, Design


# what the printed statement is: pgeval's, not one read from the application
STATEMENT = (
    "the statement measured (pgeval's: your application's gets these figures when it orders "
    "by the same distance operator with the same LIMIT):"
)
# a design that changes the application's statement (diskann-labels): what it must send instead
CHANGED = "the statement your application must send instead (measured as it is printed):"
# the table's columns shown only with --wide (JSON and the HTML report carry them)
TABLE_WIDE_ONLY = ("±95%", "p50_ms", "p99_ms", "rows", "mwm", "in_sb", "qps", "worst_rows")


_WHAT = group(
    "What is measured",
    TARGET.but(help="Target to advise on."),
    opt(
        "--designs",
        default=None,
        metavar="KIND,KIND",
        help=f"Index designs to compare ({kinds_listing(ann_kinds())}). "
        f"[default: those of {kinds_listing(advise_kinds())} this database can build; "
        "grouped (--group-by), "
        f"{kinds_listing(tuple(k for k in advise_kinds(True) if k not in advise_kinds()))} "
        "too, which changes the statement the application sends: docs/filtered.md]",
    ),
    SET.but(
        help="Setting applied while measuring (SET LOCAL), e.g. enable_seqscan=off on small "
        "tables; not part of the recommendation."
    ),
    EMBEDDER,
)
_FIND = (
    FIND.but(
        "--target-recall",
        default=ADVISE_DEFAULTS.target_recall,
        help="Recall@K against exact search (at the application's LIMIT K) a design must reach.",
    )
    .but("--find-max", help="Largest work setting a find tries.  [default: 1000]")
    .plus(
        opt(
            "--final-rounds",
            type=click.IntRange(1, 100),
            default=ADVISE_DEFAULTS.final_rounds,
            show_default=True,
            help="Repetitions of each design's found setting, so that the p95 that decides between "
            "designs (or excludes one) is compared beyond its noise.",
        ),
        opt(
            "--low-end",
            is_flag=True,
            default=False,
            help="Each design shown and recommended at the upper end of its setting's 95 % interval "
            "(the measured value reaching --target-recall in 97.5 % of resamples of the queries); "
            "nothing more measured; ungrouped designs only (docs/advise.md).",
        ),
    )
)
_MEASURING = (
    MEASURING.without("--isolate-index")
    .but(
        "--k",
        default=ADVISE_DEFAULTS.k,
        help="The application's LIMIT: recall@K against exact search.",
    )
    .but("--repeat", default=ADVISE_DEFAULTS.repeat, help="Repetitions of every point.")
    .but("--concurrency", default=ADVISE_DEFAULTS.concurrency)
)
_BUILDING = (
    BUILDING.but(
        "--build",
        metavar="KIND:OPTION=V1,V2",
        help="Build options of a design; several values (and options) give one build each. "
        "[default: the access method's defaults]",
    )
    .but(
        "--maintenance-work-mem",
        help="maintenance_work_mem for the builds (never below the server's). "
        "[default: sized to the index]",
    )
    .but("--build-timeout", default=ADVISE_DEFAULTS.build_timeout_s)
)
_SCREENING = group(
    "Screening a large table",
    opt(
        "--sample-rows",
        type=int,
        default=None,
        metavar="N",
        help="Screen every design on N rows of the target (drawn by md5 of the chunk id, "
        "sampled query rows held out, ground truth on those rows); the index your table has is "
        "measured in place, designs that cannot beat it are dropped (and said why), at most one "
        "is built in full; the recommendation is among those measured at the table's size. "
        "[default: on a table of more than 100,000 rows, a tenth of them, 20,000 to 100,000]",
    ),
    opt(
        "--confirm-on-table",
        is_flag=True,
        default=False,
        help="Build the one design the screening chose CREATE INDEX CONCURRENTLY on your table "
        "(with the SET it prints) and measure it there, instead of on a scratch copy of every "
        "row; kept if recommended, else dropped again. [default: a scratch copy]",
    ),
    opt(
        "--max-confirm-s",
        type=click.FloatRange(0, None),
        default=ADVISE_DEFAULTS.max_confirm_s,
        show_default=True,
        metavar="SECONDS",
        help="advise's own time for the one challenger it builds in full after screening: one "
        "whose build on your table's rows, estimated from the sample's, is longer is not built, "
        "and the output says so with the bound that builds it; the recommendation is then the "
        "index your table has. (With no index in place the best screened design is built "
        "regardless.)",
    ),
)
_GROUPING = GROUPING.but(
    "--group-by",
    help="Measure every design per group of this column (a tenant: knowledge_base_id) as the "
    "application searches it, WHERE COLUMN = value, on one index over every group: "
    "--sample-queries N spread over the groups (--group-queries: per group); a design meets "
    "--target-recall only if every group does, and its worst group is shown. [default: the "
    "target's --group-by, else the whole table]",
)
_OUTPUT = group(
    "Output",
    opt(
        "--role",
        default=None,
        metavar="NAME",
        help="Print the settings as ALTER ROLE NAME IN DATABASE ... SET (the application's role "
        "only) instead of ALTER DATABASE ... SET.",
    ),
    PLOT.but(help="Write a PNG of recall@K against p95 per design (marker size = index size)."),
    opt(
        "--report",
        "report",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write an HTML page: the recommendation, its statements, every design, the plot.",
    ),
    *formats(("table", "json")),
)


@click.command(cls=GroupedCommand)
@QUERY_SOURCE
@_WHAT
@_FIND
@BUDGETS
@_BUILDING
@_SCREENING
@_MEASURING
@_GROUPING
@_OUTPUT
@pass_api
def advise(
    pg: Pgeval,
    queries: dict[str, Any],
    target_name: str,
    designs: str | None,
    build: tuple[str, ...],
    settings: tuple[str, ...],
    no_checksum: bool,
    fmt: str,
    **options: Any,
) -> None:
    """Recommend the index design (a stage kind of --designs), its build options and its query
    setting that reach --target-recall on your table within your budgets, with the DDL and
    settings to apply it.

    Every design x build is one stored sweep (`pgeval sweep --build ... --find ...`): built
    on a scratch copy of the target's vectors (dropped afterwards, also on Ctrl-C and on
    error), never on your table; a build your table has is measured in place. Its cheapest
    work setting reaching the target recall is found; per design: build time, index size,
    maintenance_work_mem, whether it fits shared_buffers, recall with its 95 % interval (±95%,
    --wide: about ±0.02 over 100 queries), p50/p95/p99, QPS and rows. A rerun measures only
    what is missing. The recommendation is the design meeting the target within the budgets at
    the lowest p95 (within its noise: the smaller index); when none does, the budget that
    binds and what the closest design needs. --group-by: every group must meet it. A large
    table: the index you have in place, the others screened, one built in full at most.

    \b
    Examples:
      pgeval advise --target kb --sample-queries 300 --target-recall 0.95
      pgeval advise --target kb --queries-file q.npy --designs hnsw,diskann \\
          --build hnsw:m=16,32 --max-p95-ms 5 --max-index-mb 2000 --format json
      pgeval advise --target kb --sample-queries 50 --group-by knowledge_base_id \\
          --sample-rows 20000 --role app
    """
    progress = _Progress()
    # the other options go to the API under their names
    res = pg.advise(
        target_name,
        **queries,
        **options,
        designs=tuple(d.strip() for d in (designs or "").split(",") if d.strip()),
        build=tuple(build),
        settings=list(settings),
        checksum=not no_checksum,
        on_design=progress.before,
        on_designed=progress.after,
        on_warning=lambda m: info(f"warning: {m}"),
    )
    written = (options["plot"], options["report"])
    _emit(res, written, fmt, options["k"], options["target_recall"])


def _emit(
    res: AdviseResult, written: tuple[str | None, ...], fmt: str, k: int, target_recall: float
) -> None:
    """The files written, then the result as JSON or as a table."""
    for path in written:
        if path:
            info(f"wrote {path}")
    if printed_json(fmt, res.as_dict()):
        return
    _print(res, k, target_recall)


class _Progress:
    """advise's progress lines on stderr: before each design what it is and the time left;
    after it, what was done: stored (nothing built or measured) or how many points were
    measured, in how long."""

    def __init__(self) -> None:
        self.started = 0.0

    def before(self, i: int, n: int, design: Design, left: float | None) -> None:
        import time

        self.started = time.monotonic()
        eta = "" if left is None else f"; about {left:.0f} s left"
        where = (
            f"measuring {design.in_place['name']} in place, on your table"
            if design.in_place
            else "on a scratch copy of the table, what is not stored yet"
        )
        info(f"advise: design {i} of {n}: {design.label} ({where}{eta})")

    def after(self, i: int, n: int, design: Design, row: Mapping[str, Any]) -> None:
        import time

        took = time.monotonic() - self.started
        measured, stored = (
            row.get("measured") or 0,
            (row.get("reused") or 0) + (row.get("kept") or 0),
        )
        if not measured:
            done = "stored: nothing built or measured"
        else:
            done = f"{measured} point(s) measured in {took:.1f} s" + (
                f", {stored} read from stored sweeps" if stored else ""
            )
        info(f"advise: design {i} of {n}: {design.label}: {done}")


def _print(res: AdviseResult, k: int, target_recall: float) -> None:
    """The designs as a table, the recommendation and the statements that apply it."""
    skipped = "; ".join(f"{d}: {why}" for d, why in res.skipped.items())
    echo_line(
        f"advise on target {res.target}: recall@{k} >= {target_recall:g} at the application's "
        f"LIMIT {k}"
        + (" (each design at the upper end of its setting's 95 % interval)" if res.low_end else "")
        + (f" · not measured: {skipped}" if skipped else "")
    )
    if res.group_by:
        echo_line(
            f"per group of {res.group_by}: a design meets the target only if every group does "
            "(recall: its worst group's)" + group_queries_words(res.group_queries, "; ")
        )
    emit(
        vocabulary.advise_rows(res.as_dict(), short=True),
        "table",
        wide_only=TABLE_WIDE_ONLY,
    )
    for line in vocabulary.advise_flow_lines(res.as_dict()):
        echo_line(line)
    rec = res.recommendation
    scan = [res.scan.get("scan_modes_line"), res.scan.get("unreachable_line")]
    said = [("scan modes: " if i == 0 else "") + s for i, s in enumerate(scan) if s]
    if rec is None:
        assert res.unmet is not None  # no design met the target: the one that binds is said
        echo_line(f"no recommendation: {res.unmet['why']}")
        for line in said:
            echo_line(line)
        return
    change = rec.get("statement_change")
    echo_line(f"recommended: {rec['why']}")
    if rec.get("shapes"):
        said.insert(0, vocabulary.advise_shapes_line(rec))
    for line in said:
        echo_line(line)
    if rec.get("prepared"):
        echo_line(rec["prepared"]["line"])
    if rec.get("keep"):
        echo_line(f"keep {rec['keep']} (the index your table has); set:")
    else:
        echo_line(
            "apply on your table ("
            + ("the label column, " if change else "")
            + "the index first, then the settings):"
        )
        for s in [*(rec.get("build_sql") or []), *([change["column_sql"]] if change else [])]:
            echo_line(f"  {s};")
        ddl = rec["ddl"].replace("\n", "\n  ")  # a partitioned table's: one per line
        echo_line(f"  {ddl};")
    for s in rec["settings_sql"]:
        echo_line(f"  {s};")
    _print_indexes(rec)
    echo_line(f"{CHANGED if change else STATEMENT} {rec['query_sql']}")
    if len(rec.get("query_params") or []) > 1:
        params = ", ".join(f"${i} {p}" for i, p in enumerate(rec["query_params"], 1))
        echo_line(f"  with {params}")
    echo_line(f"evidence: pgeval stage-report {rec['sweep']} (point {rec['point']})", err=True)


def _print_indexes(rec: dict) -> None:
    """What happens to the indexes the table has, the rollback and when to drop the old ones."""
    if rec.get("planner") and not (rec.get("keep") and rec.get("in_place")):
        echo_line(f"the indexes you have: {rec['planner']}")
    if rec.get("rollback"):
        echo_line("rollback:")
        for s in rec["rollback"]:
            echo_line(f"  {s};")
    if rec.get("drop_old"):
        echo_line(f"drop the old index {rec['drop_old']}:")
        for old in rec.get("supersedes") or []:
            echo_line(f"  {old['drop']};")
