"""The fingerprint identifies the index build and nothing that cannot change a result.

- REINDEX (same options) changes the config hash, and the diff names the index's build as the
  one variable; an unrelated extension created on the server (and a statement timeout) leaves it
  unchanged;
- a sweep re-run after the index was rebuilt refuses to keep the old build's points (it used to
  print "0 measured ... already in this sweep" with the old figures under the new hash), and a
  new sweep after the rebuild measures every point (none reused from the old build);
- `pgeval diff` between a pipeline run and a sweep run names only variables that can change a
  retrieval number (no bookkeeping: repeat, names, capture time, extension list).
"""

from __future__ import annotations

import json

import pytest
from robust_kb import add_target, ensure_table, ensure_testset

from evaluator.table import fingerprint as fpmod
from evaluator.table.config_diff import compare
from evaluator.tuning.sweep import SweepConfig, run_sweep

TABLE, INDEX = "fb_kb", "fb_kb_hnsw"


@pytest.fixture
def kb(clean, conn):
    ensure_table(conn, TABLE, 400, 8, hnsw=False, seed=9)
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} ON {TABLE} USING hnsw "
        "(embedding vector_cosine_ops) WITH (m = 4, ef_construction = 8)"
    )
    ensure_testset(conn, "fb", TABLE, 20, 8, n_rows=400, seed=9)
    return add_target(conn, "fb", TABLE)


def capture(conn, target, **kw):
    fp = fpmod.capture(conn, target, **kw)
    return fp, fpmod.config_hash(fp)


def test_reindex_changes_the_hash_and_names_the_build(conn, kb):
    fp1, h1 = capture(conn, kb, settings={"hnsw.ef_search": "40"})
    assert capture(conn, kb, settings={"hnsw.ef_search": "40"})[1] == h1
    conn.execute(f"REINDEX INDEX {INDEX}")
    fp2, h2 = capture(conn, kb, settings={"hnsw.ef_search": "40"})
    assert h2 != h1
    d = compare(fp1, fp2)
    assert d.variables == [f"indexes.{INDEX}.build"] and not d.warnings()
    assert fp1["indexes"][INDEX]["options"] == fp2["indexes"][INDEX]["options"]


def test_unrelated_extension_and_timeout_leave_the_hash(conn, kb):
    fp1, h1 = capture(conn, kb)
    created = None
    for ext in ("age", "http"):  # available on the embedded server, unused by retrieval
        if conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = %s AND installed_version IS NULL",
            (ext,),
        ).fetchone():
            conn.execute(f"CREATE EXTENSION {ext}")
            created = ext
            break
    assert created, "no unrelated extension available to create"
    try:
        fp2, h2 = capture(conn, kb)
    finally:
        conn.execute(f"DROP EXTENSION {created} CASCADE")
    assert h2 == h1, compare(fp1, fp2).rows()
    assert set(fp1["extensions"]) <= {"vector", "vectorscale", "pg_textsearch"}
    assert fp1["extensions"]["vector"]
    _, h3 = capture(conn, kb, settings={"statement_timeout": "17s"})
    assert h3 == h1


def _sweep(name: str) -> SweepConfig:
    return SweepConfig(
        testset="fb",
        target="fb",
        stage="hnsw",
        params=("hnsw.ef_search=10,40",),
        settings={"enable_seqscan": "off", "work_mem": "7MB"},
        repeat=1,
        k=5,
        name=name,
    )


def test_sweep_never_keeps_points_of_another_build(database, conn, kb, pgeval):
    first = run_sweep(database, _sweep("fb-s1"))
    assert first.measured == 2
    again = run_sweep(database, _sweep("fb-s1"))  # same build: kept, not measured
    assert again.kept == 2 and again.measured == 0
    conn.execute(f"REINDEX INDEX {INDEX}")
    # the same sweep after the rebuild measures every point again (a sweep in cron keeps
    # running); the old build's points stay, under the name the one-line warning gives
    rebuilt = run_sweep(database, _sweep("fb-s1"))
    assert rebuilt.measured == 2 and rebuilt.kept == 0 and rebuilt.reused == 0
    assert rebuilt.previous is not None
    assert f"indexes.{INDEX}.build" in rebuilt.previous["message"]
    assert rebuilt.previous["message"] in rebuilt.warnings
    old = rebuilt.previous["sweep"]
    points = dict(
        conn.execute(
            "SELECT s.name, count(*) FROM pgeval.sweep_point sp JOIN pgeval.sweep s "
            "USING (sweep_id) WHERE s.name IN ('fb-s1', %s) GROUP BY s.name",
            (old,),
        ).fetchall()
    )
    assert points == {"fb-s1": 2, old: 2}
    # a new sweep after the rebuild reuses the points measured under the new build, none of the
    # old build's
    other = run_sweep(database, _sweep("fb-s2"))
    assert other.measured == 0 and other.reused == 2
    hashes = conn.execute(
        "SELECT s.name, sp.config_hash FROM pgeval.sweep_point sp JOIN "
        "pgeval.sweep s USING (sweep_id) WHERE s.name IN (%s, 'fb-s2') "
        "ORDER BY sp.point, s.name",
        (old,),
    ).fetchall()
    assert hashes[0][1] != hashes[1][1] and hashes[2][1] != hashes[3][1]
    # --fresh measures the sweep anew under the new build
    fresh = run_sweep(database, SweepConfig(**{**_sweep("fb-s1").__dict__, "fresh": True}))
    assert fresh.measured == 2 and fresh.reused == 0 and not fresh.resumed


def test_diff_pipeline_run_against_sweep_run_names_no_bookkeeping(database, conn, kb, pgeval):
    run_sweep(database, _sweep("fb-s3"))
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "fb",
        "--target",
        "fb",
        "--stages",
        "exact,hnsw",
        "--set",
        "enable_seqscan=off",
        "--set",
        "work_mem=7MB",
        "--set",
        "hnsw.ef_search=40",
        "--repeat",
        "2",
        "--depth",
        "20",
        "--name",
        "fb-p",
    )
    assert code == 0, err
    code, out, err = pgeval("diff", "fb-p.hnsw.1", "fb-s3.ef_search=40.1", "--format", "json")
    assert code == 0, err
    variables = json.loads(out)["variables"]
    bookkeeping = (
        "info",
        "extra",
        "extensions",
        "testset.name",
        "target.name",
        "measurement.repeat",
        "planner.statement_timeout",
    )
    assert not [v for v in variables if v.startswith(bookkeeping)], variables
    # what does differ is what the two measure differently: the sweep's k and its scope
    assert variables and all(v.startswith("measurement.") for v in variables), variables
    # two repetitions of one stage are one configuration
    code, out, err = pgeval("diff", "fb-p.hnsw.1", "fb-p.hnsw.2")
    assert code == 0 and "same configuration" in out
