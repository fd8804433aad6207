"""`pgeval demo`: the whole flow on a generated knowledge base, no setup."""

from __future__ import annotations

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
              help="Where to write the generated test set [default: a temporary directory].")
@click.option("--keep", is_flag=True, help="Keep the demo knowledge base (schema pgeval_demo).")
@click.pass_context
def demo(ctx, queries, repeat, diskann, workdir, keep):
    """Run the whole flow on a generated knowledge base: init, a table of 1,000 chunks with
    HNSW, DiskANN and BM25 indexes, a graded test set, `run pipeline` (exact, hnsw, diskann,
    bm25, merge), `stage-report` and `metrics`. Each step prints the command it runs, so the
    output doubles as a tutorial. Uses the embedded server unless --dsn is given."""
    from ..demo.flow import tour

    root = ctx.find_root()
    global_args = []
    for opt in ("dsn", "datadir", "results_dsn"):
        value = root.params.get(opt)
        if value:
            global_args += [f"--{opt.replace('_', '-')}", value]
    database = ctx.obj.db
    tour(database, global_args, Path(workdir or tempfile.mkdtemp(prefix="pgeval-demo-")),
         queries=queries, repeat=repeat, diskann=diskann, keep=keep)
