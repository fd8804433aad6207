"""Advisory locks held across many transactions, safe behind a transaction pooler.

A session advisory lock (``pg_advisory_lock``) stays on the server connection that took it; behind
PgBouncer in transaction pooling that connection goes to the next client after the statement, and
the unlock may reach another server connection: the lock leaks, and the next ``pgeval init`` waits
for it forever. :class:`HeldLock` instead takes a transaction-scoped lock
(``pg_advisory_xact_lock``) on a connection of its own and keeps that transaction open until
:meth:`HeldLock.release`: the pooler pins the server connection to it meanwhile, and the lock ends
with the transaction, or with the connection when the process dies, or when the connection it
was taken for (``conn``) is closed, as a session lock would. The transaction writes
nothing (it holds back no vacuum) and lifts its own ``idle_in_transaction_session_timeout``
with ``set_config(…, true)``.
"""

from __future__ import annotations

from typing import Any


def connect_like(conn: Any) -> Any:
    """A new connection (not autocommit) to the database ``conn`` is connected to."""
    import psycopg

    from .pool_safe import PoolSafeConnection

    params = conn.info.get_parameters()
    if conn.info.password:
        params["password"] = conn.info.password
    return PoolSafeConnection.connect(psycopg.conninfo.make_conninfo(**params), autocommit=False)


class HeldLock:
    """An advisory lock on ``key`` (one bigint, or two ints) held by its own transaction: on a
    connection of its own (:func:`connect_like` ``conn``), or with ``in_conn=True`` in ``conn``'s
    own transaction (``conn`` not autocommit, idle, used for nothing else until
    :meth:`release`, which rolls that transaction back and leaves ``conn`` open): one connection
    fewer for a caller that has one to spare (a probe's)."""

    def __init__(self, conn: Any, key: tuple, *, in_conn: bool = False) -> None:
        self.conn, self.key = conn, tuple(key)
        self.holder: Any = None
        self.in_conn = in_conn

    def _args(self) -> tuple[str, tuple]:
        return ", ".join(["%s"] * len(self.key)), self.key

    def acquire(self, *, wait: bool) -> bool:
        """Take the lock (``wait``: block until it is free); False when taken elsewhere."""
        if self.holder is not None:
            return True
        holder = self.conn if self.in_conn else connect_like(self.conn)
        marks, args = self._args()
        fn = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
        try:
            # one statement: the timeout lifted for this transaction, then the lock
            got = holder.execute(
                "SELECT set_config('idle_in_transaction_session_timeout', '0', true), "
                f"{fn}({marks})",
                args,
            ).fetchone()[1]
        except BaseException:
            self._end(holder)
            raise
        if not wait and not got:
            self._end(holder)
            return False
        self.holder = holder
        if self.in_conn:
            return True
        # like a session lock, it ends when ``conn`` closes (PoolSafeConnection.close)
        held = getattr(self.conn, "held_locks", None)
        if isinstance(held, list):
            held.append(self)
        return True

    def _end(self, holder: Any) -> None:
        """The holder's transaction ended (``in_conn``: rolled back, the connection kept)."""
        if not self.in_conn:
            holder.close()
            return
        try:
            holder.rollback()
        except Exception:  # the connection is gone, and the lock with it
            pass

    def release(self) -> None:
        holder, self.holder = self.holder, None
        if holder is None:
            return
        if self.in_conn:
            self._end(holder)
            return
        held = getattr(self.conn, "held_locks", None)
        if isinstance(held, list) and self in held:
            held.remove(self)
        try:
            holder.rollback()  # the transaction ends, and the lock with it
        except Exception:  # the connection is gone, and the lock with it
            pass
        holder.close()

    def __enter__(self) -> HeldLock:
        self.acquire(wait=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
