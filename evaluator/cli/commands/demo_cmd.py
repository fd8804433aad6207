"""`pgeval demo`: the whole flow on a generated knowledge base, no setup."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import click


@click.command()
@click.option("--queries", type=click.IntRange(10, 2000), default=80, show_default=True,
              help="Number of generated queries.")
@click.option("--repeat", type=click.IntRange(1, 10), default=1, show_default=True,
              help="Repetitions of each stage.")
@click.option("--diskann/--no-diskann", default=True, show_default=True,
              help="Also build and measure a pgvectorscale DiskANN index.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Where to write the generated test set (kept) [default: a temporary "
                   "directory, removed at the end].")
@click.option("--keep", is_flag=True, help="Keep the demo knowledge base (schema pgeval_demo) "
              "and its target.")
@click.pass_context
def demo(ctx, queries, repeat, diskann, workdir, keep):
    """Run the whole flow on a generated knowledge base: init, a table of 1,000 chunks with
    HNSW, DiskANN and BM25 indexes, a graded test set, `run pipeline` (exact, hnsw, diskann,
    bm25, merge), `stage-report` and `metrics`. Each step prints the command it runs, so the
    output doubles as a tutorial. Uses the embedded server unless --dsn is given."""
    from ...demo.flow import tour

    root = ctx.find_root()
    global_args = []
    for opt in ("dsn", "datadir", "results_dsn"):
        value = root.params.get(opt)
        if value:
            global_args += [f"--{opt.replace('_', '-')}", value]
    database = ctx.obj.db
    temp = None if workdir else tempfile.mkdtemp(prefix="pgeval-demo-")
    try:
        tour(database, global_args, Path(workdir or temp), queries=queries, repeat=repeat,
             diskann=diskann, keep=keep)
    finally:
        if temp:          # the generated test set is stored in pgeval; its file is not needed
            shutil.rmtree(temp, ignore_errors=True)
