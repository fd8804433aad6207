"""`pgeval demo`: the whole flow on a real collection (Cranfield), no setup (above the CLI)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from ..cli.flags import OUT, QUERIES, REPEAT


@click.command()
@OUT.but(
    type=click.Path(file_okay=False),
    default="pgeval-demo",
    show_default=True,
    help="Folder for the demo's HTML report and sweep plot.",
)
@click.option(
    "--corpus",
    "corpus_name",
    type=click.Choice(["cranfield", "generated"]),
    default="cranfield",
    show_default=True,
    help="cranfield: 1,400 aeronautics abstracts, 225 graded queries, all-MiniLM-L6-v2 "
    "embeddings (shipped with pgeval; see docs/datasets.md); generated: a "
    "synthetic corpus with feature-hashing vectors (a quick tour: no sweep, no "
    "report).",
)
@QUERIES.but(
    type=click.IntRange(10, 2000),
    default=None,
    help="Queries to use: the first N of Cranfield, or N generated. [default: all "
    "225 of Cranfield; 80 generated]",
)
@REPEAT.but(type=click.IntRange(1, 10), default=1, help="Repetitions of each stage.")
@click.option(
    "--diskann/--no-diskann",
    default=True,
    show_default=True,
    help="Also build and measure a pgvectorscale DiskANN index.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to write the test set file (kept) [default: a temporary "
    "directory, removed at the end].",
)
@click.option(
    "--keep", is_flag=True, help="Keep the demo knowledge base (schema pgeval_demo) and its target."
)
@click.pass_context
def demo(
    ctx: click.Context,
    out: str,
    corpus_name: str,
    workdir: str | None,
    **options: Any,
) -> None:
    """Run the whole flow on the Cranfield collection: init, a table of 1,400 chunks with HNSW,
    DiskANN and BM25 indexes, its graded test set, `run pipeline` (exact, hnsw at ef_search=10,
    diskann, bm25, merge), `stage-report`, `metrics`, a short `sweep` with its plot and an HTML
    `report` in --out. Each step prints the command it runs and its time, so the output doubles
    as a tutorial. Uses the embedded server unless --dsn is given; metric definitions:
    docs/METRICS.md.

    \b
    Examples:
      pgeval demo
      pgeval demo --out demo-out --keep
      pgeval demo --corpus generated --queries 50 --no-diskann
    """
    from ..cli.output import people_width
    from .flow import tour  # the tour runs the commands: above the CLI, not in the API

    root = ctx.find_root()
    global_args = []
    for opt in ("dsn", "datadir", "results_dsn"):
        value = root.params.get(opt)
        if value:
            global_args += [f"--{opt.replace('_', '-')}", value]
    temp = None if workdir else tempfile.mkdtemp(prefix="pgeval-demo-")
    try:
        with people_width():  # the tour is only read: wrapped at 80 columns when piped
            tour(
                ctx.obj.db,
                global_args,
                Path(workdir or str(temp)),  # a new directory whenever workdir is not given
                corpus_name=corpus_name,
                out=Path(out) if corpus_name == "cranfield" else None,
                **options,  # the others under their names
            )
    finally:
        if temp:  # the test set is stored in pgeval; its file is not needed
            shutil.rmtree(temp, ignore_errors=True)
