"""`pgeval sweep`: recall against latency over a grid of index settings."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from ...api.vocabulary import (
    SWEEP_DEFAULTS,
    consistency_line,
    find_line,
    find_settings,
    held_out_line,
    plot_title,
    reaches,
    recall_text,
    recommendation_line,
    server_label,
)
from ..flags import (
    BUILDING,
    DEPTH,
    EMBEDDER,
    FIND,
    GROUPING,
    INDEX,
    MEASURING,
    NAME,
    PARAM,
    PLOT,
    QUERY_SOURCE,
    SET,
    STAGE,
    TARGET,
    formats,
)
from ..option_groups import GroupedCommand, group, opt
from ..output import echo_line, emit, fixed, info, to_json, warn
from .common import pass_api, progress_bar, warn_above
from .query_options import no_judgements_line
from .sweep_groups_view import run_grouped
from .sweep_shapes_view import run_shaped

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import Point, SweepResult

__all__ = ["plot_title", "sweep"]  # plot_title: the library's, read here by tests too


def point_rows(points: list[dict], measures: list[str], k: int) -> list[dict[str, Any]]:
    """Flat rows (one per grid point) for table/csv output."""
    rows = []
    for p in points:
        tail = p.get("recall_tail") or {}
        row = {
            "point": p["point"],
            "label": p["label"],
            "index": p.get("index"),
            f"index_recall@{k}": p["index_recall"],
            "index_recall_sd": p["index_recall_sd"],
            "recall_p5": tail.get("p5"),
            "recall_p10": tail.get("p10"),
            "recall_min": tail.get("min"),
            "at_zero": tail.get("at_zero"),
            "p50_ms": p["p50_ms"],
            "p95_ms": p["p95_ms"],
            "p95_sd": p["p95_sd"],
            "p99_ms": p["p99_ms"],
            "qps": p["qps"],
            "rows": p["rows_mean"],
            "reps": p["repetitions"],
            "reused": p["reused"],
            "pareto": "*" if p["pareto"] else "",
            "build_ms": p["build_ms"],
            "index_mb": None if p["index_bytes"] is None else p["index_bytes"] / 1048576,
        }
        for m in measures:
            row[m] = (p["metrics"] or {}).get(m)
        rows.append(row)
    return rows


_PLAN = opt(
    "--plan",
    "plan",
    type=click.Choice(["custom", "generic"]),
    default=None,
    help="Measure the planner's own plan, whatever serves the statement (the ANN index, a "
    "btree and a sort, a sequential scan), and say per point what served it: custom (each "
    "execution planned with its values: one-shot statements, psycopg 2, most ORMs) or "
    "generic (a prepared statement after five executions: psycopg 3, JDBC). Nothing is forced: "
    "a --set enable_sort=off is yours, and the output says it. [default: custom for each "
    "--group-by group; on the whole table the stage's index is required]",
)
_WHAT = group("What is measured", TARGET, STAGE, PARAM, SET, INDEX, _PLAN, EMBEDDER)
_FIND = FIND.plus(
    opt(
        "--find",
        "find",
        default=None,
        metavar="GUC",
        help=f"Find the cheapest value of this work setting ({', '.join(find_settings())}) "
        "reaching --target-recall: "
        "bracketing from its current value, then bisection; every value tried is a point. "
        "With other --param grids, one find per combination; with --build, one per build "
        "(each index built on the scratch copy when a value first needs measuring).",
    ),
    opt(
        "--held-out-rows",
        type=click.IntRange(0, 10_000_000),
        default=SWEEP_DEFAULTS.held_out_rows,
        metavar="N",
        help="After a --find on --sample-queries through the table's index: measure the "
        "sampled rows' bias at the table's size, on a copy of its other rows (held out) against "
        "the table's figure, and print what the application's queries may read. N: on two "
        "copies of N rows instead, one with the sampled rows in the index and one without "
        "(cheaper; the bias grows with the rows); 0 skips it. [default: every row of the table]",
    ),
)
_MEASURING = MEASURING.plus(
    DEPTH,
    opt(
        "--consistency",
        type=click.Choice(["snapshot", "detect"]),
        default=SWEEP_DEFAULTS.consistency,
        show_default=True,
        help="How every recall is measured against the rows the ANN statements saw while the "
        "table changes: snapshot (the exact answer and every timed statement read one exported "
        "snapshot; VACUUM's xmin horizon is held meanwhile, at most --snapshot-max-age) or "
        "detect (each point between two reads of the rows' versions, measured again against a "
        "fresh exact answer when they moved). The output says which, and names the points "
        "measured again.",
    ),
    opt(
        "--snapshot-max-age",
        "snapshot_max_age_s",
        type=click.FloatRange(0, 7 * 86400),
        default=SWEEP_DEFAULTS.snapshot_max_age_s,
        show_default=True,
        metavar="SECONDS",
        help="Longest the sweep's snapshot holds VACUUM back; past it the snapshot is released "
        "before the next point and the rest is measured as with --consistency detect (said in "
        "the output).",
    ),
)
_GROUPING = GROUPING.but(
    "--group-by",
    help="Measure each group of this column (a tenant: knowledge_base_id) as the application "
    "searches it, WHERE COLUMN = value: --sample-queries N spread over the groups "
    "(--group-queries: per group), exact search within the group, recall per group worst "
    "first, and the setting that brings the worst group to --target-recall. [default: the "
    "target's --group-by, else the whole table]",
)
_OUTPUT = group(
    "Output",
    NAME,
    opt(
        "--fresh",
        is_flag=True,
        help="Measure every point again (replaces a sweep of the same name; reuses nothing).",
    ),
    PLOT,
    *formats(("table", "json", "csv")),
)


@click.command(cls=GroupedCommand)
@QUERY_SOURCE
@_WHAT
@_FIND
@BUILDING
@_MEASURING
@_GROUPING
@_OUTPUT
@pass_api
def sweep(
    pg: Pgeval,
    queries: dict[str, Any],
    target_name: str,
    stage: str,
    k: int,
    target_recall: float,
    build: tuple[str, ...],
    group_by: str | None,
    max_groups: int,
    group_queries: int | None,
    no_checksum: bool,
    plot: str | None,
    fmt: str,
    **options: Any,
) -> None:
    """Measure recall@K against exact search and latency at every point of a grid of index
    settings, and recommend the cheapest setting that reaches --target-recall.

    \b
    Every point runs the stage through the pipeline's stage runner (plan checked with EXPLAIN,
    settings by SET LOCAL), --repeat times; per point: recall@K against exact search, every
    qrels metric, rows returned, latency p50/p95/p99 (nearest rank) and throughput, mean and
    spread over the repetitions; the Pareto front of recall against p95 is marked (*).
    Points are recorded under their configuration fingerprint: running the same command again
    measures only what is missing (an interrupted sweep resumes), --fresh measures everything.
    When the configuration changed since (the data, a VACUUM, another server), the same command
    measures again and keeps the earlier points as sweep NAME@YYYYMMDD-HHMMSS, saying what
    changed in one line (docs/production.md: scheduled sweeps).
    Build sweeps (--build) build each index on a scratch copy of the target's vectors in a
    schema of pgeval's own (dropped afterwards, also on Ctrl-C), never on your table.
    Warm up first (`pgeval warmup`); on small tables add --set enable_seqscan=off.

    \b
    Without a test set, --sample-queries N (rows of the target as queries), --queries-sql or
    --queries-file give query vectors; recall against exact search needs nothing more.
    Exact search is computed once per query set and target (one streamed read of the table)
    and stored: every point, repetition and later sweep reuses it until the data changes.
    With --captured SET (`pgeval queries capture`), each shape of the set is measured as the
    application sent it: its own statement, LIMIT and values, against its exact twin, one
    sweep per shape; the recall weighted by the searches sent, and with --find the value that
    reaches the target in every shape (or the shapes that cannot).

    \b
    Examples:
      pgeval sweep --sample-queries 300 --target kb --stage hnsw \\
          --param hnsw.ef_search=10,20,40,80,160 --plot sweep.png
      pgeval sweep --testset kb-v1 --target kb --stage hnsw \\
          --param hnsw.ef_search=10,20,40,80,160,320 --repeat 3 --plot sweep.png
      pgeval sweep --testset kb-v1 --target kb --stage diskann \\
          --param diskann.query_rescore=0,50,100,200 \\
          --param diskann.query_search_list_size=50,100,200
      pgeval sweep --testset kb-v1 --target kb --stage hnsw \\
          --build m=8,16,32 --build ef_construction=64,128 --param hnsw.ef_search=40,100
      pgeval sweep --sample-queries 300 --target kb --stage hnsw \\
          --find hnsw.ef_search --target-recall 0.95
      pgeval sweep --sample-queries 50 --target kb --stage hnsw \\
          --group-by tenant --find hnsw.ef_search --target-recall 0.95
      pgeval sweep --captured week49 --target kb --stage hnsw \\
          --find hnsw.ef_search --target-recall 0.95
      pgeval sweep ... --concurrency 8 --format csv > sweep.csv
    """
    # the other options (the query source's and the sweep's) go to the API under their names
    testset = queries.pop("testset")
    options.update(queries, k=k, target_recall=target_recall, build=build, checksum=not no_checksum)
    column = pg.group_column(target_name, group_by, group_queries)
    if column is not None:
        options.update(max_groups=max_groups, group_queries=group_queries)
        run_grouped(pg, testset, target_name, stage, column, fmt, plot, options)
        return
    if options.get("captured"):  # each shape as the application sent it
        run_shaped(pg, target_name, stage, fmt, plot, options)
        return
    progress = _SweepProgress(k, target_recall)
    try:
        res = pg.sweep(
            testset,
            target_name,
            stage,
            **options,
            on_point=progress.on_point,
            on_start=progress.on_start,
            on_warning=progress.on_warning,
            on_ground_truth=progress.on_ground_truth,
            on_find=progress.on_find if fmt == "table" else None,
        )
    finally:
        progress.stop()
    _show(pg, res, fmt, plot, stage, target_name, bool(build), progress.shown)


class _SweepProgress:
    """The sweep's progress on stderr: one unit a query (every point of every repetition, and
    exact search, the ground truth, once per repetition), the rows the exact ground truth read,
    each value a --find tried; warnings above the bar, remembered so that they are not printed
    twice."""

    def __init__(self, k: int, target_recall: float) -> None:
        self.k, self.target_recall = k, target_recall
        self.bar = progress_bar(transient=True)
        self.task: dict[str, Any] = {}
        self.shown: set[str] = set()
        self._above = warn_above(self.bar)

    def on_start(self, n_points: int, reps: int, n_queries: int) -> None:
        self.task.update(queries=n_queries, reps=set())
        self.bar.start()
        self.task["id"] = self.bar.add_task("sweep", total=(n_points + 1) * reps * n_queries)

    def on_point(self, point: Point, rep: int, how: str) -> None:
        task = self.task
        if "id" not in task:
            return
        first = rep not in task["reps"]
        task["reps"].add(rep)
        self.bar.update(
            task["id"],
            advance=task["queries"] * (2 if first else 1),
            description=f"sweep rep {rep} {point.label} ({how})",
        )

    def on_ground_truth(self, rows: int, rows_total: int | None) -> None:
        if not self.bar.live.is_started:
            self.bar.start()
        if "gt" not in self.task:
            self.task["gt"] = self.bar.add_task("exact ground truth (rows read)", total=rows_total)
        self.bar.update(self.task["gt"], completed=rows)

    def on_find(self, point: Point, recall: float | None) -> None:
        # the path as it goes: each value tried and its recall
        got = fixed(recall)
        mark = "" if recall is None else (" ✓" if reaches(recall, self.target_recall) else " ✗")
        self.bar.console.print(f"find {point.label}: recall@{self.k} {got}{mark}", soft_wrap=True)

    def on_warning(self, message: str) -> None:
        self.shown.add(message)
        self._above(message)

    def stop(self) -> None:
        if self.bar.live.is_started:
            self.bar.stop()


def _show(
    pg: Pgeval,
    res: SweepResult,
    fmt: str,
    plot: str | None,
    stage: str,
    target_name: str,
    built: bool,
    shown: set[str],
) -> None:
    """The sweep in ``fmt``, its plot, and the warnings not ``shown`` while it ran."""
    rows = point_rows(res.points, res.measures, res.k)
    if fmt == "json":
        click.echo(to_json(res.as_dict()))
    elif fmt == "csv":
        emit(rows, "csv")
        sys.stdout.flush()
    else:
        _print_table(res, rows, target_name, res.k, res.target_recall, built)
    if plot:
        out = pg.sweep_plot(res, plot, title=plot_title(res, stage, target_name))
        info(f"plot written to {out}")
    if fmt != "table":  # those printed while the sweep ran are not printed twice
        warn(*(w for w in res.warnings if w not in shown))


def _print_table(
    res: SweepResult,
    rows: list[dict[str, Any]],
    target_name: str,
    k: int,
    target_recall: float,
    built: bool,
) -> None:
    """The sweep as a table: what was measured, the ground truth, the points, each find, the
    recommendation."""
    echo_line(
        f"sweep {res.name}: {res.measured} measured, {res.reused} reused from earlier "
        f"sweeps, {res.kept} already in this sweep"
    )
    filters = ", ".join(f"{k}={v}" for k, v in res.filters.items()) or "none"
    if res.ground_truth:
        gt = res.ground_truth
        echo_line(
            f"exact ground truth: {gt['status']}"
            + (
                f" in {gt['compute_ms'] / 1000:.1f} s ({gt['method']})"
                if gt["status"] == "computed"
                else f" (computed {gt['computed_at']})"
            )
        )
    said = consistency_line(res.consistency)
    if said:
        echo_line(said)
    if not res.judged:
        echo_line(no_judgements_line(res.queries, k))
    echo_line(
        f"target {target_name} · test set {res.testset} · filters: {filters} · "
        f"{server_label(res.server)} · config {(res.config_hash or '')[:12]} · "
        f"recall@{k} against exact search, latency = client round trip, nearest rank"
    )
    cols = (
        [
            "label",
            f"index_recall@{k}",
            "index_recall_sd",
            "recall_p5",
            "recall_p10",
            "recall_min",
            "at_zero",
            "p50_ms",
            "p95_ms",
            "p95_sd",
            "p99_ms",
            "qps",
            "rows",
        ]
        + (["recall@10", "ndcg@10"] if res.judged else [])
        + ["pareto"]
    )
    wide_only = ["index_recall_sd", "recall_p10", "recall_min", "at_zero", "p50_ms", "p95_sd"]
    wide_only += ["p99_ms", "ndcg@10"]
    if built:
        cols[1:1] = ["build_ms", "index_mb"]
        wide_only.append("rows")
    used = sorted({r["index"] for r in rows if r["index"]})
    if len(used) > 1:  # the planner chose between the column's indexes: each point's named
        cols[1:1] = ["index"]
    elif used and not built:  # (a build's index is the scratch copy's, named by its label)
        click.echo(f"index measured: {used[0]} (every point)")
    emit(rows, "table", cols, wide_only=wide_only)
    for p in res.points:  # the points with queries the index answered with no neighbour
        if (p.get("recall_tail") or {}).get("at_zero"):
            echo_line(f"{p['label']}: {recall_text(p['recall_tail'])}")
    for found in res.finds:
        echo_line(find_line(found, k, target_recall, res.sampled))
    held = held_out_line(res.held_out, k)
    if held:
        echo_line(held)
    echo_line(recommendation_line(res))
    echo_line(f"details: pgeval stage-report {res.name}", err=True)
