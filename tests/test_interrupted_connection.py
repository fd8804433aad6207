"""A Ctrl-C that lands between psycopg's steps (a query sent, its result not yet read) leaves
the connection with a command in progress; the rollback that cleans up after the interrupt
must end that command, not fail with "another command is already in progress" (which
replaced the interrupt with a connection error: tests/test_resume.py::test_resume_after_ctrl_c
exited 1 instead of 130 under load). Real server, the state made by hand."""

from __future__ import annotations

import threading

from psycopg.pq import TransactionStatus

LOCK = 1885824398  # an advisory lock of this test's (pgeval's own use 1885824373..1885824377)


def test_rollback_ends_a_query_left_running(database):
    """The query left running waits on a lock another session holds, so it never ends by itself:
    the rollback returns only if it cancelled it (no wall-clock bound to race). Should it wait
    instead, the lock is released after 60 s and the test fails rather than hangs."""
    with database.connect(autocommit=True) as blocker, database.connect() as conn:
        blocker.execute("SELECT pg_advisory_lock(%s)", (LOCK,))
        released = threading.Event()

        def release() -> None:
            released.set()
            blocker.execute("SELECT pg_advisory_unlock(%s)", (LOCK,))

        timer = threading.Timer(60, release)
        timer.start()
        try:
            conn.execute("SELECT 1")
            # sent, never read (interrupted here): it waits on the lock for as long as it is held
            conn.pgconn.send_query(f"SELECT pg_advisory_xact_lock({LOCK})".encode())
            assert conn.pgconn.transaction_status == TransactionStatus.ACTIVE
            conn.rollback()  # cancels the wait, reads its end, rolls back
        finally:
            timer.cancel()
        assert not released.is_set(), "the rollback waited for the query to end: not cancelled"
        assert conn.execute("SELECT 2").fetchone() == (2,)
        # the query never got the lock: the blocker still holds it
        assert blocker.execute("SELECT pg_advisory_unlock(%s)", (LOCK,)).fetchone() == (True,)
