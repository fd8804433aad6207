"""Connections: which database pgeval talks to, and how passwords are kept out of every message.

Resolution order: ``--dsn``, else ``PGEVAL_DSN``, else the libpq ``PG*`` variables when
any is set, else the embedded server (started on demand). Results may live in another database
(``--results-dsn`` / ``PGEVAL_RESULTS_DSN``); by default they live beside the knowledge base.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import DatabaseError, first_line
from .masking import mask as redact
from .masking import remember

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sqlalchemy.engine import Engine

LIBPQ_VARS = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")

__all__ = ["Database", "redact", "sqlalchemy_engine", "transaction"]


@dataclass
class Database:
    """Where to connect. ``dsn`` None means the embedded server in ``datadir``."""

    dsn: str | None = None
    datadir: Path | None = None
    results_dsn: str | None = None
    source: str = "embedded"

    def __post_init__(self) -> None:
        remember(self.dsn, self.results_dsn)  # so that a driver's message quoting them is masked

    @classmethod
    def resolve(
        cls, dsn: str | None = None, datadir: str | None = None, results_dsn: str | None = None
    ) -> Database:
        from . import server

        results = results_dsn or os.environ.get("PGEVAL_RESULTS_DSN") or None
        if dsn:
            return cls(dsn=dsn, results_dsn=results, source="--dsn")
        if os.environ.get("PGEVAL_DSN"):
            return cls(dsn=os.environ["PGEVAL_DSN"], results_dsn=results, source="PGEVAL_DSN")
        if any(os.environ.get(v) for v in LIBPQ_VARS):
            return cls(dsn="", results_dsn=results, source="libpq PG* variables")
        return cls(dsn=None, datadir=server.resolve_datadir(datadir), results_dsn=results)

    @property
    def embedded(self) -> bool:
        return self.dsn is None

    def uri(self) -> str:
        """The knowledge-base connection string (starting the embedded server when needed)."""
        if self.dsn is not None:
            return self.dsn
        from . import server

        assert self.datadir is not None, "resolve() gives the embedded server a datadir"
        return server.start(self.datadir)

    def results_uri(self) -> str:
        return self.results_dsn or self.uri()

    def connect(
        self,
        *,
        results: bool = True,
        autocommit: bool = False,
        read_only: bool = False,
        **kwargs: Any,
    ) -> Any:
        """A psycopg connection. ``results=True`` (the default) connects where schema pgeval lives.
        ``read_only=True``: every transaction of the session is READ ONLY (how pgeval reads a
        knowledge base: a view or function that would write fails instead), and nothing is set
        on the server session (:mod:`evaluator.core.pool_safe`: safe behind a pooler)."""
        import psycopg

        from .pool_safe import PoolSafeConnection

        target = self.results_uri() if results else self.uri()
        # text travels as UTF-8 whatever the database's encoding (the server converts): the
        # arrays pgeval encodes itself for COPY (evaluator/stages/list_arrays.py) are UTF-8
        kwargs.setdefault("client_encoding", "UTF8")
        try:
            conn = PoolSafeConnection.connect(target, autocommit=autocommit, **kwargs)
        except psycopg.Error as exc:  # unreachable, refused, or a DSN libpq cannot parse
            raise DatabaseError(
                f"cannot connect to {redact(target) or 'the libpq default'}: "
                f"{redact(first_line(exc))}"
            ) from None
        if read_only:  # BEGIN READ ONLY with each transaction: nothing set on the session
            conn.read_only = True
        return conn

    def describe(self) -> str:
        if self.embedded:
            return f"embedded server in {self.datadir}"
        return f"{redact(self.dsn) or '(libpq defaults)'} (from {self.source})"


def dict_rows(conn: Any, query: Any, params: Any = None) -> list[dict]:
    """The rows of ``query`` as dicts keyed by column name."""
    cur = conn.execute(query, params)
    names = [d.name for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def first_row(conn: Any, query: Any, params: Any = None) -> dict | None:
    """The first row of ``query`` as a dict keyed by column name (None: no row)."""
    return next(iter(dict_rows(conn, query, params)), None)


def client_name(pid: int | None = None, host: str | None = None) -> str:
    """``pgeval <pid>@<host>`` (PostgreSQL keeps 63 bytes of an application_name): this
    process's, or the one a run recorded (pgeval.run.pid, host). The stage writer's transactions
    set it with SET LOCAL (never on the session: behind a pooler the next client would inherit
    it), so that `run resume` finds a dead client's write still waiting in its backend."""
    import socket

    name = f"pgeval {os.getpid() if pid is None else pid}@{host or socket.gethostname()}"
    return name.encode("utf-8")[:63].decode("utf-8", "ignore")


@contextmanager
def snapshot(database: Database) -> Iterator[Any]:
    """``with snapshot(database) as conn:`` one connection to the results database whose
    statements all run in ONE transaction, REPEATABLE READ and READ ONLY: every statement reads
    the same snapshot, so output assembled from several statements (a report, metrics with their
    breakdowns, a comparison of two runs) is whole even while another session deletes or replaces
    what it reads. Something deleted before the snapshot is simply not there (the caller's
    "no such run" error); nothing can disappear half way through."""
    from psycopg import IsolationLevel

    conn = database.connect()
    try:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        yield conn
    finally:
        conn.close()  # read only: nothing to commit; the server ends the transaction


@contextmanager
def transaction(conn: Any) -> Iterator[Any]:
    """``with transaction(conn):`` commits on success and rolls back on any exception."""
    with conn.transaction():
        yield conn


def sqlalchemy_engine(dsn: str) -> Engine:
    """A SQLAlchemy engine over a libpq DSN of any form (URI, key=value, empty for PG* variables)."""
    import psycopg
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    return create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), poolclass=NullPool
    )
