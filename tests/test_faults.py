"""Faults mid-run, against the real embedded server and a real `pgeval run pipeline` subprocess:
the connection killed mid-statement (pg_terminate_backend), the target dropped mid-run, an index
dropped between the plan check and the run, a statement past --statement-timeout. Each gives one
clear line saying how to resume, leaves the experiment resumable, and `pgeval run resume`
finishes it (or refuses, naming what changed, when the configuration is no longer the same)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from robust_kb import add_target, ensure_table, ensure_testset

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
KB, N, DEPTH = "ft_kb", 160, 10
# per query: a stage of ft-slow takes N * SLOW_S = 4.8 s, so after its first flush (at 2 s,
# store.FLUSH_SECONDS) about 2.8 s remain to catch it mid-stage (at 0.012 s, 0.4 s remained and a
# loaded CI machine caught the next stage instead)
SLOW_S = 0.03
SLOW_VIEW = (
    f"CREATE OR REPLACE VIEW ft_slow AS SELECT k.* FROM {KB} k CROSS JOIN "
    "(SELECT pg_sleep({sleep}) OFFSET 0) s"
)


@pytest.fixture(scope="module")
def kb(database):
    with database.connect(autocommit=True) as c:
        c.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
        ensure_table(c, KB, 1000, 8, seed=9, hnsw=False)  # ft_hnsw comes and goes below
        c.execute(SLOW_VIEW.format(sleep=SLOW_S))
        ensure_testset(c, "ft", KB, N, 8, n_rows=1000, seed=9)
        add_target(c, "ft", KB)
        add_target(c, "ft-slow", "ft_slow")
    proc = _run("--target", "ft", "--stages", "exact,second=exact", "--name", "ft-ref")
    assert proc.returncode == 0, proc.stderr
    return database


def _args(*extra):
    return [
        sys.executable,
        "-m",
        "evaluator",
        "run",
        "pipeline",
        "--testset",
        "ft",
        "--repeat",
        "1",
        "--depth",
        str(DEPTH),
        *extra,
    ]


def _run(*extra):
    return subprocess.run(_args(*extra), cwd=ROOT, capture_output=True, text=True, timeout=300)


def _spawn(*extra):
    return subprocess.Popen(
        _args(*extra), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(cond, proc=None, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"pipeline ended early: {proc.communicate()}")
        time.sleep(0.03)
    raise AssertionError("timed out")


def _progress(conn, run: str) -> int:
    row = conn.execute(
        "SELECT count(p.*) FROM pgeval.run r LEFT JOIN pgeval.run_progress p "
        "USING (run_id) WHERE r.name = %s GROUP BY r.run_id",
        (run,),
    ).fetchone()
    return 0 if row is None else row[0]


def _last_line(proc) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err, err[-1500:]
    lines = [line for line in err.strip().splitlines() if line.startswith("pgeval: ")]
    assert len(lines) == 1, err
    return lines[0]


def _lists(conn, run: str):
    return conn.execute(
        "SELECT query_id, rank, chunk_id, score FROM pgeval.result JOIN "
        "pgeval.run USING (run_id) WHERE name = %s ORDER BY 1, 2",
        (run,),
    ).fetchall()


def _resume(pgeval, name, *extra) -> list[dict]:
    code, out, err = pgeval("run", "resume", name, "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)["rows"]


def _complete_like_reference(conn, name: str, stages=("exact", "second")) -> None:
    assert conn.execute(
        "SELECT status FROM pgeval.experiment WHERE name = %s", (name,)
    ).fetchone() == ("complete",)
    for stage in stages:
        assert _progress(conn, f"{name}.{stage}.1") == N
        assert _lists(conn, f"{name}.{stage}.1") == _lists(conn, f"ft-ref.{stage}.1")


def test_connection_terminated_mid_statement(kb, conn, pgeval):
    proc = _spawn("--target", "ft-slow", "--stages", "exact,second=exact", "--name", "ft-term")
    try:
        _wait_for(lambda: _progress(conn, "ft-term.exact.1") > 0, proc)
        # the pipeline's knowledge-base backend, caught while it executes a query
        pid = _wait_for(
            lambda: (
                conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE "
                    "'%ft_slow%' AND pid <> pg_backend_pid() LIMIT 1"
                ).fetchone()
                or [None]
            )[0],
            proc,
        )
        assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        line = _last_line(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert line.startswith("pgeval: error: lost the database connection (")
    assert line.endswith("`pgeval run resume ft-term` once the server is back")
    assert conn.execute(
        "SELECT status FROM pgeval.experiment WHERE name = 'ft-term'"
    ).fetchone() == ("failed",)
    rows = _resume(pgeval, "ft-term")
    assert rows[0]["action"].startswith("resumed (") or rows[0]["action"] == "restarted"
    _complete_like_reference(conn, "ft-term")


def test_target_dropped_mid_run(kb, conn, pgeval):
    proc = _spawn("--target", "ft-slow", "--stages", "exact,second=exact", "--name", "ft-drop")
    dropper = None
    try:
        _wait_for(lambda: _progress(conn, "ft-drop.exact.1") > 0, proc)
        # DROP VIEW waits for the running stage's READ ONLY transaction (its lock): the stage
        # finishes on a consistent snapshot, the next stage finds the target gone
        dropper = threading.Thread(
            target=lambda: kb.connect(autocommit=True).execute("DROP VIEW ft_slow")
        )
        dropper.start()
        line = _last_line(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        if dropper is not None:
            dropper.join(timeout=60)
    assert line.startswith("pgeval: error: ") and "ft_slow" in line, line
    assert "`pgeval run resume ft-drop`" in line
    assert conn.execute(
        "SELECT status FROM pgeval.run WHERE name = 'ft-drop.exact.1'"
    ).fetchone() == ("complete",)
    code, out, err = pgeval("run", "resume", "ft-drop")  # still gone: a clear refusal
    assert code == 1 and "ft_slow" in err and err.count("\n") == 1, err
    conn.execute(SLOW_VIEW.format(sleep=SLOW_S))  # the same target again
    rows = _resume(pgeval, "ft-drop")
    assert [r["action"] for r in rows][0] == "kept"
    _complete_like_reference(conn, "ft-drop")


def _blocked_at_experiment_insert(conn):
    return conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
        "query LIKE 'INSERT INTO pgeval.experiment%'"
    ).fetchone()


def test_index_dropped_between_plan_check_and_run(kb, database, conn, pgeval):
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS ft_hnsw ON {KB} USING hnsw "
        "(embedding vector_cosine_ops) WITH (m = 16)"
    )
    with database.connect() as gate:
        # hold the pipeline right after its plan checks (at its experiment insert)
        gate.execute("LOCK TABLE pgeval.experiment IN SHARE MODE")
        proc = _spawn(
            "--target",
            "ft",
            "--stages",
            "exact,hnsw",
            "--set",
            "hnsw.ef_search=100",
            "--name",
            "ft-idx",
        )
        try:
            _wait_for(lambda: _blocked_at_experiment_insert(conn), proc)
            conn.execute("DROP INDEX ft_hnsw")
        finally:
            gate.rollback()
    try:
        line = _last_line(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert line.startswith("pgeval: error: stage hnsw: the plan uses ")
    assert "not a hnsw index" in line
    assert line.endswith("the experiment is left resumable: `pgeval run resume ft-idx`")
    assert (
        conn.execute("SELECT count(*) FROM pgeval.run WHERE name = 'ft-idx.hnsw.1'").fetchone()[0]
        == 0
    )  # never reported as the index
    # an index of other options is another configuration: refused, naming it
    conn.execute(
        f"CREATE INDEX ft_hnsw ON {KB} USING hnsw (embedding vector_cosine_ops) WITH (m = 8)"
    )
    code, out, err = pgeval("run", "resume", "ft-idx")
    assert code == 1 and "configuration of experiment 'ft-idx' changed" in err, err
    assert "indexes.ft_hnsw" in err and "m" in err
    # the same options again is still another build of the index (the fingerprint identifies the
    # build: OID and file node), so the experiment cannot mix the two either
    conn.execute("DROP INDEX ft_hnsw")
    conn.execute(f"CREATE INDEX ft_hnsw ON {KB} USING hnsw (embedding vector_cosine_ops)")
    code, out, err = pgeval("run", "resume", "ft-idx")
    assert code == 1 and "indexes.ft_hnsw.build" in err and "new --name" in err, err
    assert (
        conn.execute("SELECT count(*) FROM pgeval.run WHERE name = 'ft-idx.hnsw.1'").fetchone()[0]
        == 0
    )
    conn.execute("DROP INDEX ft_hnsw")


def test_statement_timeout_then_resume_with_a_longer_one(kb, conn, pgeval):
    conn.execute(
        "CREATE OR REPLACE VIEW ft_slower AS SELECT k.* FROM ft_kb k CROSS JOIN "
        "(SELECT pg_sleep(0.3) OFFSET 0) s"
    )
    code, out, err = pgeval(
        "target",
        "add",
        "ft-slower",
        "--table",
        "ft_slower",
        "--id-column",
        "id",
        "--vector-column",
        "embedding",
    )
    assert code == 0, err
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "ft",
        "--target",
        "ft-slower",
        "--stages",
        "exact",
        "--repeat",
        "1",
        "--depth",
        str(DEPTH),
        "--name",
        "ft-slow-stmt",
        "--statement-timeout",
        "50ms",
    )
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        "pgeval: error: a statement ran past the statement timeout (canceling statement due to "
        "statement timeout); the experiment is left resumable: `pgeval run resume ft-slow-stmt` "
        "--statement-timeout LONGER"
    )
    params = conn.execute(
        "SELECT status, params->'settings'->>'statement_timeout' FROM "
        "pgeval.run WHERE name = 'ft-slow-stmt.exact.1'"
    ).fetchone()
    assert params == ("failed", "50ms")
    # make the view fast again (same rows) and resume with a longer timeout
    conn.execute(
        "CREATE OR REPLACE VIEW ft_slower AS SELECT k.* FROM ft_kb k CROSS JOIN "
        "(SELECT pg_sleep(0.001) OFFSET 0) s"
    )
    rows = _resume(pgeval, "ft-slow-stmt", "--statement-timeout", "10s")
    assert rows[0]["action"] == "restarted"
    run = conn.execute(
        "SELECT status, params->'settings'->>'statement_timeout' FROM pgeval.run "
        "WHERE name = 'ft-slow-stmt.exact.1'"
    ).fetchone()
    assert run == ("complete", "10s")
    assert _lists(conn, "ft-slow-stmt.exact.1") == _lists(conn, "ft-ref.exact.1")
