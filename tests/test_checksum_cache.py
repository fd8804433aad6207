"""The content checksum is cached by table version (evaluator/table/data_checksum.py): an unchanged
table reads only the cheap version scan and gets the very checksum a fresh computation gives; any
committed INSERT, UPDATE or DELETE under the filters is a miss and a new, correct checksum."""

from __future__ import annotations

import numpy as np
import pytest
from dba_data import vec_text

from evaluator.table import data_checksum as dc
from evaluator.table import fingerprint as fpmod
from evaluator.targets.targets import Target

TABLE = "ck_cache_docs"
SENTINEL = "5e471ee15e471ee1"  # a checksum no computation gives: only the cache can return it


@pytest.fixture
def table(database):
    rng = np.random.default_rng(5)
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(
            f"CREATE TABLE {TABLE} (id text PRIMARY KEY, embedding vector(8), body text, kb text)"
        )
        with c.cursor().copy(f"COPY {TABLE} (id, embedding, body, kb) FROM STDIN") as cp:
            for i, v in enumerate(rng.normal(size=(200, 8)), 1):
                cp.write_row((str(i), vec_text(v), f"doc {i}", "a" if i % 2 else "b"))
        c.execute("DELETE FROM pgeval.data_checksum")
    yield TABLE
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute("DELETE FROM pgeval.data_checksum")


def target(**filters) -> Target:
    return Target(
        name="ck",
        table=TABLE,
        id_column="id",
        vector_column="embedding",
        text_column="body",
        filters=dict(filters),
    )


def cached(conn, database, t):
    return dc.measure(conn, t, cache=dc.ChecksumCache(database=database))


def fresh(conn, t) -> dict:
    """The checksum computed as without a cache (one full scan)."""
    out = dc.measure(conn, t)
    assert (out.source, out.scans) == ("computed", 1)
    return out.data


def entries(conn) -> list[tuple]:
    return conn.execute(
        "SELECT key, rows, checksum FROM pgeval.data_checksum ORDER BY key"
    ).fetchall()


def test_unchanged_table_reuses_the_cached_checksum(conn, database, table):
    t = target()
    first = cached(conn, database, t)
    assert (first.source, first.scans) == ("computed", 2)
    assert first.data == fresh(conn, t) and first.data["rows"] == 200
    assert len(entries(conn)) == 1
    second = cached(conn, database, t)
    assert (second.source, second.scans) == ("reused", 1) and second.data == first.data
    assert second.note.startswith(dc.CONTENT_NOTE + ": reused (cached at ")
    # the value of a hit comes from the cache, not from a scan: tamper with it and see it come back
    conn.execute("UPDATE pgeval.data_checksum SET checksum = %s", (SENTINEL,))
    assert cached(conn, database, t).data["checksum"] == SENTINEL


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE {t} SET embedding = '[1,2,3,4,5,6,7,8]' WHERE id = '17'",
        "INSERT INTO {t} VALUES ('new', '[1,1,1,1,1,1,1,1]', 'new doc', 'a')",
        "DELETE FROM {t} WHERE id = '18'",
        "UPDATE {t} SET body = 'edited' WHERE id = '19'",
    ],
)
def test_any_committed_change_is_a_miss_with_the_right_checksum(conn, database, table, change):
    t = target()
    before = cached(conn, database, t)
    assert cached(conn, database, t).source == "reused"
    conn.execute(change.format(t=TABLE))
    after = cached(conn, database, t)
    assert (after.source, after.scans) == ("computed", 2)
    assert after.data == fresh(conn, t) and after.data != before.data
    again = cached(conn, database, t)
    assert again.source == "reused" and again.data == after.data
    assert len(entries(conn)) == 1  # the table's older version was dropped from the cache


def test_filters_are_part_of_the_key(conn, database, table):
    a, b = target(kb="a"), target(kb="b")
    ca, cb = cached(conn, database, a), cached(conn, database, b)
    assert ca.source == cb.source == "computed" and ca.data != cb.data
    assert ca.data == fresh(conn, a) and cb.data == fresh(conn, b)
    assert ca.data["rows"] == cb.data["rows"] == 100 and len(entries(conn)) == 2
    # a change outside the filter leaves the filtered rows, and their checksum, as they were
    conn.execute(f"UPDATE {TABLE} SET body = 'x' WHERE kb = 'b'")
    assert cached(conn, database, a).source == "reused"
    hit_b = cached(conn, database, b)
    assert hit_b.source == "computed" and hit_b.data == fresh(conn, b)


def test_a_rename_that_swaps_columns_is_a_miss(conn, database, table):
    """Names alone would not see it: the rows (ctid, xmin) stay, the column numbers move."""
    conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN other text")
    conn.execute(f"UPDATE {TABLE} SET other = 'other ' || id")
    t = target()
    cached(conn, database, t)
    conn.execute(f"ALTER TABLE {TABLE} RENAME COLUMN body TO tmp")
    conn.execute(f"ALTER TABLE {TABLE} RENAME COLUMN other TO body")
    after = cached(conn, database, t)
    assert after.source == "computed" and after.data == fresh(conn, t)


def test_fingerprint_says_reused_and_keeps_its_hash(conn, database, table):
    t = target()
    plain = fpmod.capture(conn, t)
    first = fpmod.capture(conn, t, cache=dc.ChecksumCache(conn))
    second = fpmod.capture(conn, t, cache=dc.ChecksumCache(conn))
    assert fpmod.config_hash(plain) == fpmod.config_hash(first) == fpmod.config_hash(second)
    assert first["info"]["checksum"].endswith(": computed")
    assert "reused (cached at" in second["info"]["checksum"]
    assert fpmod.capture(conn, t, checksum=False)["info"]["checksum"] == "skipped (--no-checksum)"


def test_a_busy_results_connection_is_not_committed(database, table):
    """A results connection inside a transaction is left alone: a short connection is used."""
    with database.connect() as res, database.connect(autocommit=True) as kb:
        res.execute("CREATE TEMP TABLE ck_marker (x int)")  # an open transaction of the caller
        cache = dc.ChecksumCache(res, database)
        assert dc.measure(kb, target(), cache=cache).source == "computed"
        assert dc.measure(kb, target(), cache=cache).source == "reused"
        res.rollback()  # had the cache committed it, the table would survive the rollback
        assert res.execute("SELECT to_regclass('pg_temp.ck_marker')").fetchone()[0] is None


def test_without_rights_on_the_cache_the_checksum_is_computed(database, table):
    with database.connect(autocommit=True) as c:
        c.execute("DROP ROLE IF EXISTS ck_reader")
        c.execute("CREATE ROLE ck_reader")
        c.execute(f"GRANT SELECT ON {TABLE} TO ck_reader")
        c.execute("GRANT USAGE ON SCHEMA pgeval TO ck_reader")
        try:
            with database.connect() as res:
                res.execute("SET ROLE ck_reader")
                res.commit()
                out = dc.measure(c, target(), cache=dc.ChecksumCache(res))
            assert out.source == "computed" and out.data == fresh(c, target())
            assert "checksum cache unavailable: permission denied" in out.note
        finally:
            c.execute("REVOKE ALL ON SCHEMA pgeval FROM ck_reader")
            c.execute(f"REVOKE ALL ON {TABLE} FROM ck_reader")
            c.execute("DROP ROLE ck_reader")
