"""`pgeval embed`: compute and store query embeddings once per (test set, embedder)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..flags import API_KEY_ENV, BASE_URL, DIMENSIONS, EMBEDDER, TESTSET, format_option
from ..output import emit, printed_json
from .common import pass_api

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.progress import Progress

    from ...api import Pgeval


def embedding_bar(
    testset: str | None,
) -> tuple[Progress, Callable[[str], None], Callable[[int], None]]:
    """A transient bar while ``testset``'s queries are embedded: the display and its callbacks
    (``on_start(label)``, ``on_batch(n)``)."""
    from rich.progress import Progress

    bar = Progress(transient=True)
    task: list = []

    def on_start(label: str) -> None:
        task.append(bar.add_task(f"embedding {testset} with {label}", total=None))

    return bar, on_start, lambda n: bar.advance(task[0], n)


@click.command()
@TESTSET.but(metavar=None, help="Test set whose queries to embed.")
@EMBEDDER.but("spec", help="precomputed | openai:MODEL | local:MODEL | numpy:FILE.npy")
@BASE_URL
@DIMENSIONS
@API_KEY_ENV
@click.option(
    "--batch-size",
    type=click.IntRange(1, 2048),
    default=None,
    help="Texts per request (openai default 10, local default 32).",
)
@click.option("--recompute", is_flag=True, help="Replace embeddings stored under the same label.")
@click.option("--list", "list_", is_flag=True, help="List stored query embeddings instead.")
@format_option(choices=("table", "json"))
@pass_api
def embed(
    pg: Pgeval,
    testset: str | None,
    spec: str | None,
    list_: bool,
    fmt: str,
    **options: Any,
) -> None:
    """Compute the query embeddings of a test set and store them (pgeval.query_embedding).

    Stored once per (test set, embedder label); `pgeval run pipeline --embedder SPEC` reuses them
    (and computes them when missing). The label and dimension are recorded in every run.

    \b
    Examples:
      pgeval embed --testset kb-v1 --embedder precomputed
      OPENAI_API_KEY=... pgeval embed --testset kb-v1 --embedder openai:text-embedding-3-small
      pgeval embed --testset kb-v1 --embedder openai:text-embedding-v4 --dimensions 1024 \\
          --base-url https://dashscope.aliyuncs.com/compatible-mode/v1 --api-key-env DASHSCOPE_API_KEY
      pgeval embed --testset cranfield --embedder numpy:queries.npy
      pgeval embed --list
    """
    if list_:
        emit(pg.embeddings(testset), fmt)
        return
    bar, on_start, on_batch = embedding_bar(testset)
    with bar:
        # the other options go to the API under their names
        rep = pg.embed(testset, spec, on_start=on_start, on_batch=on_batch, **options)
    if printed_json(fmt, rep.__dict__):
        return
    verb = "computed" if rep.computed else "already stored"
    click.echo(
        f"{rep.embedder}: {rep.queries} query embeddings of dimension {rep.dimension} "
        f"for test set '{rep.testset}' ({verb})"
    )
