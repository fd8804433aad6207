"""One snapshot for a whole sweep: the exact answer and every timed ANN statement read the same
rows, however the table changes meanwhile (a knowledge base that keeps ingesting).

A dedicated connection (:class:`SharedSnapshot`) opens a ``REPEATABLE READ READ ONLY``
transaction and exports its snapshot (``pg_export_snapshot()``); the sweep's knowledge-base
connection then imports it in every transaction it begins
(:meth:`evaluator.core.pool_safe.PoolSafeConnection.use_snapshot`): the data checksum of the
fingerprint, the ground truth's streamed read, its server check, the plan checks and every
timed statement of every point see exactly the rows committed when the snapshot was taken, and
none written since. Recall is therefore always the ANN statement's rows against the exact
answer over the same rows.

The cost: while the snapshot is held the server's xmin horizon stays where it was, so VACUUM
(autovacuum too) cannot remove row versions that died after it — on a table being updated the
dead rows pile up (bloat, slower scans) until the sweep ends. The holder's transaction writes
nothing and holds no lock (it reads no table). The bound:
``--snapshot-max-age`` seconds (:data:`DEFAULT_MAX_AGE_S`); past it the snapshot is released
before the next point, and the rest of the sweep falls back to detection
(:mod:`.consistency`): the output says so, and how long the snapshot was held.

Where an exported snapshot cannot be used — the server refuses to export (a standby before
PostgreSQL 10 has none, or ``max_connections`` is reached), or the import fails on the
connection (behind a pooler that routes the two connections to different servers) — the sweep
is measured with detection from the start, saying why.
"""

from __future__ import annotations

import time
from typing import Any

DEFAULT_MAX_AGE_S = 900.0  # a quarter of an hour of xmin horizon held, at most


class SharedSnapshot:
    """An exported snapshot held open by a transaction on a connection of its own."""

    def __init__(self, conn: Any, snapshot_id: str, txids: str, taken_at: str) -> None:
        # txids: the snapshot as txid_current_snapshot() spells it (xmin:xmax:in-progress),
        # which txid_visible_in_snapshot() reads: what a reader may check a write against
        self.conn, self.id, self.txids, self.taken_at = conn, snapshot_id, txids, taken_at
        self.started = time.monotonic()

    @classmethod
    def take(cls, database: Any) -> SharedSnapshot:
        """Export a snapshot of the knowledge base (``psycopg.Error``: it cannot be taken)."""
        from psycopg import IsolationLevel

        conn = database.connect(results=False, read_only=True)
        try:
            conn.isolation_level = IsolationLevel.REPEATABLE_READ
            # its own idle_in_transaction_session_timeout lifted (the sweep holds it idle)
            row = conn.execute(
                "SELECT set_config('idle_in_transaction_session_timeout', '0', true), "
                "pg_export_snapshot(), txid_current_snapshot()::text, "
                "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
            ).fetchone()
        except BaseException:
            conn.close()
            raise
        return cls(conn, row[1], row[2], row[3])

    def age_s(self) -> float:
        return time.monotonic() - self.started

    def release(self) -> None:
        conn, self.conn = self.conn, None
        if conn is None:
            return
        try:
            conn.rollback()
        except Exception:  # noqa: BLE001 - gone: the snapshot ended with its session
            pass
        conn.close()

    @property
    def held(self) -> bool:
        return self.conn is not None


def try_import(kb: Any, snap: SharedSnapshot) -> str | None:
    """``kb``'s transactions on ``snap`` from now on; None, or why it cannot (``kb`` back on
    its own snapshots)."""
    import psycopg

    from ...core.errors import first_line
    from ...core.pool_safe import SnapshotGone

    kb.use_snapshot(snap.id)
    try:
        kb.execute("SELECT 1").fetchone()  # the import, checked once
        kb.rollback()
    except (psycopg.Error, SnapshotGone) as exc:
        kb.rollback()
        kb.use_snapshot(None)
        why = exc.server if isinstance(exc, SnapshotGone) else first_line(exc)
        return f"the snapshot cannot be imported on the measuring connection: {why}"
    return None
