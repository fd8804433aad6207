"""`pgeval diff RUN_A RUN_B`: what differs between the configurations of two runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ...api import vocabulary
from ..flags import format_option
from ..output import emit, printed_json, warn
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@format_option()
@pass_api
def diff(pg: Pgeval, run_a: str, run_b: str, fmt: str) -> None:
    """Show the fingerprint keys that differ between RUN_A and RUN_B (runs or experiments).

    \b
    Keys are dotted paths into the fingerprint (query_settings.hnsw.ef_search,
    indexes.docs_hnsw.options.m, data.checksum, ...). Keys of one variable are grouped: a change of
    content changes data.rows and data.checksum together. When more than one variable differs,
    a difference in the numbers cannot be attributed to one cause: a warning says so.

    \b
    Examples:
      pgeval diff exp1.hnsw.1 exp2.hnsw.1
      pgeval diff exp1 exp2 --format json
    """
    d = pg.diff(run_a, run_b)
    if not printed_json(fmt, d.as_dict()):
        if fmt == "table":
            click.echo(
                f"{run_a}: config {vocabulary.short_hash(d.hash_a)}   {run_b}: config {vocabulary.short_hash(d.hash_b)}"
            )
            if d.hash_a and d.hash_a == d.hash_b:
                click.echo("same configuration (identical config hash)")
            elif d.hash_a and d.hash_b:
                click.echo(f"{len(d.variables)} variable(s) differ: {', '.join(d.variables)}")
        emit(d.rows(), fmt, ["key", "a", "b", "variable"])
    warn(*d.warnings())
