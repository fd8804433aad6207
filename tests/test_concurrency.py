"""Concurrency: two pipelines, two imports, or a pipeline and a resume at once on the same
database do not interfere — names, scratch objects (temporary tables are per session), locks.
Real `pgeval` subprocesses against the embedded server."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import wait_experiment_unlocked
from robust_kb import add_target, ensure_table, ensure_testset

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
KB, N = "cc_kb", 150


def _spawn(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "evaluator", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(*procs):
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        out.append((p.returncode, stdout, stderr))
    return out


@pytest.fixture
def kb(clean, conn):
    ensure_table(conn, KB, 2000, 8, seed=3)
    ensure_testset(conn, "cc", KB, N, 8, n_rows=2000, seed=3)
    add_target(conn, "cc", KB)
    return conn


def _lists(conn, run: str):
    return conn.execute(
        "SELECT query_id, rank, chunk_id, score FROM pgeval.result JOIN "
        "pgeval.run USING (run_id) WHERE name = %s ORDER BY 1, 2",
        (run,),
    ).fetchall()


def test_two_pipelines_at_once(kb):
    conn = kb
    args = [
        "run",
        "pipeline",
        "--testset",
        "cc",
        "--target",
        "cc",
        "--stages",
        "exact,hnsw",
        "--set",
        "hnsw.ef_search=100",
        "--depth",
        "20",
        "--repeat",
        "2",
    ]
    results = _finish(_spawn(*args, "--name", "cc-a"), _spawn(*args, "--name", "cc-b"))
    for code, _out, err in results:
        assert code == 0, err
    runs = conn.execute(
        "SELECT e.name, r.name, r.status, (SELECT count(*) FROM "
        "pgeval.run_progress p WHERE p.run_id = r.run_id) FROM pgeval.run r "
        "JOIN pgeval.experiment e USING (experiment_id) ORDER BY r.name"
    ).fetchall()
    assert len(runs) == 8
    assert all(r[1].startswith(r[0] + ".") and r[2] == "complete" and r[3] == N for r in runs)
    assert (
        conn.execute("SELECT count(*) FROM pgeval.experiment WHERE status = 'complete'").fetchone()[
            0
        ]
        == 2
    )
    for run in ("exact.1", "hnsw.1", "exact.2", "hnsw.2"):
        a, b = _lists(conn, f"cc-a.{run}"), _lists(conn, f"cc-b.{run}")
        assert len(a) == N * 20 and a == b
    # neither left anything behind in the knowledge base's database
    assert (
        conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname LIKE '_pgeval%' AND relpersistence <> 't'"
        ).fetchone()[0]
        == 0
    )


def test_same_default_name_gets_a_suffix(kb, database, monkeypatch):
    """Two pipelines started in the same second without --name would get the same default name:
    the second takes NAME-2 instead of failing."""
    from evaluator.run import pipeline

    monkeypatch.setattr(pipeline, "default_name", lambda testset, target: "cc-same")
    cfg = pipeline.PipelineConfig(testset="cc", target="cc", stages="exact", repeat=1, depth=5)
    first = pipeline.run_pipeline(database, cfg)
    second = pipeline.run_pipeline(database, cfg)
    assert (first.experiment, second.experiment) == ("cc-same", "cc-same-2")
    assert [r["run"] for r in second.runs] == ["cc-same-2.exact.1"]
    with pytest.raises(Exception, match="an experiment named 'cc-same' exists"):
        pipeline.run_pipeline(database, replace(cfg, name="cc-same"))


def test_two_imports_at_once(kb, tmp_path):
    conn = kb
    paths = []
    for tag in ("x", "y"):
        path = tmp_path / f"{tag}.trec"
        with path.open("w") as fh:
            for q in range(1, N + 1):
                for r in range(1, 301):
                    fh.write(f"q{q} Q0 {tag}{r} {r} {1000 - r} {tag}\n")
        paths.append(path)
    # different names: both land, each in its own temporary staging table
    results = _finish(
        *(
            _spawn("run", "import", str(p), "--testset", "cc", "--name", f"imp-{p.stem}")
            for p in paths
        )
    )
    assert all(code == 0 for code, _, _ in results), results
    for p in paths:
        rows = _lists(conn, f"imp-{p.stem}")
        assert len(rows) == N * 300 and {r[2][0] for r in rows} == {p.stem}
    # the same name at once: one wins, the other is a clean conflict, nothing half-written
    results = _finish(
        *(_spawn("run", "import", str(p), "--testset", "cc", "--name", "imp-same") for p in paths)
    )
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1], results
    err = next(e for code, _, e in results if code == 1)
    assert err.startswith("pgeval: error: ") and "imp-same" in err and err.count("\n") == 1, err
    rows = _lists(conn, "imp-same")
    assert len(rows) == N * 300 and len({r[2][0] for r in rows}) == 1


def test_resume_waits_for_a_live_pipeline(kb, database, pgeval):
    """A run marked running whose pipeline still holds the experiment's lock is not resumed."""
    from evaluator.run.experiment_scope import try_lock

    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "cc",
        "--target",
        "cc",
        "--stages",
        "exact",
        "--repeat",
        "1",
        "--depth",
        "5",
        "--name",
        "cc-live",
    )
    assert code == 0, err
    conn = kb
    exp_id = conn.execute(
        "SELECT experiment_id FROM pgeval.experiment WHERE name = 'cc-live'"
    ).fetchone()[0]
    conn.execute(
        "UPDATE pgeval.experiment SET status = 'running' WHERE experiment_id = %s", (exp_id,)
    )
    conn.execute(
        "UPDATE pgeval.run SET status = 'running', pid = 4242, host = 'elsewhere' "
        "WHERE experiment_id = %s",
        (exp_id,),
    )
    with database.connect(autocommit=True) as other:  # the "live pipeline"
        assert try_lock(other, exp_id)
        code, out, err = pgeval("run", "resume", "cc-live")
        assert code == 1
        assert (
            "experiment 'cc-live' is being run by another pgeval process: run "
            "'cc-live.exact.1' is written by pid 4242 on elsewhere"
        ) in err
        assert conn.execute(
            "SELECT status FROM pgeval.run WHERE experiment_id = %s", (exp_id,)
        ).fetchone() == ("running",)
    # the lock went with the session (once its backend has ended: the server ends it after the
    # client closed, not at once): now it resumes (nothing missing: the run is closed)
    wait_experiment_unlocked(conn, exp_id)
    code, out, err = pgeval("run", "resume", "cc-live", "--format", "json")
    assert code == 0, err
    assert conn.execute(
        "SELECT status FROM pgeval.run WHERE experiment_id = %s", (exp_id,)
    ).fetchone() == ("complete",)


def test_two_sweeps_and_a_pipeline_at_once(kb):
    conn = kb
    sweep = [
        "sweep",
        "--testset",
        "cc",
        "--target",
        "cc",
        "--stage",
        "hnsw",
        "--param",
        "hnsw.ef_search=20,80",
        "--repeat",
        "1",
        "--k",
        "10",
        "--no-checksum",
        # --fresh: each sweep measures its own points (without it, whichever sweep ends
        # second may reuse the other's points, under the same fingerprint, and run nothing)
        "--fresh",
    ]
    results = _finish(
        _spawn(*sweep, "--name", "cc-sweep-a"),
        _spawn(*sweep, "--name", "cc-sweep-b"),
        _spawn(
            "run",
            "pipeline",
            "--testset",
            "cc",
            "--target",
            "cc",
            "--stages",
            "exact,hnsw",
            "--repeat",
            "1",
            "--depth",
            "10",
            "--name",
            "cc-p",
        ),
    )
    for code, _out, err in results:
        assert code == 0, err
    rows = conn.execute(
        "SELECT e.name, count(r.*), bool_and(r.status = 'complete') FROM "
        "pgeval.experiment e JOIN pgeval.run r USING (experiment_id) "
        "GROUP BY e.name ORDER BY e.name"
    ).fetchall()
    names = [r[0] for r in rows]
    assert names == ["cc-p", "cc-sweep-a", "cc-sweep-b"] and all(r[2] for r in rows), rows
    # the two sweeps agree on every point
    for ef in ("20", "80"):
        a = conn.execute(
            "SELECT sp.index_recall FROM pgeval.sweep_point sp JOIN pgeval.sweep s "
            "USING (sweep_id) WHERE s.name = 'cc-sweep-a' AND sp.settings->>"
            "'hnsw.ef_search' = %s",
            (ef,),
        ).fetchall()
        b = conn.execute(
            "SELECT sp.index_recall FROM pgeval.sweep_point sp JOIN pgeval.sweep s "
            "USING (sweep_id) WHERE s.name = 'cc-sweep-b' AND sp.settings->>"
            "'hnsw.ef_search' = %s",
            (ef,),
        ).fetchall()
        assert a == b and len(a) == 1


def test_two_processes_store_the_same_embeddings_at_once(kb, database, tmp_path):
    """Both find the embeddings missing and compute them; one stores them, the other keeps
    those (before: a duplicate-key error in the second pipeline)."""
    import threading

    import numpy as np

    from evaluator.providers.embedders import parse, storage

    errors: list[BaseException] = []
    for attempt in range(4):
        path = tmp_path / f"emb{attempt}.npy"
        np.save(path, np.random.default_rng(attempt).normal(size=(N, 8)).astype(np.float32))
        emb = parse(f"numpy:{path}")
        barrier = threading.Barrier(2)

        def store():
            try:
                with database.connect() as c:
                    barrier.wait()  # noqa: B023 (called within the iteration)
                    storage.ensure(c, "cc", emb)  # noqa: B023 (called within the iteration)
            except BaseException as exc:  # noqa: BLE001 - collected, asserted below
                errors.append(exc)

        threads = [threading.Thread(target=store) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert (
            kb.execute(
                "SELECT count(*) FROM pgeval.query_embedding WHERE embedder = %s", (emb.label,)
            ).fetchone()[0]
            == N
        )
