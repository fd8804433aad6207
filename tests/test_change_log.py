"""The change log (`pgeval target track`, evaluator/table/change_log.py): every committed write
statement on a tracked table adds one to its count, nothing else does; while the count is
unchanged the data checksum is read from the cache with no scan of the table; a count the
trigger did not keep (disabled, then enabled again) is never trusted; writers at any isolation
level neither wait nor fail because of it."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest
from dba_data import vec_text

from evaluator.table import change_log
from evaluator.table import data_checksum as dc
from evaluator.table.target_table import resolve_table
from evaluator.targets.targets import Target

TABLE = "cl_docs"


@pytest.fixture
def table(database):
    rng = np.random.default_rng(11)
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, embedding vector(8), body text)")
        with c.cursor().copy(f"COPY {TABLE} (id, embedding, body) FROM STDIN") as cp:
            for i, v in enumerate(rng.normal(size=(120, 8)), 1):
                cp.write_row((str(i), vec_text(v), f"doc {i}"))
        c.execute("DELETE FROM pgeval.data_checksum")
    yield TABLE
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute("DELETE FROM pgeval.data_checksum")


def target() -> Target:
    return Target(
        name="cl", table=TABLE, id_column="id", vector_column="embedding", text_column="body"
    )


def tracked(database) -> dict:
    with database.connect(results=False) as kb:
        return change_log.install(kb, target())


def count(conn) -> int:
    state = change_log.state(conn, resolve_table(conn, target()))
    assert state is not None, "the table should be tracked"
    return change_log.count(state)


def measured(conn, database):
    return dc.measure(conn, target(), cache=dc.ChecksumCache(database=database))


def fresh(conn) -> dict:
    out = dc.measure(conn, target())  # no cache: one full scan
    assert (out.source, out.scans) == ("computed", 1)
    return out.data


def test_each_committed_write_statement_counts_one(conn, database, table):
    assert change_log.state(conn, resolve_table(conn, target())) is None
    out = tracked(database)
    assert out["installed"] and out["trigger"] == change_log.TRIGGER
    trig = conn.execute(
        "SELECT tgname, tgenabled FROM pg_trigger WHERE tgname LIKE 'pgeval_track_%' "
        "ORDER BY tgname"
    ).fetchall()
    # ENABLE ALWAYS: they fire under session_replication_role = replica too
    assert trig == [(change_log.TRIGGER, "A"), (change_log.ROW_TRIGGER, "A")]
    start = count(conn)
    conn.execute(f"INSERT INTO {TABLE} (id, body) VALUES ('n1', 'x'), ('n2', 'y')")
    assert count(conn) == start + 1  # one statement, two rows
    conn.execute(f"UPDATE {TABLE} SET body = 'z' WHERE id = 'n1'")
    conn.execute(f"DELETE FROM {TABLE} WHERE id = 'n2'")
    with conn.cursor().copy(f"COPY {TABLE} (id, body) FROM STDIN") as cp:
        cp.write_row(("n3", "copied"))
    assert count(conn) == start + 4
    conn.execute(f"SELECT * FROM {TABLE}")
    conn.execute(f"UPDATE {TABLE} SET body = 'none' WHERE false")  # a statement: counted
    assert count(conn) == start + 5
    with database.connect(results=False) as c:  # rolled back: not counted
        c.execute(f"INSERT INTO {TABLE} (id) VALUES ('gone')")
        c.rollback()
        c.execute("SAVEPOINT s")
        c.execute(f"DELETE FROM {TABLE} WHERE id = 'n3'")
        c.execute("ROLLBACK TO SAVEPOINT s")
        c.execute(f"UPDATE {TABLE} SET body = 'kept' WHERE id = 'n3'")
        c.commit()
    assert count(conn) == start + 6
    conn.execute(f"TRUNCATE {TABLE}")
    assert count(conn) == start + 7
    again = tracked(database)  # idempotent
    assert not again["installed"] and again["count"] == start + 7


def test_an_unchanged_count_reads_the_checksum_without_a_scan(conn, database, table):
    tracked(database)
    first = measured(conn, database)
    assert (first.source, first.scans) == ("computed", 2) and first.data == fresh(conn)
    second = measured(conn, database)
    assert (second.source, second.scans) == ("reused", 0) and second.data == first.data
    assert "change log unchanged" in second.note
    # the value comes from the change log's entry: tamper with it and see it come back
    sentinel = "5e471ee15e471ee1"
    conn.execute(
        "UPDATE pgeval.data_checksum SET checksum = %s WHERE version ? 'changes'", (sentinel,)
    )
    assert measured(conn, database).data["checksum"] == sentinel
    conn.execute("DELETE FROM pgeval.data_checksum")
    for change in (
        f"INSERT INTO {TABLE} (id, body) VALUES ('n1', 'new')",
        f"UPDATE {TABLE} SET embedding = '[1,2,3,4,5,6,7,8]' WHERE id = '7'",
        f"DELETE FROM {TABLE} WHERE id = '8'",
    ):
        before = measured(conn, database)
        conn.execute(change)
        after = measured(conn, database)
        assert after.source == "computed" and after.data == fresh(conn) != before.data
        assert measured(conn, database).scans == 0  # the new count is cached


def test_a_version_hit_fills_the_change_log_key(conn, database, table):
    """Tracking a table whose checksum is cached by version: the first read after it scans
    row versions once (no checksum), the next reads none."""
    first = measured(conn, database)  # untracked: cached by version
    assert first.source == "computed"
    tracked(database)
    second = measured(conn, database)
    assert (second.source, second.scans) == ("reused", 1)
    third = measured(conn, database)
    assert (third.source, third.scans) == ("reused", 0) and third.data == first.data


def test_writes_while_the_trigger_was_disabled_are_not_trusted(conn, database, table):
    tracked(database)
    measured(conn, database)
    assert measured(conn, database).scans == 0
    before = count(conn)
    conn.execute(f"ALTER TABLE {TABLE} DISABLE TRIGGER {change_log.TRIGGER}")
    conn.execute(f"UPDATE {TABLE} SET body = 'unseen' WHERE id = '3'")
    conn.execute(f"ALTER TABLE {TABLE} ENABLE ALWAYS TRIGGER {change_log.TRIGGER}")
    assert count(conn) == before  # the write was not counted ...
    out = measured(conn, database)
    assert out.source == "computed" and out.data == fresh(conn)  # ... and not trusted
    # enabled for origin sessions only: untracked, the version scan as without a log
    conn.execute(f"ALTER TABLE {TABLE} ENABLE TRIGGER {change_log.TRIGGER}")
    assert change_log.state(conn, resolve_table(conn, target())) is None
    assert measured(conn, database).scans == 1


def test_fold_keeps_the_count(conn, database, table):
    tracked(database)
    for i in range(40):
        conn.execute(f"UPDATE {TABLE} SET body = %s WHERE id = '1'", (f"v{i}",))
    oid = resolve_table(conn, target())
    total = count(conn)
    rows = conn.execute(
        "SELECT count(*) FROM pgeval_changes.statement_log WHERE relid = %s", (oid,)
    ).fetchone()[0]
    assert rows >= 2
    assert conn.execute("SELECT pgeval_changes.fold(%s)", (oid,)).fetchone()[0] == rows
    assert count(conn) == total
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval_changes.statement_log WHERE relid = %s", (oid,)
        ).fetchone()[0]
        == 1
    )


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_concurrent_writers_neither_wait_nor_fail(conn, database, table, isolation):
    """Two open transactions insert into the table at once while a third folds the log: all
    commit (the log's appends add no lock to wait for and no read-write dependency between
    them), and the count grows by their statements."""
    tracked(database)
    before = count(conn)
    a = database.connect(results=False)
    b = database.connect(results=False)
    try:
        for c, row in ((a, "a1"), (b, "b1")):
            c.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
            c.execute("SELECT 1")  # the snapshot is taken here
            c.execute(f"INSERT INTO {TABLE} (id, body) VALUES (%s, 'w')", (row,))
        done = threading.Event()

        def fold() -> None:  # a fold while both writers are open: it must not block on them
            with database.connect(results=False, autocommit=True) as f:
                f.execute("SET lock_timeout = '2s'")
                f.execute("SELECT pgeval_changes.fold(%s)", (resolve_table(f, target()),))
            done.set()

        t = threading.Thread(target=fold)
        t.start()
        t.join(10)
        assert done.is_set()
        for c, row in ((a, "a2"), (b, "b2")):
            c.execute(f"INSERT INTO {TABLE} (id, body) VALUES (%s, 'w')", (row,))
        a.commit()
        b.commit()
    finally:
        a.close()
        b.close()
    assert count(conn) == before + 4


def test_untrack_drops_the_trigger_and_its_rows(conn, database, table):
    tracked(database)
    oid = resolve_table(conn, target())
    with database.connect(results=False) as kb:
        assert change_log.remove(kb, target())["removed"]
    assert change_log.state(conn, oid) is None
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval_changes.statement_log WHERE relid = %s", (oid,)
        ).fetchone()[0]
        == 0
    )


def test_cli_track_show_untrack(pgeval, conn, clean, table):
    code, _, err = pgeval(
        "target", "add", "cl", "--table", TABLE, "--id-column", "id", "--vector-column",
        "embedding",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = pgeval("target", "track", "cl")
    assert code == 0, err
    assert "now tracked (trigger pgeval_track_changes)" in out
    code, out, _ = pgeval("target", "show", "cl")
    assert "change log: tracked (" in out
    conn.execute(f"INSERT INTO {TABLE} (id) VALUES ('cli')")
    code, out, _ = pgeval("target", "track", "cl", "--format", "json")
    assert code == 0 and '"installed": false' in out
    code, out, err = pgeval("target", "untrack", "cl")
    assert code == 0 and "no longer tracked" in out, err
    code, out, err = pgeval("target", "untrack", "cl")
    assert code == 1 and not out
    assert err.count("\n") == 1 and "is not tracked" in err and "Traceback" not in err
    code, out, _ = pgeval("target", "show", "cl")
    assert "change log: no" in out


def test_cli_errors_are_one_line(pgeval, conn, clean, table):
    conn.execute(f"CREATE OR REPLACE VIEW {TABLE}_v AS SELECT * FROM {TABLE}")
    try:
        pgeval(
            "target", "add", "clv", "--table", f"{TABLE}_v", "--id-column", "id",
            "--vector-column", "embedding",
        )  # fmt: skip
        pgeval(
            "target", "add", "cl", "--table", TABLE, "--id-column", "id", "--vector-column",
            "embedding",
        )  # fmt: skip
        code, out, err = pgeval("target", "track", "clv")
        assert code == 1 and "is a view" in err and err.count("\n") == 1
        code, out, err = pgeval("target", "track", "cl", "--lock-timeout", "soon")
        assert code == 1 and "--lock-timeout" in err and err.count("\n") == 1
        # a writer holds the table: the trigger's DDL gives up after --lock-timeout
        with database_writer(conn) as _:
            code, out, err = pgeval("target", "track", "cl", "--lock-timeout", "200ms")
        assert code != 0 and "within 200ms" in err and err.count("\n") == 1
        assert conn.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname = %s", (change_log.TRIGGER,)
        ).fetchone() == (0,)
    finally:
        conn.execute(f"DROP VIEW IF EXISTS {TABLE}_v")


class database_writer:
    """An open transaction that wrote the table (ROW EXCLUSIVE, which the trigger's DDL waits
    for), rolled back on exit."""

    def __init__(self, conn) -> None:
        self.info = conn.info

    def __enter__(self):
        self.c = psycopg.connect(self.info.dsn)
        self.c.execute(f"UPDATE {TABLE} SET body = body WHERE id = '1'")
        return self.c

    def __exit__(self, *exc) -> None:
        self.c.rollback()
        self.c.close()


def test_the_trigger_folds_now_and_then_and_keeps_the_count(conn, database, table):
    """3,000 single-statement writes in READ COMMITTED: the trigger folds one in 256 (the chance
    that none of them folds is about 1e-5), the log stays shorter than the statements, and the
    count is exact."""
    tracked(database)
    oid = resolve_table(conn, target())
    before = count(conn)
    for i in range(3000):
        conn.execute(f"UPDATE {TABLE} SET body = %s WHERE id = '2'", (str(i),))
    assert count(conn) == before + 3000
    rows = conn.execute(
        "SELECT count(*) FROM pgeval_changes.statement_log WHERE relid = %s", (oid,)
    ).fetchone()[0]
    assert rows < 3000


def test_rows_written_as_a_replica_are_counted(conn, database, table):
    """Logical replication's apply worker runs with session_replication_role = replica and fires
    row triggers only: there the row trigger counts each row (a session set to replica by hand
    fires both, which only counts more)."""
    tracked(database)
    before = count(conn)
    with database.connect(results=False) as c:
        c.execute("SET LOCAL session_replication_role = replica")
        c.execute(f"INSERT INTO {TABLE} (id, body) VALUES ('r1', 'x'), ('r2', 'y')")
        c.execute(f"DELETE FROM {TABLE} WHERE id = 'r1'")
        c.commit()
    assert count(conn) >= before + 3  # the three rows, by the row trigger
    conn.execute(f"INSERT INTO {TABLE} (id, body) VALUES ('o1', 'x'), ('o2', 'y')")
    after = count(conn)
    conn.execute(f"INSERT INTO {TABLE} (id, body) VALUES ('o3', 'x'), ('o4', 'y')")
    assert count(conn) == after + 1  # an origin session: the statement trigger only


def test_a_publication_for_all_tables_does_not_break_writes_or_folds(conn, database, table):
    """A publication FOR ALL TABLES publishes the log too: it has a replica identity, so folds
    (and the application's writes that fold) work there."""
    tracked(database)
    conn.execute("CREATE PUBLICATION cl_all FOR ALL TABLES")
    try:
        oid = resolve_table(conn, target())
        before = count(conn)
        for i in range(600):  # some of them fold (one in 256)
            conn.execute(f"UPDATE {TABLE} SET body = %s WHERE id = '4'", (str(i),))
        conn.execute("SELECT pgeval_changes.fold(%s)", (oid,))
        assert count(conn) == before + 600
    finally:
        conn.execute("DROP PUBLICATION cl_all")
