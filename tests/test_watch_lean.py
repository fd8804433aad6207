"""A probe's lean path (tuning/sweep/remeasure.py) on the embedded server: on unchanged data the
series' sweep is kept and only its point measured again (JSON cost.path "point"), recording what
the full one-point sweep records on the same data; its fingerprint is captured afresh every
probe, so a server setting changed between probes, or an index rebuilt, is seen at the next one
(a new configuration hash, the full path); an interrupted lean probe leaves no probe row and the
next probe measures in full.
"""

from __future__ import annotations

import time

import pytest

from tests import test_watch
from tests.helpers import kill_9_while_waiting
from tests.test_watch import INDEX, LOW, PROBE, TARGET, _probe

kb = test_watch.kb  # the fixture: the clustered table and its HNSW index, as a target


@pytest.fixture(autouse=True)
def _forget_ground_truth(conn):
    """The target's stored ground truth deleted after each test (the next module's first probe
    computes its own, as it expects)."""
    yield
    conn.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))


SAME = (
    "recall", "rows_mean", "queries", "table_rows", "data_version", "index_name", "index_build",
    "index_state", "config_hash", "settings", "query_source", "testset", "ground_truth", "sweep",
    "k", "stage",
)  # fmt: skip


def _point_latencies(conn, sweep: str) -> tuple:
    """(p50, p95, p99, timed queries) of the probe's point run, by pgeval.nearest_rank."""
    return conn.execute(
        "SELECT pgeval.nearest_rank(array_agg(t.latency_ms), 0.5), "
        "pgeval.nearest_rank(array_agg(t.latency_ms), 0.95), "
        "pgeval.nearest_rank(array_agg(t.latency_ms), 0.99), count(*) "
        "FROM pgeval.query_timing t JOIN pgeval.sweep_point sp USING (run_id) "
        "JOIN pgeval.sweep s USING (sweep_id) WHERE s.name = %s",
        (sweep,),
    ).fetchone()


def kill_while_writing_results(database, conn) -> None:
    """kill -9 a probe (``LOW``) while its point's new run writes its results: it reads the
    judgements there, blocked by a lock on them."""
    kill_9_while_waiting(
        database,
        conn,
        "LOCK TABLE pgeval.qrel IN ACCESS EXCLUSIVE MODE",
        [*PROBE, *LOW],
        "%pgeval.qrel%",
    )


def _forget(conn, sweep: str) -> None:
    """The series' sweep deleted: its next probe takes the full path."""
    conn.execute("DELETE FROM pgeval.experiment WHERE name = %s", (sweep,))
    conn.execute("DELETE FROM pgeval.sweep WHERE name = %s", (sweep,))


def test_an_unchanged_probe_measures_only_its_point_and_records_what_a_full_one_does(
    kb, conn, pgeval
):
    code, first, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0, err
    assert first["cost"]["path"] == "sweep"
    uses = "SELECT uses FROM pgeval.ground_truth WHERE target = %s"
    before = conn.execute(uses, (TARGET,)).fetchone()
    runs = "SELECT count(*) FROM pgeval.run r JOIN pgeval.experiment e USING (experiment_id) WHERE e.name = %s"
    code, lean, err = _probe(pgeval, *LOW, "--min-recall", "0.5")  # (the same series)
    assert code == 0, err
    assert lean["cost"]["path"] == "point" and lean["ground_truth"]["status"] == "reused"
    assert lean["sweep"] == first["sweep"]
    # the sweep's row says what this probe asked (its target recall: --min-recall's), as the
    # full path's would
    assert conn.execute(
        "SELECT status, target_recall FROM pgeval.sweep WHERE name = %s", (lean["sweep"],)
    ).fetchone() == ("complete", 0.5)
    # the point's run replaced, the exact run kept (not copied again from the stored lists)
    assert conn.execute(runs, (lean["sweep"],)).fetchone() == (2,)
    assert conn.execute(uses, (TARGET,)).fetchone() == before
    p50, p95, p99, timed = _point_latencies(conn, lean["sweep"])
    assert (lean["p50_ms"], lean["p95_ms"], lean["p99_ms"], timed) == (p50, p95, p99, 100)
    _forget(conn, lean["sweep"])
    code, full, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0, err
    assert full["cost"]["path"] == "sweep" and full["ground_truth"]["status"] == "reused"
    p50, p95, p99, timed = _point_latencies(conn, full["sweep"])
    assert (full["p50_ms"], full["p95_ms"], full["p99_ms"], timed) == (p50, p95, p99, 100)
    assert {key: lean[key] for key in SAME} == {key: full[key] for key in SAME}
    assert {key: first[key] for key in SAME if key != "ground_truth"} == {
        key: full[key] for key in SAME if key != "ground_truth"
    }
    # the fingerprint the lean path records is its own, captured afresh (not an earlier
    # probe's): captured after the probe before it was recorded
    time.sleep(1.1)  # (captured_at has whole seconds)
    code, again, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert again["cost"]["path"] == "point" and again["config_hash"] == full["config_hash"]
    captured, earlier = conn.execute(
        "SELECT (r.fingerprint -> 'info' ->> 'captured_at')::timestamptz, "
        "(SELECT probed_at FROM pgeval.probe WHERE probe_id = %s) "
        "FROM pgeval.probe p JOIN pgeval.sweep s ON s.name = p.sweep "
        "JOIN pgeval.sweep_point sp ON sp.sweep_id = s.sweep_id "
        "JOIN pgeval.run r ON r.run_id = sp.run_id WHERE p.probe_id = %s",
        (full["probe_id"], again["probe_id"]),
    ).fetchone()
    assert captured > earlier


def test_a_setting_changed_between_probes_is_seen_at_the_next_probe(kb, conn, database, pgeval):
    """The fingerprint is read afresh each probe: a planner setting changed for the database
    (ALTER DATABASE ... SET, seen by new sessions) gives a new configuration hash and the full
    path; set back, the next probe measures under the first hash again; an index dropped and
    created again is a new build: the full path, its new build recorded."""
    code, first, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0, err
    code, lean, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert lean["cost"]["path"] == "point" and lean["config_hash"] == first["config_hash"]
    name = conn.execute("SELECT current_database()").fetchone()[0]
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f'ALTER DATABASE "{name}" SET random_page_cost = 1.7')
    try:
        code, changed, err = _probe(pgeval, *LOW, "--min-recall", "0")
        assert code == 0, err
        assert changed["cost"]["path"] == "sweep"
        assert changed["config_hash"] != first["config_hash"]
        planner = conn.execute(
            "SELECT r.fingerprint -> 'planner' ->> 'random_page_cost' FROM pgeval.probe p "
            "JOIN pgeval.sweep s ON s.name = p.sweep "
            "JOIN pgeval.sweep_point sp ON sp.sweep_id = s.sweep_id "
            "JOIN pgeval.run r ON r.run_id = sp.run_id WHERE p.probe_id = %s",
            (changed["probe_id"],),
        ).fetchone()
        assert planner == ("1.7",)
        code, kept, err = _probe(pgeval, *LOW, "--min-recall", "0")
        assert kept["cost"]["path"] == "point" and kept["config_hash"] == changed["config_hash"]
    finally:
        with database.connect(results=False, autocommit=True) as c:
            c.execute(f'ALTER DATABASE "{name}" RESET random_page_cost')
    code, back, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert back["cost"]["path"] == "sweep" and back["config_hash"] == first["config_hash"]
    with database.connect(results=False, autocommit=True) as c:
        ddl = c.execute("SELECT pg_get_indexdef(%s::regclass)", (INDEX,)).fetchone()[0]
        c.execute(f"DROP INDEX {INDEX}")
        c.execute(ddl)
    code, rebuilt, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0, err
    assert rebuilt["cost"]["path"] == "sweep"
    assert rebuilt["index_build"]["oid"] != back["index_build"]["oid"]
    assert rebuilt["config_hash"] != back["config_hash"]


@pytest.mark.slow
def test_a_lean_probe_killed_while_its_point_runs_leaves_no_row_and_the_next_runs_in_full(
    kb, conn, database, pgeval
):
    """Killed (kill -9) after the kept sweep's point run was deleted, while its new run's results
    are written (waiting on a lock): no probe row; the sweep is left incomplete, and the next
    probe measures it in full."""
    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    kill_while_writing_results(database, conn)
    assert conn.execute("SELECT count(*) FROM pgeval.probe").fetchone() == (1,)
    status = "SELECT status FROM pgeval.sweep WHERE name = %s"
    assert conn.execute(status, (first["sweep"],)).fetchone() == ("running",)
    code, after, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert after["cost"]["path"] == "sweep"
    assert conn.execute(status, (first["sweep"],)).fetchone() == ("complete",)
    assert conn.execute("SELECT count(*) FROM pgeval.probe").fetchone() == (2,)
    assert after["recall"] == first["recall"] and after["config_hash"] == first["config_hash"]
