"""`pgeval watch` (issue 27) on the embedded server: a probe at the production setting records one
row of pgeval.probe and reads back through pgeval.probe_history; on unchanged data it reuses the
stored exact ground truth; after the table drifts from its HNSW graph (a new cluster inserted far
from the indexed data, a share of the rows deleted) the probe measures the new data, crosses its
bound with exit code 2, names it with since when and the rows changed since the index build's
first probe, and measures the setting that restores recall on the same queries; a REINDEX starts
a new index build whose queries get their rows back; --format openmetrics parses; kill -9 leaves no half row.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests import clustered_kb
from tests.helpers import kill_9_while_waiting

ROOT = Path(__file__).resolve().parent.parent
TABLE, TARGET, INDEX = "watch_kb", "watchkb", "watch_kb_hnsw"
N, DIM, NEW, GONE = 2000, 16, 3000, 800
# a modest graph (m=8, ef_construction=32) at a low ef_search: recall ~0.9 on the built data
PROBE = [
    "watch",
    "--target",
    TARGET,
    "--stage",
    "hnsw",
    "--set",
    "enable_seqscan=off",  # a small table: the planner would scan it
]
LOW = ["--set", "hnsw.ef_search=10"]


@pytest.fixture
def kb(database, conn, clean, pgeval, tmp_path):
    conn.execute("DELETE FROM pgeval.probe")
    clustered_kb.build(
        database,
        tmp_path,
        TABLE,
        dim=DIM,
        n=N,
        nq=1,
        seed=7,
        spread=0.3,
        indexes=[
            f"CREATE INDEX {INDEX} ON {TABLE} USING hnsw (e vector_cosine_ops) "
            "WITH (m = 8, ef_construction = 32)"
        ],
    )
    code, out, err = pgeval(
        "target", "add", TARGET, "--table", TABLE, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err
    yield database
    conn.execute("DELETE FROM pgeval.probe")
    clustered_kb.drop(database, TABLE)


def _probe(pgeval, *args: str) -> tuple[int, dict, str]:
    code, out, err = pgeval(*PROBE, *args, "--format", "json")
    assert code in (0, 2), err
    assert "Traceback" not in err
    return code, json.loads(out), err


def _history(conn) -> list[dict]:
    cur = conn.execute("SELECT * FROM pgeval.probe_history ORDER BY probe_id")
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _drift(database) -> None:
    """A new cluster far from every indexed vector, inserted after the build, and 800 of the
    built rows deleted (the graph keeps them until a VACUUM)."""
    rng = np.random.default_rng(99)
    far = 3.0 * rng.normal(size=DIM)
    new = far + 0.3 * rng.normal(size=(NEW, DIM))
    with database.connect(results=False, autocommit=True) as c:
        with c.cursor().copy(f"COPY {TABLE} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(new, 1):
                cp.write_row((f"n{i}", clustered_kb.vtext(v)))
        c.execute(
            f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} WHERE id LIKE 'c%%' "
            f"ORDER BY md5(id) LIMIT {GONE})"
        )


def test_a_probe_records_its_row_and_reuses_the_ground_truth_on_unchanged_data(kb, conn, pgeval):
    code, first, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0, err
    assert 0 < first["recall"] <= 1
    assert first["status"] == "ok" and first["crossed"] == []
    assert first["setting"] == {"hnsw.ef_search": "10"}
    assert first["ground_truth"]["status"] == "computed"
    assert first["queries"] == 100 and first["table_rows"] == N
    assert first["index_name"] == INDEX
    oid, node = conn.execute(
        "SELECT oid, relfilenode FROM pg_class WHERE relname = %s", (INDEX,)
    ).fetchone()
    assert first["index_build"]["oid"] == oid and first["index_build"]["filenode"] == node
    assert first["index_build"]["options"] == {"m": "8", "ef_construction": "32"}
    # the row, as the view shows it: the SQL summary of the probe's sweep, copied
    (row,) = _history(conn)
    assert row["probe_id"] == first["probe_id"] and row["recall"] == first["recall"]
    assert row["settings"]["hnsw.ef_search"] == "10" and row["ground_truth"] == "computed"
    assert row["baseline_recall"] == row["recall"] and row["previous_recall"] is None
    swept = conn.execute(
        "SELECT index_recall, p95_ms FROM pgeval.sweep_point sp JOIN pgeval.sweep s "
        "USING (sweep_id) WHERE s.name = %s",
        (row["sweep"],),
    ).fetchone()
    assert swept == (row["recall"], row["p95_ms"])
    # the same probe on unchanged data: the stored ground truth is reused, the recall is the
    # same (same graph, same queries), and the history has two rows of one series and build
    code, again, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0, err
    assert again["ground_truth"]["status"] == "reused"
    assert again["recall"] == first["recall"]
    rows = _history(conn)
    assert [r["probe_id"] for r in rows] == [first["probe_id"], again["probe_id"]]
    assert rows[1]["previous_recall"] == first["recall"]
    assert rows[1]["baseline_at"] == rows[0]["probed_at"]
    assert rows[1]["rows_since_baseline"] == 0
    # the table output says reused, and only one sweep is kept per series
    code, out, err = pgeval(*PROBE, *LOW)
    assert code == 0, err
    assert "exact ground truth: reused" in out and "no bounds given" in out
    assert conn.execute(
        "SELECT count(*) FROM pgeval.sweep WHERE name LIKE 'watch-%'"
    ).fetchone() == (1,)


def _lists(conn, depth: int = 10) -> dict[str, list[str]]:
    """The stored exact top-``depth`` chunk ids per query of the target's one ground truth."""
    out: dict[str, list[str]] = {}
    for qid, chunk in conn.execute(
        "SELECT r.query_id, r.chunk_id FROM pgeval.ground_truth_result r "
        "JOIN pgeval.ground_truth g USING (gt_id) WHERE g.target = %s AND r.rank <= %s "
        "ORDER BY r.query_id, r.rank",
        (TARGET, depth),
    ).fetchall():
        out.setdefault(qid, []).append(chunk)
    return out


def _churn(database, conn, rng) -> int:
    """About 1 % of the rows changed where the probe's lists are: rows inserted next to listed
    chunks (they enter the lists), listed chunks moved far away or deleted (they leave them);
    returns the rows changed."""
    listed = sorted({c for ids in _lists(conn).values() for c in ids})
    moved, gone, near = (list(x) for x in np.array_split(rng.permutation(listed)[:21], 3))
    with database.connect(results=False, autocommit=True) as c:
        for i, chunk in enumerate(near, 1):
            c.execute(
                f"INSERT INTO {TABLE} (id, e) SELECT %s, e FROM {TABLE} WHERE id = %s",
                (f"near{i}-{chunk}", chunk),
            )
        for chunk in moved:
            c.execute(
                f"UPDATE {TABLE} SET e = %s WHERE id = %s",
                (clustered_kb.vtext(5.0 * rng.normal(size=DIM)), chunk),
            )
        c.execute(f"DELETE FROM {TABLE} WHERE id = ANY(%s)", (gone,))
    return len(near) + len(moved) + len(gone)


def test_after_a_small_change_the_ground_truth_is_refreshed_incrementally_and_exactly(
    kb, conn, database, pgeval
):
    from evaluator.ground_truth import refresh as ground_truth_refresh

    # (an earlier test's ground truth of the same rows would be reused: computed here)
    conn.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))
    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert first["ground_truth"]["status"] == "computed"
    assert first["ground_truth"]["refresh"] == "full"
    rng = np.random.default_rng(3)
    for _ in range(2):  # twice: a refreshed ground truth is refreshed again
        changed = _churn(database, conn, rng)
        refreshed = ground_truth_refresh.REFRESHED["count"]
        code, out, err = pgeval(*PROBE, *LOW)
        assert code == 0, err
        assert ground_truth_refresh.REFRESHED["count"] == refreshed + 1
        row = _history(conn)[-1]
        assert row["ground_truth"] == "incremental"
        assert f"exact ground truth: incremental ({changed:,} rows changed)" in out, out
        incremental = _lists(conn)
        # the same lists as a full recomputation of the same queries on the same data
        conn.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))
        code, full, err = _probe(pgeval, *LOW)
        assert code == 0, err
        assert full["testset"] == row["testset"]  # the same sample: the data is the same
        assert full["ground_truth"]["refresh"] == "full"
        assert _lists(conn) == incremental and len(incremental) == 100
    # the lists changed: rows inserted next to listed chunks entered them
    assert any(c.startswith("near") for ids in incremental.values() for c in ids)
    # unchanged data: the query set and the ground truth are reused as stored
    code, again, err = _probe(pgeval, *LOW)
    assert again["ground_truth"]["refresh"] == "reused" and again["testset"] == full["testset"]


def test_a_large_change_computes_the_ground_truth_in_full_and_says_why(kb, conn, database, pgeval):
    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    _drift(database)  # 3,000 rows inserted, 800 deleted: far more than 10 %
    code, doc, err = _probe(pgeval, *LOW)
    gt = doc["ground_truth"]
    assert gt["status"] == "computed" and gt["refresh"] == "full"
    assert re.search(
        r"in full: more than [\d,]+ of 4,200 rows changed, more than 10%", gt["reason"]
    ), gt
    # (this drift's ground truth would be reused by the next test's same drift: not kept)
    conn.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))


def test_drift_crosses_the_bound_names_it_and_the_remedies_restore_recall(
    kb, conn, database, pgeval
):
    # the graph left as the drift leaves it: an autovacuum (800 dead rows) would repair it
    # mid-test, at a moment of its own, and change the recall between two probes
    conn.execute(f"ALTER TABLE {TABLE} SET (autovacuum_enabled = off)")
    code, first, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0, err
    _drift(database)
    rows_now = N + NEW - GONE
    # recall 1.0 is out of reach at ef_search=10: the bound is crossed, deterministically
    code, doc, err = _probe(pgeval, *LOW, "--min-recall", "1.0", "--no-remedy")
    assert code == 2, err
    assert doc["status"] == "crossed" and doc["crossed"] == ["min_recall"]
    assert doc["table_rows"] == rows_now
    assert doc["index_build"]["oid"] == first["index_build"]["oid"]  # the same build
    # the sample follows the table: rows of the new cluster are among the queries, deleted
    # rows are not, and the exact ground truth of these queries on this data is computed
    assert doc["testset"] != first["testset"] and doc["ground_truth"]["status"] == "computed"
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT q.query_id FROM pgeval.query q JOIN pgeval.testset t USING (testset_id) "
            "WHERE t.name = %s",
            (doc["testset"],),
        ).fetchall()
    ]
    assert len(ids) == 100 and any(i.startswith("n") for i in ids)
    alive = {r[0] for r in conn.execute(f"SELECT id FROM {TABLE}").fetchall()}
    assert set(ids) <= alive
    # the earlier sample and its ground truth are gone: one query set and one ground truth per
    # series are kept, however often the data changes
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM pgeval.testset WHERE source_format = 'queries'"
        ).fetchall()
    ]
    assert names == [doc["testset"]]
    assert conn.execute(
        "SELECT count(*) FROM pgeval.ground_truth WHERE target = %s", (TARGET,)
    ).fetchone() == (1,)
    assert doc["rows_since_baseline"] == NEW - GONE and doc["baseline_rows"] == N
    line = [x for x in err.splitlines() if x.startswith("pgeval: watch: ")]
    assert len(line) == 1, err
    assert re.search(r"recall@10 \d\.\d{3} < 1 since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", line[0])
    assert f"+{NEW - GONE:,} rows ({N:,} -> {rows_now:,})" in line[0]
    assert f"since the first probe of index build {INDEX} (oid " in line[0]
    assert doc["remedy"] is None
    # the recall fell with the build unchanged: said, with the rebuild statement
    assert doc["recall"] < first["recall"]
    assert any(
        "with the index build unchanged while the table changed" in a for a in doc["advice_lines"]
    )
    assert doc["reindex"] == f"REINDEX INDEX CONCURRENTLY {INDEX};"
    # a second probe still under the bound: "since" is the first probe that crossed it
    code, later, err = _probe(pgeval, *LOW, "--min-recall", "1.0", "--no-remedy")
    assert code == 2
    since = conn.execute(
        "SELECT pgeval.probe_crossed_since(%s, 'min_recall')", (later["probe_id"],)
    ).fetchone()[0]
    assert since == _history(conn)[1]["probed_at"]
    # a bound that is not crossed exits 0 on the same data
    code, ok, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0 and ok["crossed"] == []
    # the remedy, measured on the same queries: the smallest ef_search reaching a bound above
    # the recall at LOW. Both ends depend on the build: HNSW draws each row's level at random
    # (pgvector's generator, which SQL cannot seed), and the drift's far cluster is reached only
    # through the few links the random graph gives it. Measured over 20 builds of this fixture
    # and drift (10 with autovacuum off): recall at LOW 0.657-0.752; at ef_search 1000 (the
    # remedy's largest value, --remedy-max) 0.94-0.99 but for 2 builds of 20, 0.81 and 0.84
    # (the far cluster barely linked): the fixed bound 0.8 this test had was out of reach on
    # some builds. The gap between the two: 0.153-0.252. The bound is set halfway between this
    # build's two recalls, both measured: crossed at LOW, reached below 1000 (in the 10 builds
    # so measured: bound 0.750-0.864, reached at ef_search 14 or 15)
    code, top, err = _probe(pgeval, "--set", "hnsw.ef_search=1000", "--min-recall", "0")
    assert code == 0, err
    assert top["testset"] == later["testset"]  # the same queries
    assert top["recall"] > later["recall"] + 0.05, (later["recall"], top["recall"])
    goal = round((later["recall"] + top["recall"]) / 2, 3)
    code, doc, err = _probe(pgeval, *LOW, "--min-recall", str(goal))
    assert code == 2, err
    remedy = doc["remedy"]
    assert remedy["reached"] and remedy["setting"] == "hnsw.ef_search", remedy
    assert int(remedy["value"]) > 10 and remedy["recall"] >= goal - 1e-12
    # measured, not guessed: a probe at that setting reaches the bound
    code, fixed, err = _probe(
        pgeval, "--set", f"hnsw.ef_search={remedy['value']}", "--min-recall", str(goal)
    )
    assert code == 0, err
    # the same mean by two SQL paths: equal up to the order of a floating-point sum
    assert fixed["recall"] == pytest.approx(remedy["recall"], abs=1e-12)
    # REINDEX INDEX CONCURRENTLY: a new build, whose first probe is its baseline, and recall back
    with database.connect(results=False, autocommit=True) as c:
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(doc["reindex"])
    code, rebuilt, err = _probe(pgeval, *LOW, "--min-recall", "0")
    assert code == 0, err
    assert rebuilt["index_build"]["filenode"] != doc["index_build"]["filenode"]
    assert rebuilt["baseline_at"] == rebuilt["probed_at"] and rebuilt["changes"] is None
    # the deleted rows no longer take the graph's candidate slots: every query gets its rows
    # back (recall itself depends on the new graph's random levels: measured, not asserted)
    assert doc["rows_mean"] < first["rows_mean"] == rebuilt["rows_mean"], (doc, rebuilt)


def test_max_drop_is_against_the_first_probe_of_the_build(kb, conn, database, pgeval):
    code, first, err = _probe(pgeval, *LOW, "--max-drop", "0.05")
    assert code == 0 and first["crossed"] == []
    # a build sweep of the user's on the same sample (its query set is the probe's), of the
    # index's own design: its build time is what a rebuild is expected to take
    code, out, err = pgeval(
        "sweep", "--sample-queries", "100", "--target", TARGET, "--stage", "hnsw",
        "--build", "m=8", "--build", "ef_construction=32", "--param", "hnsw.ef_search=10",
        "--repeat", "1", "--set", "enable_seqscan=off", "--name", "mine", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    built = json.loads(out)
    assert built["testset"] == first["testset"]
    (point,) = built["points"]
    _drift(database)
    code, doc, err = _probe(pgeval, *LOW, "--max-drop", "0.05", "--no-remedy")
    # the user's sweep keeps the query set the probe no longer uses
    assert conn.execute(
        "SELECT count(*) FROM pgeval.testset WHERE name = %s", (first["testset"],)
    ).fetchone() == (1,)
    assert doc["recall_drop"] == pytest.approx(first["recall"] - doc["recall"])
    assert (code == 2) == (doc["recall_drop"] > 0.05)
    assert code == 2, doc  # measured: about 0.2 lower after this drift
    assert doc["crossed"] == ["max_drop"]
    last = doc["last_build"]
    assert last["sweep"] == "mine" and last["rows"] == N
    assert last["build_ms"] == point["build_ms"] > 0
    assert any(
        a.startswith(
            "the last build sweep built this design (m=8, ef_construction=32) on 2,000 rows in "
        )
        and a.endswith(f"the table has {N + NEW - GONE:,} rows now")
        for a in doc["advice_lines"]
    ), doc["advice_lines"]
    assert "the first probe of this index build" in err and "more than --max-drop 0.05" in err


def test_probes_of_one_series_do_not_overlap(kb, conn, database, pgeval):
    from evaluator.core.canonical import sha256_hex
    from evaluator.core.held_lock import HeldLock
    from evaluator.tuning.watch.probe import WATCH_LOCK

    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    series = first["sweep"]
    with database.connect(autocommit=True) as other:
        with HeldLock(other, (WATCH_LOCK, int(sha256_hex(series)[:8], 16) - 2**31)):
            code, out, err = pgeval(*PROBE, *LOW)
            assert code == 1 and out == "", err
            assert f"another probe of this series is running (sweep '{series}')" in err
            # another series (another setting) is not held back
            code, out, err = pgeval(*PROBE, "--set", "hnsw.ef_search=20")
            assert code == 0, err
    assert conn.execute("SELECT count(*) FROM pgeval.probe").fetchone() == (2,)


def test_an_ivfflat_index_is_probed_at_its_own_work_setting(
    database, conn, clean, pgeval, tmp_path
):
    """The production setting of another kind: the server's ivfflat.probes, else --set."""
    conn.execute("DELETE FROM pgeval.probe")
    clustered_kb.build(
        database,
        tmp_path,
        "watch_ivf",
        dim=DIM,
        n=N,
        nq=1,
        seed=3,
        spread=0.3,
        indexes=[
            "CREATE INDEX watch_ivf_idx ON watch_ivf USING ivfflat (e vector_cosine_ops) "
            "WITH (lists = 40)"
        ],  # fmt: skip
    )
    try:
        code, out, err = pgeval(
            "target", "add", "ivf", "--table", "watch_ivf", "--id-column", "id",
            "--vector-column", "e",
        )  # fmt: skip
        assert code == 0, err
        args = ["watch", "--target", "ivf", "--stage", "ivfflat", "--set", "enable_seqscan=off"]
        code, out, err = pgeval(*args, "--sample-queries", "50", "--format", "json")
        assert code == 0, err
        one = json.loads(out)
        assert one["setting"] == {"ivfflat.probes": "1"} and one["index_name"] == "watch_ivf_idx"
        code, out, err = pgeval(
            *args, "--set", "ivfflat.probes=40", "--sample-queries", "50", "--format", "json"
        )
        assert code == 0, err
        every = json.loads(out)
        # all 40 lists probed: the scan is exhaustive, recall is exact
        assert every["setting"] == {"ivfflat.probes": "40"} and every["recall"] == 1.0
        assert every["ground_truth"]["status"] == "reused" and one["recall"] < 1.0
    finally:
        conn.execute("DELETE FROM pgeval.probe")
        clustered_kb.drop(database, "watch_ivf")


def test_group_by_probes_each_tenant_as_its_own_series(kb, conn, database, pgeval):
    """--group-by: one probe per group, searched WHERE tenant = value, each a row and a series
    of its own; openmetrics declares each family once and labels the samples with the group."""
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"ALTER TABLE {TABLE} ADD COLUMN tenant text")
        c.execute(
            f"UPDATE {TABLE} SET tenant = CASE WHEN substr(id, 2)::int <= 1500 THEN 'big' "
            "ELSE 'small' END"
        )
        c.execute(f"VACUUM ANALYZE {TABLE}")
    args = [*PROBE, *LOW, "--group-by", "tenant", "--sample-queries", "30", "--min-recall", "0"]
    code, out, err = pgeval(*args, "--format", "json")
    assert code == 0, err
    probes = json.loads(out)["probes"]
    assert [p["group_key"] for p in probes] == [{"tenant": "big"}, {"tenant": "small"}]
    assert [p["table_rows"] for p in probes] == [1500, 500]
    assert [p["queries"] for p in probes] == [30, 30]
    assert len({p["sweep"] for p in probes}) == 2
    # each query of a group is a row of that group
    for p in probes:
        (tenant,) = p["group_key"].values()
        assert conn.execute(
            f"SELECT count(*) FROM pgeval.query q JOIN pgeval.testset t USING (testset_id) "
            f"JOIN {TABLE} k ON k.id = q.query_id WHERE t.name = %s AND k.tenant = %s",
            (p["testset"], tenant),
        ).fetchone() == (30,)
    rows = _history(conn)
    assert [r["group_key"] for r in rows] == [{"tenant": "big"}, {"tenant": "small"}]
    assert all(r["baseline_at"] == r["probed_at"] for r in rows)  # two series, two baselines
    code, out, err = pgeval(*args, "--format", "openmetrics")
    assert code == 0, err
    assert out.count("# TYPE pgeval_probe_recall gauge") == 1
    recall = [x for x in out.splitlines() if x.startswith("pgeval_probe_recall{")]
    assert [x.split(" ")[0] for x in recall] == [
        f'pgeval_probe_recall{{target="{TARGET}",stage="hnsw",k="10",group="{g}"}}'
        for g in ("big", "small")
    ]
    # a group's bound crossed: exit 2, the line names the group
    code, out, err = pgeval(*args[:-2], "--min-recall", "1.0", "--no-remedy")
    assert code == 2
    assert "pgeval: watch: tenant=big: recall@10" in err and "tenant=small" in err


SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
    r'(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?)\} (?P<value>\S+)$'
)


def test_openmetrics_output_parses(kb, conn, pgeval):
    code, out, err = pgeval(*PROBE, *LOW, "--min-recall", "1.0", "--no-remedy", "--format",
                            "openmetrics")  # fmt: skip
    assert code == 2, err
    lines = out.splitlines()
    assert lines[-1] == "# EOF"
    declared: dict[str, str] = {}
    samples: dict[tuple[str, str], float] = {}
    for line in lines[:-1]:
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name, rest = line[2:].split(" ", 2)
            if kind == "TYPE":
                assert rest == "gauge"
                declared[name] = rest
            continue
        m = SAMPLE.match(line)
        assert m, line
        assert m["name"] in declared, f"{m['name']} sampled before its # TYPE line"
        samples[(m["name"], m["labels"])] = float(m["value"])
    base = f'target="{TARGET}",stage="hnsw",k="10"'
    (row,) = _history(conn)
    assert samples[("pgeval_probe_recall", base)] == row["recall"]
    assert samples[("pgeval_probe_latency_seconds", base + ',quantile="0.95"')] == pytest.approx(
        row["p95_ms"] / 1000
    )
    assert samples[("pgeval_probe_bound_crossed", base + ',bound="min_recall"')] == 1
    assert samples[("pgeval_probe_table_rows", base)] == N
    assert samples[("pgeval_probe_setting", base + ',setting="hnsw.ef_search"')] == 10


@pytest.mark.slow
def test_kill_9_while_the_row_is_written_leaves_no_row(kb, conn, database):
    """The probe's row is one statement in one transaction: its client killed while that
    statement waits (here on a lock), the server rolls it back: no row, not half of one."""
    # (the dead client's session ends: its INSERT ran, then its transaction was rolled back)
    kill_9_while_waiting(
        database,
        conn,
        "LOCK TABLE pgeval.probe IN SHARE MODE",
        [*PROBE, *LOW],
        "%INSERT INTO pgeval.probe%",
    )
    assert conn.execute("SELECT count(*) FROM pgeval.probe").fetchone() == (0,)


def test_a_tracked_table_is_probed_without_a_pass_over_it(kb, conn, database, pgeval):
    """With the change log (`pgeval target track`), an unchanged table's data version is read
    from the log's count: no scan of the table, the same data version and recall as untracked;
    after a change the version is measured again and the ground truth refreshed as before."""

    def note() -> str:
        return conn.execute(
            "SELECT fingerprint -> 'info' ->> 'checksum' FROM pgeval.run "
            "WHERE name LIKE 'watch-%%' AND stage = 'hnsw' ORDER BY run_id DESC LIMIT 1"
        ).fetchone()[0]

    # (an earlier test's ground truth of the same rows would be reused: computed here)
    conn.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))
    code, untracked, err = _probe(pgeval, *LOW)
    assert code == 0, err
    code, out, err = pgeval("target", "track", TARGET)
    assert code == 0 and "now tracked" in out, err
    code, first, err = _probe(pgeval, *LOW)  # the first read with the log: one version scan
    assert code == 0, err
    code, again, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert "change log unchanged" in note()
    assert again["ground_truth"]["status"] == "reused"
    assert again["cost"]["data_version"]["via"] == "change log"
    assert again["cost"]["data_version"]["scans"] == 0
    assert untracked["cost"]["data_version"]["scans"] >= 1
    code, out, err = pgeval(*PROBE, *LOW)
    assert code == 0 and "; data version from the change log (" in out, err
    for probe in (first, again):
        assert probe["data_version"] == untracked["data_version"]
        assert probe["recall"] == untracked["recall"]
    _churn(database, conn, np.random.default_rng(3))
    code, changed, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert changed["ground_truth"]["status"] == "incremental", changed["ground_truth"]
    assert changed["data_version"] != again["data_version"]
    assert "change log unchanged" not in note()
    code, settled, err = _probe(pgeval, *LOW)
    assert code == 0, err
    assert "change log unchanged" in note() and settled["data_version"] == changed["data_version"]
    code, out, err = pgeval("target", "untrack", TARGET)
    assert code == 0, err
    code, out, err = pgeval(*PROBE, *LOW)
    assert code == 0 and f"`pgeval target track {TARGET}` reads a change log instead" in out


def test_min_recall_is_judged_with_the_sweeps_tolerance(kb, conn, pgeval):
    """A recall equal to the bound up to the last bits of a float sum (0.7999999999999998 for
    0.8, as the remedy's find and the sweep's rule judge it reached) is not a crossed bound; a
    recall below it by more than 1e-12 is."""
    code, first, err = _probe(pgeval, *LOW)
    assert code == 0, err
    crossed = "SELECT crossed FROM pgeval.probe_history WHERE probe_id = %s"
    for recall, expected in ((0.7999999999999998, []), (0.8, []), (0.7999999, ["min_recall"])):
        conn.execute(
            "UPDATE pgeval.probe SET recall = %s, bounds = '{\"min_recall\": 0.8}' "
            "WHERE probe_id = %s",
            (recall, first["probe_id"]),
        )
        assert conn.execute(crossed, (first["probe_id"],)).fetchone()[0] == expected, recall
