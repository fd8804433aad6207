"""`pgeval db start|stop|status|uri`: the embedded server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ...core.errors import PgevalError
from ..output import format_option
from .common import pass_db

if TYPE_CHECKING:
    from pathlib import Path

    from ...core.db import Database


def _embedded(db: Database) -> Path:
    if not db.embedded:
        raise PgevalError(
            f"`pgeval db` manages the embedded server; this command is set to use {db.describe()}"
        )
    assert db.datadir is not None  # resolve() gives the embedded server a datadir
    return db.datadir


@click.group()
def db() -> None:
    """Manage the embedded PostgreSQL server (PostgreSQL 18, pgvector, pgvectorscale,
    pg_textsearch). It keeps running between commands until `pgeval db stop`.

    \b
    Examples:
      pgeval db status
      psql "$(pgeval db uri)"
      pgeval db stop
    """


@db.command()
@pass_db
def start(database: Database) -> None:
    """Start the embedded server (creating its data directory on first use).

    \b
    Examples:
      pgeval db start
      pgeval --datadir /srv/pgeval db start
    """
    from ...core import server

    datadir = _embedded(database)
    was = server.is_running(datadir)
    uri = server.start(datadir)
    click.echo(f"{'already running' if was else 'started'}: {datadir}")
    click.echo(uri)


@db.command()
@pass_db
def stop(database: Database) -> None:
    """Stop the embedded server (the data directory and your runs stay).

    \b
    Examples:
      pgeval db stop
      pgeval --datadir /srv/pgeval db stop
    """
    from ...core import server

    datadir = _embedded(database)
    click.echo(f"stopped: {datadir}" if server.stop(datadir) else f"not running: {datadir}")


@db.command()
@format_option(choices=("table", "json"))
@pass_db
def status(database: Database, fmt: str) -> None:
    """Say whether the embedded server runs, where, and its URI. Exit 0 when it runs, 3 when it
    is stopped (pg_ctl status's convention).

    \b
    Examples:
      pgeval db status
      pgeval db status --format json
    """
    from ...core import server
    from ..output import to_json

    datadir = _embedded(database)
    running = server.is_running(datadir)
    info = {
        "datadir": str(datadir),
        "running": running,
        "uri": server.uri(datadir) if running else None,
    }
    if fmt == "json":
        click.echo(to_json(info))
    else:
        click.echo(f"{'running' if running else 'stopped'}: {datadir}")
        if running:
            click.echo(info["uri"])
    if not running:
        click.get_current_context().exit(3)


@db.command()
@pass_db
def uri(database: Database) -> None:
    """Print the connection URI (last line of output), starting the server if needed. A
    password in a --dsn / PGEVAL_DSN is shown as ***.

    \b
    Examples:
      pgeval db uri
      psql "$(pgeval db uri | tail -1)"
    """
    from ...core.masking import mask

    click.echo(mask(database.uri()))
