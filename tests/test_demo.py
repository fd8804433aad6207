"""`pgeval demo` runs the whole flow on the embedded server and cleans up after itself."""

import numpy as np

from evaluator.demo.corpus import embed, generate


def test_corpus_is_deterministic_and_graded():
    a, b = generate(n_queries=12), generate(n_queries=12)
    assert a.chunks == b.chunks and a.queries == b.queries
    assert np.allclose(a.vectors, b.vectors)
    assert all(set(q["relevant"].values()) <= {1, 2, 3} for q in a.queries)
    assert abs(float(np.linalg.norm(embed("refund money days", 64))) - 1.0) < 1e-6


def test_demo_end_to_end(clean, pgeval, conn):
    code, out, err = pgeval("demo", "--corpus", "generated", "--queries", "20")
    assert code == 0, err
    # a fresh start says so: the printed `testset load` is the one that loads it
    assert "unchanged (same content hash)" not in out, out
    for text in (
        "$ pgeval run pipeline",
        "loss attribution",
        "recall@10",
        "by query type",
        "$ pgeval advise",
        "recommended: ",
    ):
        assert text in out
    stages = {
        r[0]
        for r in conn.execute(
            "SELECT r.stage FROM pgeval.run r JOIN pgeval.experiment e USING (experiment_id) "
            "WHERE e.name LIKE 'demo-%'"
        )
    }
    assert {"exact", "hnsw", "diskann", "bm25", "merge"} <= stages
    assert conn.execute("SELECT to_regclass('pgeval_demo.chunks')").fetchone()[0] is None


def _snapshot(conn, testset: str, target: str):
    ts = conn.execute(
        "SELECT testset_id, content_hash, n_queries, created_at FROM pgeval.testset "
        "WHERE name = %s",
        (testset,),
    ).fetchone()
    runs = conn.execute(
        "SELECT r.run_id, r.name, r.status, count(x.*) FROM pgeval.run r "
        "LEFT JOIN pgeval.result x USING (run_id) WHERE r.testset_id = %s "
        "GROUP BY 1, 2, 3 ORDER BY 1",
        (ts[0],),
    ).fetchall()
    tg = conn.execute(
        "SELECT spec, created_at FROM pgeval.target WHERE name = %s", (target,)
    ).fetchone()
    return ts, runs, tg


def test_demo_never_touches_a_users_objects(clean, pgeval, conn, tmp_path, monkeypatch):
    """A user's own test set and target named `demo` (and the test set's runs) survive a demo
    run unchanged; the demo uses other names, removes its own target and its temporary files."""
    import glob
    import tempfile

    from helpers import make_run, make_testset

    conn.execute("DROP TABLE IF EXISTS user_chunks")
    conn.execute("CREATE TABLE user_chunks (id text PRIMARY KEY, v vector(3), body text)")
    make_testset(conn, "demo", {"q1": {"c1": 2}, "q2": {"c2": 1}})
    make_run(conn, "users-run", "demo", {"q1": ["c1", "c9"], "q2": ["c3"]})
    code, _, err = pgeval(
        "target",
        "add",
        "demo",
        "--table",
        "user_chunks",
        "--id-column",
        "id",
        "--vector-column",
        "v",
    )
    assert code == 0, err
    before = _snapshot(conn, "demo", "demo")
    assert len(before[1]) == 1 and before[1][0][3] == 3
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the demo's temp dir goes
    code, out, err = pgeval("demo", "--corpus", "generated", "--queries", "12", "--no-diskann")
    assert code == 0, err
    assert _snapshot(conn, "demo", "demo") == before
    assert "--name demo-2" in out and "target add demo-2" in out and "--replace" not in out
    exp = conn.execute(
        "SELECT t.name FROM pgeval.experiment e JOIN pgeval.testset t USING (testset_id)"
    ).fetchall()
    assert set(exp) == {("demo-2",)}  # the pipeline's and advise's sweeps
    # the demo's own target is gone with the table it named; the user's stays
    assert [r[0] for r in conn.execute("SELECT name FROM pgeval.target ORDER BY 1")] == ["demo"]
    assert conn.execute("SELECT to_regnamespace('pgeval_demo')").fetchone()[0] is None
    assert not glob.glob(str(tmp_path / "pgeval-demo-*"))
    # a second demo reuses its own test set demo-2 (same content), still leaving the user's alone;
    # started in the same second as an earlier one, it names its experiment with a suffix
    import datetime as dt

    from evaluator.demo import flow

    demo_runs = "SELECT name FROM pgeval.experiment WHERE name ~ '^demo-[0-9-]+$' ORDER BY 1"
    first = conn.execute(demo_runs).fetchone()[0]
    then = dt.datetime.strptime(first, "demo-%Y%m%d-%H%M%S")
    monkeypatch.setattr(flow, "datetime", type("Clock", (), {"now": staticmethod(lambda: then)}))
    code, out, err = pgeval("demo", "--corpus", "generated", "--queries", "12", "--no-diskann")
    assert code == 0, err
    assert "--name demo-2" in out and _snapshot(conn, "demo", "demo") == before
    names = [r[0] for r in conn.execute(demo_runs)]
    assert names == [first, first + "-2"]
    # a schema pgeval_demo the demo did not create is refused, not dropped
    conn.execute("CREATE SCHEMA pgeval_demo")
    conn.execute("CREATE TABLE pgeval_demo.mine (x int)")
    try:
        code, out, err = pgeval("demo", "--corpus", "generated", "--queries", "12", "--no-diskann")
        assert code == 1 and "was not created by `pgeval demo`" in err
        assert err.count("\n") == 1
        assert conn.execute("SELECT to_regclass('pgeval_demo.mine')").fetchone()[0] is not None
    finally:
        conn.execute("DROP SCHEMA pgeval_demo CASCADE")
