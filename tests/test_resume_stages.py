"""Resume across stage kinds and repetitions: complete runs are kept, a per-query run continues
with its missing queries (a query whose results were written without its progress row is
written again, once), a set-based merge that was cut short starts over, stages never started
run — each seeing the right earlier runs — and every list equals an uninterrupted
experiment's."""

from __future__ import annotations

import json

import pytest
from robust_kb import add_target, ensure_table, ensure_testset

N = 30
ARGS = [
    "run",
    "pipeline",
    "--testset",
    "rm",
    "--target",
    "rm",
    "--stages",
    "exact,bm25,merge",
    "--repeat",
    "2",
    "--depth",
    "15",
]


@pytest.fixture
def experiments(clean, conn, pgeval):
    ensure_table(conn, "rm_kb", 400, 8, seed=4)
    ensure_testset(conn, "rm", "rm_kb", N, 8, n_rows=400, seed=4)
    # query texts that keyword search can match ("document 17" against bodies "document N")
    conn.execute(
        "UPDATE pgeval.query SET query_text = 'document ' || (substr(query_id, 2)::int "
        "* 7 % 400 + 1)"
    )
    add_target(conn, "rm", "rm_kb")
    for name in ("rm-ref", "rm-x"):
        code, out, err = pgeval(*ARGS, "--name", name)
        assert code == 0, err
    return conn


def _lists(conn, run: str):
    return conn.execute(
        "SELECT query_id, rank, chunk_id, score FROM pgeval.result JOIN "
        "pgeval.run USING (run_id) WHERE name = %s ORDER BY 1, 2",
        (run,),
    ).fetchall()


def _as_if_killed(conn, keep: int, orphan: str) -> None:
    """rm-x as a kill -9 leaves it in repetition 2: bm25 wrote ``keep`` queries (plus the results
    of ``orphan`` without its progress row), merge never started."""
    conn.execute("UPDATE pgeval.experiment SET status = 'running' WHERE name = 'rm-x'")
    conn.execute("DELETE FROM pgeval.run WHERE name = 'rm-x.merge.2'")
    rid = conn.execute(
        "UPDATE pgeval.run SET status = 'running', finished_at = NULL WHERE "
        "name = 'rm-x.bm25.2' RETURNING run_id"
    ).fetchone()[0]
    kept = [
        r[0]
        for r in conn.execute(
            "SELECT query_id FROM pgeval.run_progress WHERE run_id = %s ORDER BY query_id LIMIT %s",
            (rid, keep),
        )
    ]
    for table in ("run_progress", "query_timing", "result"):
        conn.execute(
            f"DELETE FROM pgeval.{table} WHERE run_id = %s AND NOT query_id = ANY(%s) "
            + ("AND query_id <> %s" if table == "result" else ""),
            (rid, kept, orphan) if table == "result" else (rid, kept),
        )
    assert orphan not in kept
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.result WHERE run_id = %s AND query_id = %s", (rid, orphan)
        ).fetchone()[0]
        > 0
    )


def test_resume_keeps_continues_and_runs(experiments, pgeval):
    conn = experiments
    orphan = "q9"
    _as_if_killed(conn, keep=8, orphan=orphan)
    code, out, err = pgeval("run", "resume", "rm-x", "--format", "json")
    assert code == 0, err
    actions = {r["run"]: r["action"] for r in json.loads(out)["rows"]}
    assert actions == {
        "rm-x.exact.1": "kept",
        "rm-x.bm25.1": "kept",
        "rm-x.merge.1": "kept",
        "rm-x.exact.2": "kept",
        "rm-x.bm25.2": f"resumed ({N - 8} of {N} queries)",
        "rm-x.merge.2": "ran",
    }
    for rep in (1, 2):
        for stage in ("exact", "bm25", "merge"):
            assert _lists(conn, f"rm-x.{stage}.{rep}") == _lists(conn, f"rm-ref.{stage}.{rep}")
    # the new merge fused this repetition's runs, not another's
    merged = conn.execute(
        "SELECT params->'input_runs' FROM pgeval.run WHERE name = 'rm-x.merge.2'"
    ).fetchone()[0]
    ids = [
        conn.execute("SELECT run_id FROM pgeval.run WHERE name = %s", (f"rm-x.{s}.2",)).fetchone()[
            0
        ]
        for s in ("exact", "bm25")
    ]
    assert sorted(merged) == sorted(ids)
    params = conn.execute("SELECT params FROM pgeval.run WHERE name = 'rm-x.bm25.2'").fetchone()[0]
    assert params["resumed"][0]["queries"] == N - 8
    code, out, err = pgeval("stage-report", "rm-x", "--format", "json")
    assert code == 0, err


def test_cut_short_merge_starts_over(experiments, pgeval):
    conn = experiments
    conn.execute("UPDATE pgeval.experiment SET status = 'failed' WHERE name = 'rm-x'")
    rid = conn.execute(
        "UPDATE pgeval.run SET status = 'failed' WHERE name = 'rm-x.merge.2' RETURNING run_id"
    ).fetchone()[0]
    conn.execute("DELETE FROM pgeval.result WHERE run_id = %s AND query_id > 'q5'", (rid,))
    code, out, err = pgeval("run", "resume", "rm-x.merge.2", "--format", "json")
    assert code == 0, err
    actions = [r["action"] for r in json.loads(out)["rows"]]
    assert actions == ["kept"] * 5 + ["restarted"]
    assert _lists(conn, "rm-x.merge.2") == _lists(conn, "rm-ref.merge.2")
    assert conn.execute("SELECT status FROM pgeval.experiment WHERE name = 'rm-x'").fetchone() == (
        "complete",
    )
