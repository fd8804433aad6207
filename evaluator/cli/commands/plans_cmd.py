"""`pgeval plans RUN`: EXPLAIN (ANALYZE, BUFFERS) of the stage that served each flagged query."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..flags import format_option
from ..output import emit, info, to_json
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval


@click.command()
@click.argument("run")
@click.option("--refresh", is_flag=True, help="Capture the plans again even when stored.")
@click.option(
    "--no-capture",
    is_flag=True,
    help="Only show plans already stored (no query is run against the knowledge base).",
)
@click.option("--full", is_flag=True, help="Print each plan's full JSON (table format).")
@format_option(choices=("table", "json", "jsonl"))
@pass_api
def plans(pg: Pgeval, run: str, refresh: bool, no_capture: bool, full: bool, fmt: str) -> None:
    """Query plans of RUN's low-recall (Recall@K < 0.3) and poor-ranking (nDCG@10 < 0.5) queries.

    \b
    For each flagged query (see `pgeval metrics RUN --flagged`) the statement of the vector
    stage that served it is run again under EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON), in the
    stage's own READ ONLY transaction with the run's recorded settings, and stored in
    pgeval.query_plan; for a merge/rerank run, the plans of the vector stages of the same
    experiment and repetition are captured. Shown: access path (which index, or a sequential
    scan), rows, execution time, shared buffer hits and reads. When the run forced the planner
    (an enable_* setting off, e.g. --set hnsw:enable_sort=off), the plan the planner chooses
    without those settings (EXPLAIN only) is shown next to it (chosen_access).

    \b
    Examples:
      pgeval plans exp1.hnsw.1
      pgeval plans exp1.rerank.1 --format json
      pgeval plans exp1.hnsw.1 --no-capture --full
    """
    done, rows = pg.plans(run, capture=not no_capture, refresh=refresh)
    if done is not None:
        if fmt == "table":
            info(
                f"{done['flagged_queries']} flagged queries; plans captured {done['captured']}, "
                f"already stored {done['kept']}"
                + (
                    f", {done['no_embedding']} without a stored embedding"
                    if done["no_embedding"]
                    else ""
                )
                + (
                    f" (stages: {', '.join(done['runs'])})"
                    if done["runs"]
                    else " (no vector stage to explain)"
                )
            )
    if fmt in ("json", "jsonl"):
        emit(rows, fmt)
        return
    if not rows:
        click.echo(f"run {run}: no flagged query")
        return
    emit(
        [{k: v for k, v in r.items() if k != "plan"} for r in rows],
        "table",
        ["query_id", "flag", "value", "stage_run", "access"]
        + (["forced_by", "chosen_access"] if any(r.get("chosen_access") for r in rows) else [])
        + ["rows", "execution_ms", "shared_hit", "shared_read"],
        title=f"{run}: flagged queries and their plans",
    )
    if full:
        for r in rows:
            if r["plan"]:
                click.echo(f"-- {r['query_id']} ({r['stage_run']})")
                click.echo(to_json(r["plan"]["explain"]))
