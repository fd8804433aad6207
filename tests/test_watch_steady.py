"""A probe's steady path (tuning/sweep/remeasure.py, tuning/watch/epoch.py) on the embedded server: on a
tracked table whose configuration epoch is the one the series' point was measured under, the
point is measured again without capturing the fingerprints, looking the catalog up or running
EXPLAIN (JSON cost.path "steady"), and records what the lean path records on the same data; each
change the fingerprint, the plan or the data would see (a setting, an index rebuilt, statistics,
a row, the stored ground truth, the change log removed) makes the next probe take another path,
and the one after it is steady again; an interrupted steady probe leaves no row.
"""

from __future__ import annotations

import pytest

from tests import test_watch
from tests.test_watch import INDEX, LOW, PROBE, TABLE, TARGET, _probe
from tests.test_watch_lean import SAME, _point_latencies, kill_while_writing_results

kb = test_watch.kb  # the fixture: the clustered table and its HNSW index, as a target


@pytest.fixture(autouse=True)
def _forget_ground_truth(conn):
    yield
    conn.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))


@pytest.fixture
def tracked(kb, conn, pgeval):
    """The table tracked, and left alone by autovacuum: an autovacuum or autoanalyze of the
    freshly loaded table between two probes changes its epoch (its counts are in it), which
    would make a probe these tests expect steady take the lean path (rightly, once)."""
    conn.execute(f"ALTER TABLE {TABLE} SET (autovacuum_enabled = off)")
    conn.execute(f"ANALYZE {TABLE}")
    code, out, err = pgeval("target", "track", TARGET)
    assert code == 0 and "now tracked" in out, err


def _epoch_of(conn, sweep: str) -> str | None:
    return conn.execute(
        "SELECT r.params ->> 'epoch' FROM pgeval.run r JOIN pgeval.sweep_point sp USING (run_id) "
        "JOIN pgeval.sweep s USING (sweep_id) WHERE s.name = %s",
        (sweep,),
    ).fetchone()[0]


def test_a_steady_probe_records_what_the_lean_path_records(tracked, conn, pgeval):
    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert first["cost"]["path"] == "sweep"
    digest = _epoch_of(conn, first["sweep"])
    assert digest and len(digest) == 64  # recorded by the full path, read before it measured
    code, steady, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert steady["cost"]["path"] == "steady", steady["cost"]
    assert steady["cost"]["data_version"] == {
        "via": "change log",
        "scans": 0,
        "ms": steady["cost"]["data_version"]["ms"],
    }
    assert steady["ground_truth"]["status"] == "reused"
    assert _epoch_of(conn, steady["sweep"]) == digest
    # its own timed statements, stored and measured by the same SQL as every run's
    p50, p95, p99, timed = _point_latencies(conn, steady["sweep"])
    assert (steady["p50_ms"], steady["p95_ms"], steady["p99_ms"], timed) == (p50, p95, p99, 100)
    fp = conn.execute(
        "SELECT r.fingerprint, r.config_hash, r.params FROM pgeval.run r "
        "JOIN pgeval.sweep_point sp USING (run_id) JOIN pgeval.sweep s USING (sweep_id) "
        "WHERE s.name = %s",
        (steady["sweep"],),
    ).fetchone()
    assert fp[0]["info"]["epoch"] == digest and "change log unchanged" in fp[0]["info"]["checksum"]
    assert fp[1] == steady["config_hash"] and fp[2]["index"] == INDEX
    code, out, err = pgeval(*PROBE, *LOW)  # (the table output says so)
    assert code == 0 and "configuration epoch unchanged: fingerprints and plan kept" in out, err
    # the lean path on the same data (the epoch forgotten): the same row
    conn.execute(
        "UPDATE pgeval.run SET params = params - 'epoch' WHERE params ? 'epoch' AND name LIKE %s",
        (steady["sweep"] + "%",),
    )
    code, lean, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert lean["cost"]["path"] == "point"
    for key in SAME:
        assert lean[key] == steady[key], key
    assert _epoch_of(conn, lean["sweep"]) == digest  # recorded again: the next is steady
    code, again, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert again["cost"]["path"] == "steady"
    assert conn.execute("SELECT count(*) FROM pgeval.probe").fetchone() == (5,)


def _alter_database(conn, value: str | None) -> None:
    db = conn.execute("SELECT current_database()").fetchone()[0]
    if value is None:
        conn.execute(f'ALTER DATABASE "{db}" RESET hnsw.ef_search')
    else:
        conn.execute(f'ALTER DATABASE "{db}" SET hnsw.ef_search = {value}')


CHANGES = {
    # a default the exact stage's fingerprint sees (the probe sets its own for the point)
    "setting": lambda database, conn: _alter_database(conn, "7"),
    "reindex": lambda database, conn: conn.execute(f"REINDEX INDEX {INDEX}"),
    "analyze": lambda database, conn: conn.execute(f"ANALYZE {TABLE}"),
    "row": lambda database, conn: conn.execute(
        f"INSERT INTO {TABLE} (id, e) SELECT 'steady-new', e FROM {TABLE} LIMIT 1"
    ),
    "ground truth": lambda database, conn: conn.execute(
        "DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,)
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_the_epoch_holds_takes_another_path_once(tracked, database, conn, pgeval, change):
    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    code, steady, err = _probe(pgeval, *LOW)
    assert code == 0 and steady["cost"]["path"] == "steady", err
    try:
        CHANGES[change](database, conn)
        code, after, err = _probe(pgeval, *LOW)
        assert code == 0, err
        assert after["cost"]["path"] in ("point", "sweep"), (change, after["cost"])
        if change == "row":
            assert after["data_version"] != steady["data_version"]
        if change == "ground truth":
            assert after["ground_truth"]["status"] == "computed"
        if change == "reindex":
            assert after["index_build"] != steady["index_build"]
        code, settled, err = _probe(pgeval, *LOW)
        assert code == 0, err
        assert settled["cost"]["path"] == "steady", (change, settled["cost"])
        assert settled["recall"] == after["recall"]
        assert settled["config_hash"] == after["config_hash"]
    finally:
        if change == "setting":
            _alter_database(conn, None)


def test_an_untracked_table_has_no_steady_path(tracked, conn, pgeval):
    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    code, out, err = pgeval("target", "untrack", TARGET)
    assert code == 0, err
    for _ in range(2):
        code, probe, err = _probe(pgeval, *LOW)
        assert code == 0, err
        assert probe["cost"]["path"] == "point"
        assert probe["cost"]["data_version"]["scans"] >= 1


def test_an_interrupted_steady_probe_leaves_no_row(tracked, database, conn, pgeval):
    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    code, steady, err = _probe(pgeval, *LOW)
    assert code == 0 and steady["cost"]["path"] == "steady", err
    kill_while_writing_results(database, conn)
    assert conn.execute("SELECT count(*) FROM pgeval.probe").fetchone() == (2,)
    status = "SELECT status FROM pgeval.sweep WHERE name = %s"
    assert conn.execute(status, (first["sweep"],)).fetchone() == ("running",)
    code, after, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert after["cost"]["path"] == "sweep"
    assert after["recall"] == steady["recall"] and after["config_hash"] == steady["config_hash"]
    code, again, err = _probe(pgeval, *LOW)
    assert code == 0 and again["cost"]["path"] == "steady", err
