"""`pgeval run ...`: runs of a test set — pipeline (stage runners), import, export, list, delete."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ...api.vocabulary import PIPELINE_DEFAULTS, kinds_listing
from ..flags import (
    API_KEY_ENV,
    BASE_URL,
    DEPTH,
    DIMENSIONS,
    EMBEDDER,
    FORMAT,
    GROUPING,
    ISOLATE_INDEX,
    NAME,
    NO_CHECKSUM,
    OUT,
    QUERY_SOURCE,
    REPEAT,
    REPLACE,
    SET,
    STATEMENT_TIMEOUT,
    TARGET,
    TESTSET,
    format_option,
    formats,
)
from ..option_groups import GroupedCommand, group, opt
from ..output import FORMATS, emit, printed_json, warn
from .common import OneTask, ProgressBar, pass_api, progress_bar, warn_above

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import GroupPipelineResult, PipelineResult

R = TypeVar("R")


@click.group()
def run() -> None:
    """Runs: ranked lists per query, produced by a pipeline stage or imported from a file.

    \b
    Examples:
      pgeval run list
      pgeval run pipeline --help
    """


@run.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@TESTSET.but(
    required=True,
    metavar=None,
    help="Test set the run answers (see `pgeval testset list`).",
)
@NAME.but(required=True, help="Name of the new run.")
@FORMAT.but(
    type=click.Choice(["trec", "jsonl"]),
    default=None,
    show_default=False,
    help="trec: 'qid Q0 chunk rank score tag' lines, ranked by score descending, ties by "
    "chunk id descending; jsonl: {query_id, ranked: [{chunk_id, score}]} in the "
    "given order. [default: by file extension]",
)
@REPLACE
@click.option(
    "--score",
    type=click.Choice(["distance", "similarity"]),
    default=None,
    help="Which way the file's scores point: distance (lower is better, as a vector search's) "
    "or similarity. [default: the file's: a JSONL line's \"score\" key, else the way its "
    "scores go down the lists; TREC: similarity, or ranks when every score is -rank]",
)
@pass_api
def import_(
    pg: Pgeval,
    file: str,
    testset: str,
    name: str,
    fmt: str | None,
    replace: bool,
    score: str | None,
) -> None:
    """Import a ranked list produced elsewhere (a live RAG service, ranx, trec tools).

    \b
    Query ids the test set does not know are counted and reported, not stored.
    A chunk listed twice for one query is an error naming the query, the chunk and both lines.
    The scores' direction is stored with the run: score fusion (minmax, zscore) negates
    distances, and refuses ranks and scores of unknown direction (docs/pipeline.md).

    \b
    Examples:
      pgeval run import bm25.trec --format trec --testset kb-v1 --name bm25-baseline
      pgeval run import vector.jsonl --testset kb-v1 --name vec --score distance
    """
    from pathlib import Path

    with OneTask(unit="bytes") as bar:

        def on_progress(done: int, total: int, phase: str) -> None:
            what = f"import {Path(file).name}" + (
                "" if phase == "reading" else " (ranking, storing)"
            )
            bar.show(what, done, total)

        rep = pg.import_run(
            file, testset, name, format=fmt, replace=replace, on_progress=on_progress, score=score
        )
    if rep.unknown_queries:
        warn(
            f"{rep.unknown_queries} query ids are not in test set '{testset}' and were skipped: "
            + ", ".join(rep.unknown_query_ids)
            + (" ..." if rep.unknown_queries > 20 else "")
        )
    if rep.valid_without_result:
        warn(f"{rep.valid_without_result} valid queries have no result in this run (they score 0)")
    if rep.lines_with_extra_text:
        warn(
            f"{rep.lines_with_extra_text} lines have text after the sixth field; it was ignored, "
            "as trec_eval ignores it"
        )
    if rep.score is None:
        warn(
            "the direction of the scores is unknown (no --score, and they neither fall nor rise "
            "down every list): score fusion refuses this run; rrf reads its ranks"
        )
    scores = {None: "unknown", "rank": "ranks"}.get(rep.score, rep.score)
    click.echo(
        f"imported run '{rep.name}': {rep.rows} results for {rep.queries} queries "
        f"(test set {rep.testset}; scores: {scores})"
    )


@run.command()
@click.argument("name")
@FORMAT.but(
    type=click.Choice(["trec", "jsonl"]),
    default="trec",
    help="trec: 'qid Q0 chunk rank score tag' lines; jsonl: "
    "{query_id, ranked: [{chunk_id, score}]} a line.",
)
@OUT
@pass_api
def export(pg: Pgeval, name: str, fmt: str, out: str | None) -> None:
    """Write a run as a TREC run file or JSONL (for cross-checks with trec_eval or ranx).

    \b
    Examples:
      pgeval run export bm25-baseline --format trec > bm25.trec
      pgeval run export first.merge.1 --format jsonl --out first.jsonl
    """
    n = pg.export_run(name, fmt, out, stream=sys.stdout, on_note=warn)
    if out:
        click.echo(f"wrote {n} lines to {out}", err=True)
    else:
        sys.stdout.flush()


_EXPERIMENT = opt("--experiment", default=None, help="Only runs of this experiment.")


@run.command("list")
@TESTSET.but(metavar=None, help="Only runs of this test set.")
@_EXPERIMENT
@format_option()
@pass_api
def list_(pg: Pgeval, testset: str | None, experiment: str | None, fmt: str) -> None:
    """List runs with their test set, stage, status and config hash.

    \b
    status: complete; running; failed (the stage raised); interrupted (stopped
    by Ctrl-C, or its process on this host is gone). `pgeval run resume
    EXPERIMENT` continues a failed or interrupted run.

    \b
    Examples:
      pgeval run list
      pgeval run list --testset kb-v1 --format json
      pgeval run list --experiment first
    """
    rows = pg.runs(testset, experiment)
    emit(
        rows,
        fmt,
        [
            "run",
            "testset",
            "stage",
            "experiment",
            "repetition",
            "status",
            "queries",
            "config_hash",
            "started_at",
        ],
        wide_only=["testset", "experiment", "repetition", "started_at"],
    )


@run.command()
@click.argument("name", required=False)
@_EXPERIMENT.but(
    metavar="NAME", help="Delete this experiment and every run of it instead (not with NAME)."
)
@format_option(choices=("table", "json"))
@pass_api
def delete(pg: Pgeval, name: str | None, experiment: str | None, fmt: str) -> None:
    """Delete a run and its results, or with --experiment an experiment and all its runs.

    A stage run of an experiment (`run pipeline`, `sweep`) leaves that experiment incomplete:
    the experiment is marked failed, so that `pgeval stage-report` refuses it (its chain would
    differ between repetitions) until `pgeval run resume EXPERIMENT` has measured the stage
    again; a sweep point measured by the run leaves its sweep, which measures it anew when run
    again. Deleting every run of an experiment leaves an experiment without runs.

    --experiment NAME deletes the experiment, its runs and their results at once (refused
    while one of its runs is being written); a sweep that measured one of them is marked
    interrupted.

    \b
    Examples:
      pgeval run delete bm25-baseline
      pgeval run delete --experiment merge-k30 --format json
    """
    if (name is None) == (experiment is None):
        raise click.UsageError("give a run NAME or --experiment NAME (one of them)")
    if experiment is not None:
        _delete_experiment(pg, experiment, fmt)
        return
    assert name is not None
    owner = pg.delete_run(name)
    if printed_json(fmt, {"run": name, "experiment_incomplete": owner and owner[0]}):
        return
    click.echo(f"deleted run '{name}'")
    if owner is not None:
        experiment, sweep = owner
        again = (
            f"run the same `pgeval sweep --name {experiment}` again"
            if sweep
            else f"`pgeval run resume {experiment}`"
        )
        warn(
            f"experiment '{experiment}' is now incomplete (stage-report refuses it): {again} "
            "measures the deleted stage again"
        )


def _delete_experiment(pg: Pgeval, experiment: str, fmt: str) -> None:
    gone = pg.delete_experiment_runs(experiment)
    if printed_json(fmt, gone):
        return
    click.echo(f"deleted experiment '{experiment}' and its {len(gone['runs'])} runs")
    for sweep in gone["sweeps_interrupted"]:
        warn(f"sweep '{sweep}' lost points measured by these runs: it is marked interrupted")


class _StageBar:
    """A rich progress task per stage and repetition (stderr), implementing stages.base.Progress."""

    def __init__(self, bar: ProgressBar, repeat: int | str, stage: str, rep: int) -> None:
        self.bar, self.label = bar, f"rep {rep}/{repeat} {stage}"
        self.task: Any = None  # the bar's id of this stage's task, once started

    def start(self, description: str, total: int) -> None:
        if not self.bar.live.is_started:  # started on the first stage: an error before it
            self.bar.start()  # (bad --set, unknown test set) prints one line only
        self.task = self.bar.add_task(f"{self.label}", total=total)

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.bar.advance(self.task, n)

    def finish(self) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=self.bar.tasks[self.task].total or 0)


_PIPELINE = group(
    "Pipeline",
    TARGET.but(
        "target",
        required=False,
        metavar=None,
        default=None,
        help="Knowledge-base target (see `pgeval target list`); "
        "required by vector, keyword and rerank stages.",
    ),
    opt(
        "--stages",
        required=True,
        metavar="LIST",
        help=f"Stages in order: {kinds_listing()} (a live API; "
        "docs/weknora-service.md) (NAME=KIND runs a kind under another name, e.g. "
        "hnsw40=hnsw).",
    ),
    SET.but(
        help="Query-time setting applied with SET LOCAL to the stages it concerns "
        "(hnsw.* to hnsw, diskann.* to diskann, core settings to all); validated "
        "against pg_settings. Repeatable. STAGE:GUC=VALUE applies to that stage "
        "alone (e.g. hnsw:enable_sort=off)."
    ),
    opt(
        "--opt",
        "options",
        multiple=True,
        metavar="STAGE:KEY=VALUE",
        help="A stage option, e.g. hnsw:index=NAME, merge:k=60, rerank:top_n=50, "
        "import:file=run.trec. Repeatable.",
    ),
    DEPTH.but(
        default=PIPELINE_DEFAULTS.depth,
        show_default=True,
        help="Chunks stored per query and stage.",
    ),
    REPEAT.but(
        type=click.IntRange(1, 1000),
        default=PIPELINE_DEFAULTS.repeat,
        help="Repetitions of the whole pipeline (means and spread are reported).",
    ),
    opt(
        "--reranker",
        default=None,
        metavar="SPEC",
        help="Reranker for rerank stages (same as --opt rerank:reranker=SPEC).",
    ),
    NAME.but(
        help="Experiment name [default: TESTSET-TARGET-TIMESTAMP]; "
        "runs are named NAME.STAGE.REPETITION."
    ),
    opt(
        "--batch",
        is_flag=True,
        help="Run each vector stage as one set-based statement "
        "(LATERAL over the queries): faster, no per-query latency.",
    ),
    opt(
        "--server-timing",
        is_flag=True,
        help="Also record server execution time per query "
        "(EXPLAIN ANALYZE, a second execution of each query).",
    ),
)
_EMBEDDINGS = group(
    "Query embeddings",
    EMBEDDER.but(
        "embedder",
        help="Query embeddings: precomputed | openai:MODEL | local:MODEL | numpy:FILE.npy "
        "(computed once and stored when missing). [default: precomputed]",
    ),
    BASE_URL.but(metavar=None, help="openai embedder: endpoint base URL."),
    DIMENSIONS.but(help="openai embedder: requested dimension."),
    API_KEY_ENV.but(metavar=None, help="openai embedder: variable holding the key."),
)
_GROUPING = GROUPING.but(
    "--group-by",
    help="Run the pipeline once per group of this column (a tenant), each searched as the "
    "application scopes it (WHERE COLUMN = value), --sample-queries N spread over the groups "
    "(--group-queries: per group); recall per group and ANN stage, worst first. [default: the "
    "target's --group-by, else none]",
)


@run.command(cls=GroupedCommand)
@QUERY_SOURCE
@_PIPELINE
@_EMBEDDINGS
@_GROUPING
@group("Measuring", ISOLATE_INDEX, STATEMENT_TIMEOUT, NO_CHECKSUM)
@group("Output", *formats(FORMATS))
@pass_api
def pipeline(
    pg: Pgeval,
    queries: dict[str, Any],
    target: str | None,
    stages: str,
    repeat: int,
    group_by: str | None,
    max_groups: int,
    group_queries: int | None,
    isolate_index: bool,
    no_checksum: bool,
    fmt: str,
    **given: Any,
) -> None:
    """Run retrieval stages against the knowledge base and store every ranked list.

    One experiment = the stages in order under one configuration (recorded in
    pgeval.experiment.config), repeated --repeat times. Vector stages run one prepared
    statement per query in a READ ONLY transaction with their settings applied by SET LOCAL,
    check with EXPLAIN that the intended index serves the plan (exact: that none does), and
    store the top --depth chunks with their exact distance and the client round-trip latency.

    \b
    Examples:
      pgeval run pipeline --testset kb-v1 --target kb --stages exact,hnsw \\
          --set hnsw.ef_search=100 --depth 100 --repeat 3 --name kb-ef100
      pgeval run pipeline --testset kb-v1 --target kb --stages exact,hnsw,bm25,merge,rerank \\
          --embedder openai:text-embedding-v4 --dimensions 1024 --reranker http:...
      pgeval run pipeline --testset cran --target cran --stages exact,diskann \\
          --set diskann.query_rescore=100 --batch --repeat 1
      pgeval run pipeline --sample-queries 300 --target kb --stages exact,hnsw \\
          --set hnsw.ef_search=40
      pgeval run pipeline --sample-queries 50 --target kb --stages exact,hnsw \\
          --group-by tenant
    Query vectors without judgements (--sample-queries, --queries-sql, --queries-file): the
    exact stage takes its lists from the stored ground truth (computed once per query set and
    target, reused until the data changes; --opt exact:ground_truth=off runs it per query).
    Then: pgeval stage-report NAME
    """
    if isolate_index:
        warn(
            "--isolate-index drops the other vector indexes inside each ANN stage's transaction: "
            "the table is locked (ACCESS EXCLUSIVE) until the stage ends and rolls back"
        )
    column = pg.group_column(target, group_by, group_queries)
    run: Callable[..., PipelineResult | GroupPipelineResult] = pg.run_pipeline
    if column is not None:  # one pipeline per group: run_groups_view prints them
        from .run_groups_view import grouped

        run = grouped(pg, column, (max_groups, group_queries), fmt)
    res = _with_progress(
        lambda **kw: run(
            stages=stages,
            **queries,
            **given,  # the other options under their names
            target=target,
            repeat=repeat,
            isolate_index=isolate_index,
            checksum=not no_checksum,
            **kw,
        ),
        repeat,
    )
    if column is None:  # run is pg.run_pipeline
        _show(cast("PipelineResult", res), fmt)


def _with_progress(call: Callable[..., R], repeat: int | None) -> R:
    """``call(progress_factory=..., on_warning=...)`` with rich progress bars on stderr (started
    with the first stage, so an early error prints one line only)."""
    bar = progress_bar(transient=False)
    try:
        return call(
            progress_factory=lambda s, rep: _StageBar(bar, repeat or "?", s, rep),
            on_warning=warn_above(bar),
        )
    finally:
        if bar.live.is_started:
            bar.stop()


def _show(res: PipelineResult, fmt: str, extra_columns: Sequence[str] = ()) -> None:
    meta = {"experiment": res.experiment, "config_hash": res.config_hash, "warnings": res.warnings}
    emit(
        res.runs,
        fmt,
        [
            "run",
            "stage",
            "kind",
            "repetition",
            *extra_columns,
            "queries",
            "results",
            "p50_ms",
            "p95_ms",
            "min_rows_returned",
        ],
        wide_only=["stage", "kind", "repetition", "results"],
        meta=meta
        if fmt == "json"
        else {"experiment": res.experiment, "config_hash": res.config_hash[:12]},
    )
    if fmt == "table":
        named = {r["stage"]: r["kind"] for r in res.runs if r["kind"] not in (r["stage"], None)}
        for stage, kind in named.items():  # e.g. bm25 (ts_rank_cd fallback), hnsw40 = hnsw
            click.echo(f"stage {stage}: {kind}")
        click.echo(f"next: pgeval stage-report {res.experiment}", err=True)


@run.command()
@click.argument("name")
@STATEMENT_TIMEOUT.but(
    default=None,
    show_default=False,
    help="Replace the recorded --statement-timeout (e.g. after a timeout stopped the "
    "experiment); nothing else of the configuration can change.",
)
@format_option()
@pass_api
def resume(pg: Pgeval, name: str, statement_timeout: str | None, fmt: str) -> None:
    """Finish an experiment interrupted by Ctrl-C, a killed process or a server restart.

    NAME is the experiment (or one of its runs). Complete runs are kept; an interrupted run
    continues with exactly the queries it has not written (none twice, none left out); stages
    not started yet run. The configuration recorded with the experiment is used (stages,
    settings, options, depth, target, embeddings), and resume refuses when the configuration
    fingerprint changed (index, settings, server, table content, test set): the runs would mix
    two configurations. Refused too while another live pgeval process runs the experiment.

    \b
    Examples:
      pgeval run resume kb-ef100
      pgeval run resume kb-ef100.hnsw.2 --statement-timeout 30min
    """
    res = _with_progress(
        lambda **kw: pg.resume(name, statement_timeout=statement_timeout, **kw),
        None,
    )
    _show(res, fmt, ("action",))
