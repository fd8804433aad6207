"""A probe's connections, opened once and lent again (:class:`Lending`).

A probe goes through the same code as a sweep (target, query set, sweep, probe row, advice), and
each of those steps opens its own connection: eleven per probe, about 6 ms each, a third of a
probe's own cost on a small table. :class:`Lending` is a :class:`~evaluator.core.db.Database`
whose ``connect()`` lends a connection of the same kind (results or knowledge base, autocommit,
read only) that an earlier step gave back, else opens one. Giving it back is what the step did
before: ``with ... as conn:`` commits (rolls back on an exception), then ``close()``; ``close()``
here rolls back whatever is still open (what closing did: the server dropped it), puts the
connection's characteristics back and keeps it for the next step. A connection is lent to one
step at a time: a step that asks while another holds one of that kind gets a new one.
:meth:`Lending.close_all` closes them for good at the end of the probe.

**No WAL flush wait.** A probe's bookkeeping in the results database (the sweep replaced, the
exact run copied from the stored lists, the point's run, its SQL measures, the probe's row) is a
dozen short write transactions, and with ``synchronous_commit`` on each commit waits for the
server's WAL flush (an fdatasync: ~4 ms on the development machine's disk, tens of ms when the
disk is busy) — a third of a probe's own cost on 100,000 rows, more than its statements. So a
results connection lent here ends every transaction it commits with ``SET LOCAL
synchronous_commit TO off`` (in the same message as its ``COMMIT``; before a ``with
conn.transaction():`` block's, a statement of its own): nothing stays on the server session,
safe behind a pooler, as the stage writer already does for its result batches. What
that gives up: a server crash within a fraction of a second (``wal_writer_delay``, 3 x 200 ms at
most) after a commit can lose the last transactions, whole and in order; the database is then as
if the probe had been interrupted there (a sweep left running, the probe's row missing), which
the next probe of the series replaces. The knowledge base's connections are read only: nothing
to commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from psycopg.pq import TransactionStatus

from ...core.db import Database
from ...core.pool_safe import PoolSafeConnection

NO_FLUSH_WAIT = "SELECT set_config('synchronous_commit', 'off', true)"
# the kinds of connection (results, autocommit, read_only) a probe asks for: the results
# database's (its steps', and the one whose transaction holds the series' lock), and the
# knowledge base's, read only
RESULTS = (True, False, False)
KNOWLEDGE_BASE = (False, False, True)
NO_FLUSH_WAIT_COMMIT = "SET LOCAL synchronous_commit TO off; COMMIT"


class _Lent(PoolSafeConnection):
    """A connection of a :class:`Lending`: ``close()`` gives it back; a results connection's
    commits do not wait for the WAL flush (module docstring)."""

    _pgeval_lending: Any  # (the Lending, its kind)

    def _writes_here(self) -> bool:
        """A results connection (the knowledge base is only read) with a transaction open and
        not in error: its commit is sent after SET LOCAL synchronous_commit = off."""
        kind = self._pgeval_lending[1]
        return (
            kind is not None
            and bool(kind[0])
            and not self.read_only
            and self.pgconn.transaction_status == TransactionStatus.INTRANS
        )

    def commit(self) -> None:
        # (inside a transaction block psycopg's commit() refuses, as it should)
        if not self._writes_here() or self._num_transactions:
            super().commit()
            return
        self.release_prepared()  # (PoolSafeConnection.commit's)
        # one message, one round trip: two statements without parameters go as a simple query
        self.execute(NO_FLUSH_WAIT_COMMIT)

    @contextmanager
    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> Iterator[Any]:
        outer = self.pgconn.transaction_status == TransactionStatus.IDLE
        with super().transaction(savepoint_name, force_rollback) as tx:
            yield tx
            if outer and not force_rollback and self._writes_here():  # committed next
                # a statement of its own (psycopg sends the block's COMMIT; a pipeline joining
                # them costs more than this round trip)
                self.execute(NO_FLUSH_WAIT, prepare=False)

    def close(self) -> None:
        lending, kind = self._pgeval_lending
        if self.closed or self.broken or lending is None:
            PoolSafeConnection.close(self)
            return
        try:
            if self.pgconn.transaction_status != 0:  # closing dropped it: so does giving back
                self.rollback()
            results, autocommit, read_only = kind
            self.autocommit = autocommit
            self.read_only = True if read_only else None  # (Database.connect's)
            self.isolation_level = None
            self.deferrable = None
        except Exception:
            PoolSafeConnection.close(self)
            return
        lending.free.setdefault(kind, []).append(self)

    def close_for_good(self) -> None:
        self._pgeval_lending = (None, None)
        PoolSafeConnection.close(self)


@dataclass
class Lending(Database):
    """``database``'s connections, lent again (module docstring)."""

    free: dict = field(default_factory=dict, repr=False)
    opened: list = field(default_factory=list, repr=False)
    _uri: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, database: Database) -> Lending:
        return cls(
            dsn=database.dsn,
            datadir=database.datadir,
            results_dsn=database.results_dsn,
            source=database.source,
        )

    def connect(
        self,
        *,
        results: bool = True,
        autocommit: bool = False,
        read_only: bool = False,
        **kwargs: Any,
    ) -> Any:
        kind = (results, autocommit, read_only)
        if kwargs:  # other connection parameters: a connection of its own, not lent
            return super().connect(
                results=results, autocommit=autocommit, read_only=read_only, **kwargs
            )
        free = self.free.get(kind) or []
        while free:
            conn = free.pop()
            if not conn.closed and not conn.broken:
                return conn
        return self._open(kind)

    def uri(self) -> str:
        """The knowledge base's connection string, resolved once (the embedded server's is
        looked up from its data directory: a file read per connection otherwise)."""
        if self._uri is None:
            self._uri = super().uri()
        return self._uri

    def open_ahead(self, wanted: dict) -> None:
        """Open at once, each in a thread of its own, the connections the steps will ask for
        (``{(results, autocommit, read_only): how many}``) that are not free yet: opening one
        is mostly waiting for the server to start its backend (a process), which the server
        does for them side by side. Each is lent like any other; an error opening one is raised
        here (those opened are closed by :meth:`close_all`)."""
        from concurrent.futures import ThreadPoolExecutor

        todo = [
            kind
            for kind, count in wanted.items()
            for _ in range(count - len(self.free.get(kind) or []))
        ]
        if len(todo) < 2:
            return
        self.uri()  # (the embedded server started, once, before the threads)
        with ThreadPoolExecutor(len(todo)) as pool:
            opened = list(pool.map(self._open, todo))
        for kind, conn in zip(todo, opened):
            self.free.setdefault(kind, []).append(conn)

    def _open(self, kind: tuple) -> Any:
        results, autocommit, read_only = kind
        conn = super().connect(results=results, autocommit=autocommit, read_only=read_only)
        conn.__class__ = _Lent
        conn._pgeval_lending = (self, kind)
        self.opened.append(conn)
        return conn

    def close_all(self) -> None:
        for conn in self.opened:
            conn.close_for_good()
        self.opened.clear()
        self.free.clear()

    def __enter__(self) -> Lending:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()
