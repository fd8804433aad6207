"""Never half-counted: every reader of results (metrics, stage-report, report, compare, gate)
refuses a run that is not complete, and an experiment interrupted between two stages (whose last
run is complete but whose final stage never ran); --allow-partial shows them labelled."""

from __future__ import annotations

import json

import pytest
from helpers import make_testset
from helpers_stage import dist, make_experiment, stage_run

QRELS = {f"q{i}": {f"c{i}": 2, f"d{i}": 1} for i in range(6)}


@pytest.fixture
def interrupted(clean, conn):
    make_testset(conn, "half-set", QRELS)
    for name in ("half", "gap"):
        make_experiment(conn, name, "half-set", ["exact", "hnsw"])
        conn.execute("UPDATE pgeval.experiment SET status = 'failed' WHERE name = %s", (name,))
        stage_run(
            conn,
            name,
            "exact",
            {q: dist([f"c{q[1:]}", f"d{q[1:]}"]) for q in QRELS},
            testset="half-set",
            depth=10,
        )
    # "half": its hnsw run was interrupted after two queries
    rid = stage_run(
        conn,
        "half",
        "hnsw",
        {q: dist([f"c{q[1:]}"]) for q in ("q0", "q1")},
        testset="half-set",
        depth=10,
    )
    conn.execute("UPDATE pgeval.run SET status = 'running' WHERE run_id = %s", (rid,))
    # "gap": killed after its exact run completed, before hnsw started


@pytest.mark.parametrize(
    "args, message",
    [
        ("metrics half.hnsw.1", "run 'half.hnsw.1' is running, not complete"),
        ("stage-report half", "1 run(s) of experiment 'half' are not complete (half.hnsw.1)"),
        ("stage-report gap", "experiment 'gap' is failed: some of its stages have not run"),
        ("report half.hnsw.1 --format json", "run 'half.hnsw.1' is running, not complete"),
        ("report gap --format json", "experiment 'gap' is failed, not complete"),
        ("compare half.exact.1 half.hnsw.1", "run 'half.hnsw.1' is running, not complete"),
        ("gate --baseline half.exact.1 --candidate half.hnsw.1", "run 'half.hnsw.1' is running"),
    ],
)
def test_readers_refuse_incomplete(args, message, interrupted, pgeval):
    code, out, err = pgeval(args)
    assert code == 1, (code, err)  # an error, never a gate failure (2)
    assert err.startswith("pgeval: error: ") and message in err and err.count("\n") == 1, err
    assert "resume" in err and out == ""


def test_allow_partial_labels_the_numbers(interrupted, pgeval):
    code, out, err = pgeval("metrics", "half.hnsw.1", "--allow-partial", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "running"
    assert any(w.startswith("PARTIAL: run 'half.hnsw.1' is running") for w in doc["warnings"])
    code, out, err = pgeval("report", "gap", "--format", "json", "--allow-partial")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["run"]["name"] == "gap.exact.1"
    assert doc["warnings"][0].startswith("PARTIAL: experiment 'gap' is failed")
    code, out, err = pgeval("stage-report", "gap", "--allow-partial", "--format", "json")
    assert code == 0, err
    assert any("PARTIAL" in w for w in json.loads(out)["warnings"])
