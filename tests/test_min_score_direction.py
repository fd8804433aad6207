"""`--min-score` respects the direction of the run's score.

A pipeline's vector stages store distances (lower is better; run.params "score": "distance"):
for them a result counts as returned when its distance is AT MOST the threshold, so an
unanswerable query with a close match is not "returned nothing" (it used to be counted silent
exactly when all its results were close). Similarity runs (imports, bm25, merge, rerank) keep
"at least the threshold". Tested on a real pipeline run against the embedded server."""

from __future__ import annotations

import json

import pytest
from helpers import make_run
from robust_kb import add_target, ensure_table, ensure_testset

UNANSWERABLE = ("q1", "q2", "q3", "q4", "q5", "q6")


@pytest.fixture
def run(clean, conn, pgeval):
    ensure_table(conn, "ms_kb", 300, 8, seed=12)
    ensure_testset(conn, "ms", "ms_kb", 20, 8, n_rows=300, seed=12)
    conn.execute(
        "UPDATE pgeval.query SET answerable = false WHERE query_id = ANY(%s)", (list(UNANSWERABLE),)
    )
    add_target(conn, "ms", "ms_kb")
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "ms",
        "--target",
        "ms",
        "--stages",
        "exact",
        "--repeat",
        "1",
        "--depth",
        "10",
        "--name",
        "ms1",
    )
    assert code == 0, err
    return conn


def _silent(pgeval, run: str, threshold: float) -> int:
    code, out, err = pgeval("metrics", run, "--min-score", repr(threshold), "--format", "json")
    assert code == 0, err
    return json.loads(out)["counts"]["unanswerable_silent"]


def test_distance_threshold_counts_close_matches_as_returned(run, pgeval):
    conn = run
    assert (
        conn.execute(
            "SELECT params->>'score' FROM pgeval.run WHERE name = 'ms1.exact.1'"
        ).fetchone()[0]
        == "distance"
    )
    best = dict(
        conn.execute(
            "SELECT query_id, min(score) FROM pgeval.result JOIN pgeval.run USING (run_id) "
            "WHERE name = 'ms1.exact.1' AND query_id = ANY(%s) GROUP BY 1",
            (list(UNANSWERABLE),),
        ).fetchall()
    )
    ordered = sorted(best.values())
    threshold = (ordered[2] + ordered[3]) / 2  # three queries have a match that close
    assert _silent(pgeval, "ms1.exact.1", threshold) == 3
    # a threshold closer than every best match: every unanswerable query returned nothing
    assert _silent(pgeval, "ms1.exact.1", ordered[0] / 2) == len(UNANSWERABLE)
    # a threshold beyond every distance: none is silent
    assert _silent(pgeval, "ms1.exact.1", 10.0) == 0
    code, out, err = pgeval("metrics", "ms1.exact.1")
    assert code == 0 and "unanswerable 6 (returned nothing: 0)" in out


def test_similarity_threshold_unchanged(run, pgeval):
    conn = run
    make_run(conn, "ms-sim", "ms", {"q1": [("c1", 0.9)], "q2": [("c2", 0.2)], "q7": [("c3", 0.5)]})
    assert _silent(pgeval, "ms-sim", 0.5) == len(UNANSWERABLE) - 1  # q1 (0.9 >= 0.5)
    assert _silent(pgeval, "ms-sim", 0.1) == len(UNANSWERABLE) - 2


def test_help_defines_the_semantics(pgeval):
    for cmd in ("metrics", "report"):
        code, out, _ = pgeval(cmd, "--help")
        assert code == 0
        text = " ".join(out.split())
        assert "distance" in text and "at most" in text and "at least" in text
