"""`pgeval init`: create or upgrade schema pgeval."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..flags import format_option
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval


@click.command()
@format_option(choices=("table", "json"))
@pass_api
def init(pg: Pgeval, fmt: str) -> None:
    """Create or upgrade schema pgeval: extensions (vector; vectorscale and pg_textsearch when the
    server has them), tables by Alembic `upgrade head`, then the SQL API from sql/*.sql.
    Safe to run again: it changes nothing when everything is current.

    \b
    pgvector is not a trusted extension: on a server where the role running init is not a
    superuser, a superuser must first run, once in each database (the knowledge base's and
    the --results-dsn one): CREATE EXTENSION IF NOT EXISTS vector;  init says so, with that SQL,
    and exits 1 when it is missing.

    \b
    Examples:
      pgeval init
      pgeval --dsn "postgresql://owner@db.internal/kb" init
      pgeval --dsn "$KB_DSN" --results-dsn "$RESULTS_DSN" init --format json
    """
    from ..output import printed_json, warn

    report = pg.init()
    if printed_json(fmt, report.__dict__):
        return
    if report.kb_database is None:  # results beside the knowledge base: one database
        for name, version in report.extensions.items():
            click.echo(f'extension {name} {version} (database "{report.database}")')
    else:
        for name, version in report.kb_extensions.items():
            click.echo(
                f'extension {name} {version} (knowledge base, database "{report.kb_database}")'
            )
        for name, version in report.extensions.items():
            click.echo(f'extension {name} {version} (results, database "{report.database}")')
    for name in report.missing:
        warn(f"optional extension not available: {name}")
    for text in report.warnings:
        warn(text)
    before, after = report.revision_before, report.revision_after
    click.echo(
        f"schema pgeval at revision {after}"
        + ("" if before == after else f" (was {before or 'not installed'})")
    )
    click.echo(f"SQL API: {len(report.sql_files)} files applied")
