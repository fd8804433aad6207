"""Connections that leave nothing behind on the server session: safe behind a transaction pooler.

Behind PgBouncer in transaction pooling (how most hosted PostgreSQL is reached) a server
connection passes from client to client at every transaction end, with whatever session state
the last client left on it and no reset. Whatever pgeval left there, the *application's* next
clients would inherit: a ``SET SESSION default_transaction_read_only = on`` made their writes
fail; a prepared statement ``_pg3_0`` makes their driver's own ``_pg3_0`` fail ("already
exists"). So every connection pgeval opens (:meth:`evaluator.core.db.Database.connect`) is a
:class:`PoolSafeConnection`:

- **read only per transaction**: ``read_only=True`` is psycopg's transaction characteristic,
  sent as ``BEGIN READ ONLY`` with each transaction, never a session setting; in autocommit mode
  a statement run with :meth:`execute` outside a transaction is wrapped in its own
  ``BEGIN READ ONLY … COMMIT``;
- **no prepared statement outlives its transaction**: psycopg's automatic preparation (after
  five executions) is off, so statements are prepared only where pgeval asks (``prepare=True``,
  the timed statements, always inside a transaction); before that transaction commits or rolls
  back, the statements it prepared are deallocated by name in the same transaction, on the same
  server connection (a failed transaction first becomes a new one on the same connection with
  ``ROLLBACK AND CHAIN``, which a pooler does not take as a transaction end). psycopg's own
  clean-up would send ``DEALLOCATE ALL`` after the transaction, which a pooler may route to
  another client's server connection;
- settings are applied with ``set_config(…, true)`` / ``SET LOCAL`` by the callers (see
  :mod:`evaluator.stages.gucs`); advisory locks on the knowledge base are transaction-scoped;
- **a shared snapshot per transaction** (:meth:`PoolSafeConnection.use_snapshot`, a sweep's:
  :mod:`evaluator.tuning.sweep.snapshot`): every transaction the connection begins is REPEATABLE
  READ and imports an exported snapshot (``SET TRANSACTION SNAPSHOT``) right after its
  ``BEGIN``, on the same server connection: nothing outlives the transaction.

``tests/test_production.py`` proves it through a real PgBouncer: after each command the pool's
server connections show the settings they showed before, no prepared statement and no lock, and
accept writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus

from .errors import DatabaseError, first_line

if TYPE_CHECKING:
    from psycopg.abc import Params
    from typing_extensions import Self

# automatic preparation never triggers (explicit prepare=True still prepares); None would turn
# off explicit preparation too
NEVER = 2**31 - 1


class SnapshotGone(DatabaseError):
    """The exported snapshot a transaction imports is refused (``server``: why, the server's
    first line): the transaction holding it ended."""

    def __init__(self, exc: BaseException) -> None:
        self.server = first_line(exc)
        super().__init__(
            f"the sweep's snapshot can no longer be imported ({self.server}): the transaction "
            "that holds it ended (a pooler's idle_transaction_timeout, the server's "
            "transaction_timeout, a terminated backend); run the sweep again, or with "
            "--consistency detect"
        )


class PoolSafeConnection(psycopg.Connection):
    """A psycopg connection whose session state ends with each transaction (module docstring)."""

    held_locks: list  # evaluator.core.held_lock.HeldLock taken for this connection
    _pgeval_snapshot: str | None  # the exported snapshot each transaction imports (or None)

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        conn = super().connect(conninfo, **kwargs)
        conn.prepare_threshold = NEVER
        conn.held_locks = []  # evaluator.core.held_lock: released when this closes
        conn._pgeval_snapshot = None
        return conn

    # -- a shared snapshot -------------------------------------------------------------------
    def use_snapshot(self, snapshot_id: str | None) -> None:
        """Every transaction begun from now on reads the exported snapshot ``snapshot_id``
        (REPEATABLE READ, ``SET TRANSACTION SNAPSHOT`` right after its ``BEGIN``); None: each
        transaction its own snapshot again, at the connection's isolation level before."""
        from psycopg import IsolationLevel

        if self.pgconn.transaction_status != TransactionStatus.IDLE:
            self.rollback()  # (the open transaction read another snapshot)
        if snapshot_id is not None and self._pgeval_snapshot is None:
            self._pgeval_isolation = self.isolation_level
            self.isolation_level = IsolationLevel.REPEATABLE_READ
        elif snapshot_id is None and self._pgeval_snapshot is not None:
            self.isolation_level = self._pgeval_isolation
        self._pgeval_snapshot = snapshot_id

    def _exec_command(self, command: Any, result_format: Any = psycopg.pq.Format.TEXT) -> Any:
        # the one place psycopg sends the BEGIN of a transaction (a statement's implicit one and
        # ``transaction()``'s): the snapshot imported at once, the transaction's first statement
        result = yield from super()._exec_command(command, result_format)
        snapshot = self._pgeval_snapshot
        if snapshot is not None and isinstance(command, bytes) and command.startswith(b"BEGIN"):
            quoted = snapshot.replace("'", "''")
            try:
                yield from super()._exec_command(f"SET TRANSACTION SNAPSHOT '{quoted}'".encode())
            except psycopg.Error as exc:
                raise SnapshotGone(exc) from None
        return result

    # -- prepared statements -----------------------------------------------------------------
    def release_prepared(self) -> None:
        """Deallocate, inside the open transaction, the statements this connection prepared.
        Outside a transaction there is nothing to do safely: the names are forgotten."""
        names = [n.decode() for n in self._prepared._names.values()]
        if not names:
            return
        # forget them first: psycopg must not flush a DEALLOCATE ALL after the transaction
        self._prepared._names.clear()
        self._prepared._counts.clear()
        status = self.pgconn.transaction_status
        if status not in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            return
        try:
            if status == TransactionStatus.INERROR:
                self._exec_plain("ROLLBACK AND CHAIN")
            present = self._plain_rows(
                "SELECT name FROM pg_prepared_statements WHERE name = ANY(%s)", (names,)
            )
            for (name,) in present:
                self._exec_plain(f'DEALLOCATE "{name}"')  # our own _pg3_<n> names
        except psycopg.OperationalError:  # connection lost: the server session ends with it
            pass

    def _exec_plain(self, stmt: str) -> None:
        with super().cursor() as cur:
            cur.execute(stmt.encode(), prepare=False)

    def _plain_rows(self, stmt: str, params: Params | None) -> list[Any]:
        with super().cursor() as cur:
            return cur.execute(stmt, params, prepare=False).fetchall()

    def commit(self) -> None:
        self.release_prepared()
        super().commit()

    def rollback(self) -> None:
        self.settle()
        self.release_prepared()
        super().rollback()

    def settle(self) -> None:
        """End a command left in progress (the connection ACTIVE): a Ctrl-C that landed between
        psycopg's steps, or in the middle of a COPY, leaves one, and then every statement, the
        rollback included, fails with "another command is already in progress" — which would
        replace the interrupt with a connection error. Cancel it, end a COPY, read its results.
        Never raises: when nothing helps, the connection is closed (its session ends)."""
        if self.closed or self.pgconn.transaction_status != TransactionStatus.ACTIVE:
            return
        from psycopg import generators, pq

        # a cancel that reaches the server before it has started the command is a no-op (the
        # command then runs to its end): when its results do not come, cancel again
        for _ in range(5):
            try:
                self.cancel_safe(timeout=5.0)
            except Exception:
                pass
            try:
                for _ in range(100):  # each round reads the results the server has sent
                    if self.pgconn.transaction_status != TransactionStatus.ACTIVE:
                        return
                    results = self.wait(generators.fetch_many(self.pgconn), timeout=2.0)
                    if results and results[-1].status == pq.ExecStatus.COPY_IN:
                        self.wait(generators.copy_end(self.pgconn, b"interrupted"), timeout=2.0)
                    elif not results:
                        break
            except Exception:
                continue
            if self.pgconn.transaction_status != TransactionStatus.ACTIVE:
                return
        if self.pgconn.transaction_status == TransactionStatus.ACTIVE:
            self.pgconn.finish()  # stuck: end the session rather than hang or mislead

    def close(self) -> None:
        for lock in list(getattr(self, "held_locks", ())):
            lock.release()
        if not self.closed:
            try:
                self.release_prepared()
            except psycopg.Error:
                pass
        super().close()

    @contextmanager
    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> Iterator[psycopg.Transaction]:
        outer = self.pgconn.transaction_status == TransactionStatus.IDLE
        with super().transaction(savepoint_name, force_rollback) as tx:
            try:
                yield tx
            finally:
                if outer:
                    self.release_prepared()

    # -- read only in autocommit ------------------------------------------------------------
    def execute(
        self,
        query: Any,  # what psycopg's execute takes (its overloads: Query, Template)
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> Any:
        if (
            self.autocommit
            and self.read_only
            and self.pgconn.transaction_status == TransactionStatus.IDLE
        ):
            with self.transaction():  # BEGIN READ ONLY; results stay readable after COMMIT
                return super().execute(query, params, prepare=prepare, binary=binary)
        return super().execute(query, params, prepare=prepare, binary=binary)
