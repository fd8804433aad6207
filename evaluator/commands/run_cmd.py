"""`pgeval run ...`: runs of a test set — pipeline (stage runners), import, export, list, delete."""

from __future__ import annotations

import sys

import click

from ..output import emit, format_option, warn
from .common import pass_db


@click.group()
def run():
    """Runs: ranked lists per query, produced by a pipeline stage or imported from a file."""


@run.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--testset", required=True, help="Test set the run answers (see `pgeval testset list`).")
@click.option("--name", required=True, help="Name of the new run.")
@click.option("--format", "fmt", type=click.Choice(["trec", "jsonl"]), default=None,
              help="trec: 'qid Q0 chunk rank score tag' lines, ranked by score descending, ties by "
                   "chunk id descending; jsonl: {query_id, ranked: [{chunk_id, score}]} in the "
                   "given order. [default: by file extension]")
@click.option("--replace", is_flag=True, help="Replace an existing run of the same name.")
@pass_db
def import_(database, file, testset, name, fmt, replace):
    """Import a ranked list produced elsewhere (a live RAG service, ranx, trec tools).

    \b
    Query ids the test set does not know are counted and reported, not stored.
    A chunk listed twice for one query is an error naming the query, the chunk and both lines.

    \b
    Example:
      pgeval run import bm25.trec --format trec --testset kb-v1 --name bm25-baseline
    """
    from ..runs import import_run

    with database.connect() as conn:
        rep = import_run(conn, file, testset, name, fmt, replace=replace)
    if rep.unknown_queries:
        warn(f"{rep.unknown_queries} query ids are not in test set '{testset}' and were skipped: "
             + ", ".join(rep.unknown_query_ids) + (" ..." if rep.unknown_queries > 20 else ""))
    if rep.valid_without_result:
        warn(f"{rep.valid_without_result} valid queries have no result in this run (they score 0)")
    click.echo(f"imported run '{rep.name}': {rep.rows} results for {rep.queries} queries "
               f"(test set {rep.testset})")


@run.command()
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["trec", "jsonl"]), default="trec",
              show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of standard output.")
@pass_db
def export(database, name, fmt, out):
    """Write a run as a TREC run file or JSONL (for cross-checks with trec_eval or ranx)."""
    from ..runs import export_run

    with database.connect(autocommit=True) as conn:
        if out:
            tmp = out + ".part"
            with open(tmp, "w", encoding="utf-8") as fh:
                n = export_run(conn, name, fmt, fh)
            import os

            os.replace(tmp, out)
            click.echo(f"wrote {n} lines to {out}", err=True)
        else:
            export_run(conn, name, fmt, sys.stdout)
            sys.stdout.flush()


@run.command("list")
@click.option("--testset", default=None, help="Only runs of this test set.")
@click.option("--experiment", default=None, help="Only runs of this experiment.")
@format_option()
@pass_db
def list_(database, testset, experiment, fmt):
    """List runs with their test set, stage, status and config hash."""
    from ..runs import list_runs

    with database.connect(autocommit=True) as conn:
        rows = list_runs(conn, testset, experiment)
    emit(rows, fmt, ["run", "testset", "stage", "experiment", "repetition", "status", "queries",
                     "config_hash", "started_at"])


@run.command()
@click.argument("name")
@pass_db
def delete(database, name):
    """Delete a run and its results."""
    from ..runs import delete_run

    with database.connect() as conn:
        delete_run(conn, name)
    click.echo(f"deleted run '{name}'")
