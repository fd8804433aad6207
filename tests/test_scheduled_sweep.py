"""A sweep run on a schedule (issue "Safe to point at production", items 2 and 3), on the embedded
server: the identical command, run again after the data changed, measures again under the new
data, keeps the earlier points as history under their own configuration and says in one line what
changed; a VACUUM after updates and deletes (which repairs an HNSW graph without changing the rows
or the index's build) is a change of configuration too; with nothing changed, nothing is measured.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

TABLE, TARGET, INDEX = "sched_kb", "sched", "sched_kb_hnsw"
N, DIM = 2000, 16
SWEEP = [
    "sweep",
    "--sample-queries",
    "40",
    "--target",
    TARGET,
    "--stage",
    "hnsw",
    "--param",
    "hnsw.ef_search=10,40",
    "--repeat",
    "1",
    "--set",
    "enable_seqscan=off",
    "--name",
    "nightly",
    "--format",
    "json",
]


def _vec(v) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


@pytest.fixture
def sched(conn, clean, pgeval):
    """A clustered table with an HNSW index (built fresh for each test) and its target."""
    rng = np.random.default_rng(11)
    centers = rng.normal(size=(20, DIM))
    vecs = centers[rng.integers(0, 20, N)] + 0.3 * rng.normal(size=(N, DIM))
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, emb vector({DIM}))")
    with conn.cursor().copy(f"COPY {TABLE} (id, emb) FROM STDIN") as cp:
        for i, v in enumerate(vecs, 1):
            cp.write_row((f"c{i}", _vec(v)))
    conn.execute(
        f"CREATE INDEX {INDEX} ON {TABLE} USING hnsw (emb vector_cosine_ops) "
        "WITH (m = 4, ef_construction = 10)"
    )
    conn.execute(f"VACUUM ANALYZE {TABLE}")
    code, out, err = pgeval(
        "target", "add", TARGET, "--table", TABLE, "--id-column", "id", "--vector-column", "emb"
    )
    assert code == 0, err
    yield rng
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


def _flush_stats(conn) -> None:
    """Make this session's table statistics (dead tuples) visible to other sessions now."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")


def _sweep(pgeval) -> tuple[dict, str]:
    code, out, err = pgeval(*SWEEP)
    assert code == 0, err
    return json.loads(out), err


def test_rerun_after_a_data_change_measures_again_and_keeps_history(sched, conn, pgeval):
    first, _ = _sweep(pgeval)
    assert first["measured"] == 2 and first["previous"] is None
    # sampled queries: the bias of a query's own row is said beside the figures, and the
    # warning explains the one extra row fetched (issue "A recommendation a DBA can sign")
    from evaluator.api.vocabulary import SAMPLED_BIAS

    assert first["notes"] == [SAMPLED_BIAS]
    assert any(
        "hnsw.ef_search=10 is below the 11 rows the figures at cut-off 10 need (plus the "
        "sampled query's own row, which is dropped)" in w
        for w in first["warnings"]
    ), first["warnings"]
    # nothing changed: the same command measures nothing
    again, err = _sweep(pgeval)
    assert again["measured"] == 0 and again["kept"] == 2 and again["previous"] is None
    assert again["config_hash"] == first["config_hash"]
    # 1 % of the rows change, as a knowledge base does every day
    rng = sched
    conn.execute(
        f"UPDATE {TABLE} SET emb = %s::vector WHERE id = ANY(%s)",
        (_vec(rng.normal(size=DIM)), [f"c{i}" for i in range(1, N // 100 + 1)]),
    )
    changed, err = _sweep(pgeval)
    assert changed["measured"] == 2 and changed["reused"] == 0 and changed["kept"] == 0
    previous = changed["previous"]
    assert previous["sweep"].startswith("nightly@")
    keys = [c["key"] for c in previous["changes"]]
    assert "data.checksum" in keys, keys
    # one line on stderr says what changed and where the earlier points are
    line = [x for x in err.splitlines() if "configuration changed" in x]
    assert len(line) == 1 and "data.checksum" in line[0] and previous["sweep"] in line[0]
    # the history: the earlier sweep, its experiment and its runs under the new name, intact
    points = dict(
        conn.execute(
            "SELECT s.name, count(*) FROM pgeval.sweep s JOIN pgeval.sweep_point p "
            "USING (sweep_id) GROUP BY s.name"
        ).fetchall()
    )
    assert points == {previous["sweep"]: 2, "nightly": 2}
    code, out, err = pgeval("stage-report", previous["sweep"], "--format", "json")
    assert code == 0, err
    old_runs = conn.execute(
        "SELECT count(*) FROM pgeval.run r JOIN pgeval.experiment e USING (experiment_id) "
        "WHERE e.name = %s AND r.name LIKE %s",
        (previous["sweep"], previous["sweep"] + ".%"),
    ).fetchone()[0]
    assert old_runs == 3  # exact + two points, renamed with their sweep
    code, out, err = pgeval("diff", previous["sweep"], "nightly", "--format", "json")
    assert code == 0, err
    assert "data.checksum" in out


def test_a_vacuum_after_updates_and_deletes_is_seen(sched, conn, database, pgeval):
    rng = sched
    with database.connect(results=False, autocommit=True) as w:
        ids = [f"c{i}" for i in range(1, N + 1)]
        moved = rng.choice(ids, N // 20, replace=False).tolist()
        for cid in moved:
            w.execute(
                f"UPDATE {TABLE} SET emb = %s::vector WHERE id = %s",
                (_vec(rng.normal(size=DIM)), cid),
            )
        gone = rng.choice(sorted(set(ids) - set(moved)), N // 50, replace=False).tolist()
        w.execute(f"DELETE FROM {TABLE} WHERE id = ANY(%s)", (gone,))
        _flush_stats(w)
    before, _ = _sweep(pgeval)
    assert before["measured"] == 2
    conn.execute(f"VACUUM {TABLE}")
    after, err = _sweep(pgeval)
    assert after["measured"] == 2, "a VACUUM changes the index's answers: measured again"
    keys = [c["key"] for c in after["previous"]["changes"]]
    assert f"indexes.{INDEX}.state.dead_tuples" in keys, keys
    assert "data.checksum" not in keys  # the rows are the same
    # and a VACUUM with nothing to remove changes nothing
    conn.execute(f"VACUUM {TABLE}")
    same, err = _sweep(pgeval)
    assert same["measured"] == 0 and same["previous"] is None, err


def test_a_sweep_that_measured_nothing_keeps_no_configuration(sched, conn, pgeval):
    """Refused before its first point (here by the plan check: no index), then the index is
    built: the same command measures, with no history and no 'configuration changed' line."""
    conn.execute(f"DROP INDEX {INDEX}")
    code, out, err = pgeval(*SWEEP)
    assert code == 1 and "Traceback" not in err
    assert conn.execute("SELECT count(*) FROM pgeval.sweep_point").fetchone()[0] == 0
    # refused before any work: no sweep, no exact run left behind (tests/test_failed_sweep.py)
    assert conn.execute("SELECT name FROM pgeval.sweep").fetchall() == []
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == 0
    conn.execute(
        f"CREATE INDEX {INDEX} ON {TABLE} USING hnsw (emb vector_cosine_ops) "
        "WITH (m = 4, ef_construction = 10)"
    )
    doc, err = _sweep(pgeval)
    assert doc["measured"] == 2 and doc["previous"] is None
    assert "configuration changed" not in err
    names = [r[0] for r in conn.execute("SELECT name FROM pgeval.sweep").fetchall()]
    assert names == ["nightly"]


def test_the_plot_title_is_words_not_hashes():
    from types import SimpleNamespace

    from evaluator.cli.commands.sweep_cmd import plot_title

    res = SimpleNamespace(
        queries={"source": "sample", "count": 300},
        testset="queries-962ec82bb75191de",
        server={"host": "/run/pg", "port": "5433", "in_recovery": True},
    )
    title = plot_title(res, "hnsw", "kb")
    assert title == "hnsw on target kb · 300 sampled rows · server /run/pg:5433 (standby)"
    assert "962ec" not in title
