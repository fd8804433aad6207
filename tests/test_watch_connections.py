"""A probe's connections (evaluator/tuning/watch/connections.py) on the embedded server, read from
the wire (libpq's protocol trace): a results connection commits with synchronous_commit off for
that transaction (commit(): in the COMMIT's own message, one round trip; a transaction block:
just before its COMMIT); a knowledge-base connection, a rollback and a transaction that raised
send no such thing; what was committed is there. And the series' lock held in the transaction
of a connection the probe lends (HeldLock in_conn)."""

from __future__ import annotations

import pytest
from psycopg import pq

from evaluator.core.held_lock import HeldLock
from evaluator.tuning.watch.connections import NO_FLUSH_WAIT, NO_FLUSH_WAIT_COMMIT, Lending

TABLE = "watch_conn_t"


@pytest.fixture
def lending(database, conn):
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(f"CREATE TABLE {TABLE} (a int)")
    with Lending.of(database) as lent:
        yield lent
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


def traced(c, tmp_path, work) -> list[tuple[str, str]]:
    """(direction F|B, message) of what ``work()`` sent and received on ``c``."""
    path = tmp_path / "trace.txt"
    with open(path, "w") as f:
        c.pgconn.trace(f.fileno())
        c.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            work()
        finally:
            c.pgconn.untrace()
    out = []
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        out.append((parts[0], "\t".join(parts[2:])))
    return out


def round_trips(messages) -> int:
    """Client turns: a run of frontend messages answered by the backend."""
    turns, last = 0, None
    for direction, _ in messages:
        if direction == "F" and last != "F":
            turns += 1
        last = direction
    return turns


def sent(messages) -> str:
    return "\n".join(m for d, m in messages if d == "F")


def rows(conn) -> list[int]:
    return [r[0] for r in conn.execute(f"SELECT a FROM {TABLE} ORDER BY a").fetchall()]


def test_results_commit_without_flush_wait_in_one_round_trip(lending, conn, tmp_path):
    c = lending.connect()
    c.execute(f"INSERT INTO {TABLE} VALUES (1)")
    trace = traced(c, tmp_path, c.commit)
    assert [m for d, m in trace if d == "F"] == [f'Query\t "{NO_FLUSH_WAIT_COMMIT}"'], trace
    assert round_trips(trace) == 1, trace
    assert c.info.transaction_status == pq.TransactionStatus.IDLE
    assert rows(conn) == [1]

    def block():
        with c.transaction():
            c.execute(f"INSERT INTO {TABLE} VALUES (2)")

    trace = traced(c, tmp_path, block)
    # BEGIN, the INSERT, the setting, the COMMIT
    assert round_trips(trace) == 4, trace
    assert sent(trace).index(NO_FLUSH_WAIT) < sent(trace).index('"COMMIT"')
    assert rows(conn) == [1, 2]
    c.close()  # given back: lent again, as it was
    again = lending.connect()
    assert again is c and not again.autocommit
    again.close()


def test_no_setting_where_nothing_is_committed(lending, conn, tmp_path):
    c = lending.connect()
    c.execute(f"INSERT INTO {TABLE} VALUES (3)")
    trace = traced(c, tmp_path, c.rollback)
    assert "synchronous_commit" not in sent(trace)

    def raises():
        with pytest.raises(ZeroDivisionError), c.transaction():
            c.execute(f"INSERT INTO {TABLE} VALUES (4)")
            raise ZeroDivisionError

    trace = traced(c, tmp_path, raises)
    assert "synchronous_commit" not in sent(trace) and "ROLLBACK" in sent(trace)

    def forced():
        with c.transaction(force_rollback=True):
            c.execute(f"INSERT INTO {TABLE} VALUES (5)")

    assert "synchronous_commit" not in sent(traced(c, tmp_path, forced))
    assert rows(conn) == []
    c.close()
    kb = lending.connect(results=False, read_only=True)
    kb.execute("SELECT 1")
    trace = traced(kb, tmp_path, kb.commit)
    assert "synchronous_commit" not in sent(trace) and '"COMMIT"' in sent(trace)
    kb.close()


def test_held_lock_in_the_lent_connection(lending, conn):
    key = (1885824376, 27)
    holder = lending.connect()
    lock = HeldLock(holder, key, in_conn=True)
    assert lock.acquire(wait=False)
    assert holder.info.transaction_status == pq.TransactionStatus.INTRANS
    other = lending.connect()  # the holder is not lent meanwhile
    assert other is not holder
    assert not HeldLock(other, key, in_conn=True).acquire(wait=False)
    assert other.info.transaction_status == pq.TransactionStatus.IDLE
    lock.release()
    assert holder.info.transaction_status == pq.TransactionStatus.IDLE and not holder.closed
    taken = HeldLock(other, key, in_conn=True)
    assert taken.acquire(wait=False)
    taken.release()
    other.close()
    holder.close()
