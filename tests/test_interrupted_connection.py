"""A Ctrl-C that lands between psycopg's steps (a query sent, its result not yet read) leaves
the connection with a command in progress; the rollback that cleans up after the interrupt
must end that command, not fail with "another command is already in progress" (which
replaced the interrupt with a connection error: tests/test_resume.py::test_resume_after_ctrl_c
exited 1 instead of 130 under load). Real server, the state made by hand."""

from __future__ import annotations

import time

from psycopg.pq import TransactionStatus


def test_rollback_ends_a_query_left_running(database):
    with database.connect() as conn:
        conn.execute("SELECT 1")
        conn.pgconn.send_query(b"SELECT pg_sleep(30)")  # sent, never read: interrupted here
        assert conn.pgconn.transaction_status == TransactionStatus.ACTIVE
        started = time.monotonic()
        conn.rollback()  # cancels the sleep, reads its end, rolls back
        assert time.monotonic() - started < 10
        assert conn.execute("SELECT 2").fetchone() == (2,)
