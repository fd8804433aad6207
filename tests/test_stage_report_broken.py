"""A stage report over a broken experiment: a stage run deleted (by `pgeval run delete`, or behind
pgeval's back) makes `stage-report` refuse (non-zero exit, naming the missing run) instead of
reporting "complete" over a chain that differs between repetitions; `run delete` marks the
experiment incomplete and `run resume` measures the stage again. The loss shares sum to 1 by
construction, even over repetitions whose chains differ (they summed to 1.254)."""

from __future__ import annotations

import json

import pytest
from robust_kb import add_target, ensure_table, ensure_testset

ARGS = [
    "run",
    "pipeline",
    "--testset",
    "sb",
    "--target",
    "sb",
    "--stages",
    "exact,bm25,merge",
    "--repeat",
    "2",
    "--depth",
    "15",
]


@pytest.fixture
def experiment(clean, conn, pgeval):
    ensure_table(conn, "sb_kb", 400, 8, seed=4)
    ensure_testset(conn, "sb", "sb_kb", 30, 8, n_rows=400, seed=4)
    conn.execute(
        "UPDATE pgeval.query SET query_text = 'document ' || (substr(query_id, 2)::int "
        "* 7 % 400 + 1)"
    )
    add_target(conn, "sb", "sb_kb")
    code, out, err = pgeval(*ARGS, "--name", "sb1")
    assert code == 0, err
    code, out, err = pgeval("stage-report", "sb1", "--format", "json")
    assert code == 0, err
    return conn


def _one_error_line(err: str) -> str:
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_run_delete_marks_the_experiment_incomplete(experiment, pgeval):
    conn = experiment
    code, out, err = pgeval("run", "delete", "sb1.merge.2")
    assert code == 0, err
    assert "sb1" in out + err and "run resume sb1" in out + err
    assert (
        conn.execute("SELECT status FROM pgeval.experiment WHERE name = 'sb1'").fetchone()[0]
        != "complete"
    )
    code, out, err = pgeval("stage-report", "sb1", "--format", "json")
    assert code == 1 and out == ""
    assert "sb1.merge.2" in _one_error_line(err)
    # labelled when asked for: the shares still sum to 1, the points with them
    code, out, err = pgeval("stage-report", "sb1", "--allow-partial", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert any("PARTIAL" in w and "sb1.merge.2" in w for w in rep["warnings"])
    assert sum(r["share"] for r in rep["loss_attribution"]) == pytest.approx(1.0, abs=1e-12)
    assert sum(r["recall_points"] for r in rep["loss_attribution"]) == pytest.approx(1.0)
    # resume measures the deleted stage again; the experiment is whole once more
    code, out, err = pgeval("run", "resume", "sb1", "--format", "json")
    assert code == 0, err
    actions = {r["run"]: r["action"] for r in json.loads(out)["rows"]}
    assert actions["sb1.merge.2"] == "ran" and actions["sb1.merge.1"] == "kept"
    code, out, err = pgeval("stage-report", "sb1", "--format", "json")
    assert code == 0, err
    assert sum(r["share"] for r in json.loads(out)["loss_attribution"]) == pytest.approx(1.0)


def test_stage_run_missing_behind_pgevals_back_is_refused(experiment, pgeval):
    conn = experiment
    conn.execute("DELETE FROM pgeval.run WHERE name = 'sb1.merge.2'")  # status stays complete
    code, _, err = pgeval("stage-report", "sb1")
    assert code == 1 and "sb1.merge.2" in _one_error_line(err)
    assert "--allow-partial" in err


def test_shares_sum_to_one_when_chains_differ(experiment):
    """The SQL itself: repetition 2 ends at bm25 (no merge), repetition 1 at merge; every
    category's share is its chunks over the chunks of all repetitions."""
    conn = experiment
    conn.execute("DELETE FROM pgeval.run WHERE name = 'sb1.merge.2'")
    exp = conn.execute("SELECT experiment_id FROM pgeval.experiment WHERE name = 'sb1'").fetchone()[
        0
    ]
    rows = conn.execute(
        "SELECT category, chunks, share, recall_points, relevant FROM "
        "pgeval.loss_summary(%s, 10, NULL, 1)",
        (exp,),
    ).fetchall()
    cats = {r[0] for r in rows}
    assert {"fusion", "retrieval", "kept"} <= cats  # the two chains' categories
    assert sum(r[2] for r in rows) == pytest.approx(1.0, abs=1e-12)
    assert sum(r[3] for r in rows) == pytest.approx(1.0, abs=1e-12)
    assert sum(r[1] for r in rows) == pytest.approx(rows[0][4])
    by_type = conn.execute(
        "SELECT query_type, sum(share), sum(recall_points) FROM "
        "pgeval.loss_by_type(%s, 10, NULL, 1) GROUP BY 1",
        (exp,),
    ).fetchall()
    assert by_type and all(
        s == pytest.approx(1.0) and p == pytest.approx(1.0) for _, s, p in by_type
    )
