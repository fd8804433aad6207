"""`pgeval db start|stop|status|uri`: the embedded server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ...core.errors import PgevalError
from ..flags import format_option
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
    """Say whether the embedded server runs, where, its URI, the size of its data directory
    and, when it runs, schema pgeval's revision, size and contents. Exit 0 when it runs, 3 when
    it is stopped (pg_ctl status's convention).

    \b
    Examples:
      pgeval db status
      pgeval db status --format json
    """
    from ...core import server
    from ..output import echo_line, printed_json

    datadir = _embedded(database)
    running = server.is_running(datadir)
    size, schema = _size(datadir), _schema(database) if running else None
    info = {
        "datadir": str(datadir),
        "running": running,
        "uri": server.uri(datadir) if running else None,
        "datadir_bytes": size,
        "schema": schema,
    }
    if not printed_json(fmt, info):
        from rich.filesize import decimal

        click.echo(f"{'running' if running else 'stopped'}: {datadir}")
        if running:
            click.echo(info["uri"])
        echo_line(f"data directory: {decimal(size)}")
        if running and schema is None:
            echo_line("schema pgeval: not installed (`pgeval init`)")
        elif schema:
            echo_line(
                f"schema pgeval: revision {schema['revision']}, {decimal(schema['bytes'])}; "
                f"{schema['testsets']} test set(s), {schema['runs']} run(s), "
                f"{schema['sweeps']} sweep(s)"
            )
    if not running:
        click.get_current_context().exit(3)


def _size(path: Path) -> int:
    """The bytes of the files under ``path`` (a file that goes while it is read: none)."""
    import os

    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _schema(database: Database) -> dict | None:
    """Schema pgeval's revision, size on disk and how many test sets, runs and sweeps it
    holds; None when it is not installed."""
    from ...core.install import current_revision

    with database.connect(results=False, autocommit=True) as conn:  # this server's own
        revision = current_revision(conn)
        if revision is None:
            return None
        row = conn.execute(
            "SELECT (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'pgeval' AND c.relkind IN ('r', 'm')), "
            "(SELECT count(*) FROM pgeval.testset), (SELECT count(*) FROM pgeval.run), "
            "(SELECT count(*) FROM pgeval.sweep)"
        ).fetchone()
    return {
        "revision": revision,
        "bytes": int(row[0]),
        "testsets": row[1],
        "runs": row[2],
        "sweeps": row[3],
    }


@db.command()
@click.option(
    "--keywords",
    is_flag=True,
    help="Print the libpq keyword form (host=... port=... user=... dbname=...): the fields a "
    "tool's connection dialog asks for.",
)
@pass_db
def uri(database: Database, keywords: bool) -> None:
    """Print the connection URI (last line of output), starting the server if needed. A
    password in a --dsn / PGEVAL_DSN is shown as ***.

    The embedded server listens on a Unix socket only, in its data directory (host is that
    directory, port the socket's number): no TCP port, as its trust authentication would let
    every local user in. A tool that takes a host and a port and accepts a socket directory as
    the host (psql, pgAdmin, any libpq client) connects with --keywords; one that cannot use a
    socket (JDBC tools) needs a server of your own, given with --dsn.

    \b
    Examples:
      pgeval db uri
      psql "$(pgeval db uri | tail -1)"
      pgeval db uri --keywords
    """
    from ...core.masking import mask

    uri = database.uri()
    if keywords:
        uri = _keywords(database, uri)
    click.echo(mask(uri))


def _keywords(database: Database, uri: str) -> str:
    """``uri`` as libpq keywords, the embedded server's port (its socket's number) added."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    fields = {k: str(v) for k, v in conninfo_to_dict(uri).items() if v not in (None, "")}
    if database.embedded and "port" not in fields and database.datadir is not None:
        pid = database.datadir / "postmaster.pid"
        lines = pid.read_text().splitlines() if pid.exists() else []
        if len(lines) > 3 and lines[3].strip().isdigit():
            fields["port"] = lines[3].strip()
    order = ["host", "port", "user", "dbname"]
    ordered = {k: fields[k] for k in order if k in fields}
    return make_conninfo(**ordered, **{k: v for k, v in fields.items() if k not in ordered})
