"""Small builders for tests that need a test set or a run in the database without going through a
file loader. They write the same rows the loaders write (and call pgeval.refresh_ideal)."""

from __future__ import annotations

import json


def make_testset(
    conn,
    name: str,
    qrels: dict[str, dict[str, int]],
    *,
    texts: dict | None = None,
    types: dict | None = None,
    unanswerable: tuple = (),
    embeddings: dict | None = None,
    content_hash: str = "test",
) -> int:
    """qrels: {query_id: {chunk_id: grade}}; queries listed in ``unanswerable`` may have {}."""
    tid = conn.execute(
        "INSERT INTO pgeval.testset (name, content_hash, source_format, n_queries, n_judgements) "
        "VALUES (%s, %s, 'test', %s, %s) RETURNING testset_id",
        (name, content_hash, len(qrels), sum(len(v) for v in qrels.values())),
    ).fetchone()[0]
    for pos, (qid, judged) in enumerate(qrels.items(), 1):
        emb = (embeddings or {}).get(qid)
        conn.execute(
            "INSERT INTO pgeval.query (testset_id, query_id, position, query_text, types, "
            "answerable, expected_facts, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s::vector)",
            (
                tid,
                qid,
                pos,
                (texts or {}).get(qid, f"query {qid}"),
                list((types or {}).get(qid, [])),
                qid not in unanswerable,
                json.dumps([]),
                None if emb is None else "[" + ",".join(str(float(x)) for x in emb) + "]",
            ),
        )
        for chunk, grade in judged.items():
            conn.execute(
                "INSERT INTO pgeval.qrel (testset_id, query_id, chunk_id, grade) "
                "VALUES (%s, %s, %s, %s)",
                (tid, qid, chunk, grade),
            )
    conn.execute("SELECT pgeval.refresh_ideal(%s)", (tid,))
    return tid


def make_run(
    conn,
    name: str,
    testset: str,
    ranked: dict[str, list],
    *,
    stage: str = "import",
    status: str = "complete",
    experiment_id: int | None = None,
    latency_ms: dict | None = None,
    params: dict | None = None,
) -> int:
    """ranked: {query_id: [chunk_id, ...]} (scores descending by position) or
    {query_id: [(chunk_id, score), ...]}."""
    rid = conn.execute(
        "INSERT INTO pgeval.run (name, testset_id, stage, order_rule, status, experiment_id, "
        "params) SELECT %s, testset_id, %s, 'as given', %s, %s, %s FROM pgeval.testset "
        "WHERE name = %s RETURNING run_id",
        (name, stage, status, experiment_id, json.dumps(params or {}), testset),
    ).fetchone()[0]
    for qid, items in ranked.items():
        pairs = [
            item if isinstance(item, tuple) else (item, float(len(items) - rank))
            for rank, item in enumerate(items, 1)
        ]
        if pairs:  # one ranked list per query; the trigger joins the judged grades
            conn.execute(
                "INSERT INTO pgeval.result_list (run_id, query_id, chunk_ids, scores) "
                "VALUES (%s, %s, %s, %s)",
                (rid, qid, [c for c, _ in pairs], [s for _, s in pairs]),
            )
        if latency_ms and qid in latency_ms:
            conn.execute(
                "INSERT INTO pgeval.query_timing (run_id, query_id, latency_ms, "
                "rows_returned) VALUES (%s, %s, %s, %s)",
                (rid, qid, latency_ms[qid], len(items)),
            )
    return rid


def wait_for(cond, proc=None, timeout=60.0, pause=0.05):
    """``cond()``'s first true value, polled until ``timeout`` seconds; AssertionError when time
    runs out, or when ``proc`` (a subprocess.Popen) ended first (with its output)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended early: {proc.communicate()}")
        time.sleep(pause)
    raise AssertionError("timed out")


def kill_9_while_waiting(database, conn, lock: str, argv: list[str], query_like: str) -> None:
    """Run ``python -m evaluator *argv`` while another session holds ``lock`` (a LOCK TABLE
    statement); once the child's backend waits on it running a statement LIKE ``query_like``,
    kill -9 the child, release the lock, and wait until the server ends that backend's session
    (rolling its transaction back)."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    blocker = database.connect()
    proc = None
    try:
        blocker.execute(lock)
        proc = subprocess.Popen(
            [sys.executable, "-m", "evaluator", *argv],
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        backend = wait_for(
            lambda: (
                conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND state = "
                    "'active' AND query LIKE %s AND pid <> pg_backend_pid()",
                    (query_like,),
                ).fetchone()
                or [None]
            )[0],
            proc=proc,
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        blocker.rollback()
        blocker.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
    wait_for(
        lambda: conn.execute(
            "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = %s", (backend,)
        ).fetchone()[0]
    )


def wait_experiment_unlocked(conn, exp_id: int) -> None:
    """Wait until no session holds experiment ``exp_id``'s advisory lock (its holder's backend
    releases it when it ends: some time after the client closed or died, not at once)."""
    from evaluator.run.experiment_scope import LOCK_CLASS, _key

    wait_for(
        lambda: conn.execute(
            "SELECT count(*) = 0 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s::oid AND objid = %s::oid AND objsubid = 2 AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())",
            (LOCK_CLASS, _key(exp_id)[1]),
        ).fetchone()[0]
    )
