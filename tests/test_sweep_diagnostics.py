"""Diagnostics: the plans (EXPLAIN ANALYZE, BUFFERS) of the stage that served each flagged query,
stored in pgeval.query_plan and shown by `pgeval plans RUN`."""

from __future__ import annotations

import json

import pytest
from dba_data import CRAN_TARGET, CRAN_TESTSET, ensure_cranfield
from helpers import make_run

from evaluator.measure import diagnostics
from evaluator.tuning.sweep import SweepConfig, run_sweep


@pytest.fixture
def swept(database, conn):
    ensure_cranfield(conn)
    res = run_sweep(
        database,
        SweepConfig(
            testset=CRAN_TESTSET,
            target=CRAN_TARGET,
            stage="hnsw",
            params=("hnsw.ef_search=10",),
            settings={"enable_seqscan": "off", "work_mem": "18MB"},
            repeat=1,
            name="dba-plans",
        ),
    )
    return res


def flagged_ids(conn, run_name: str) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT f.query_id FROM pgeval.run r, pgeval.flagged(r.run_id) f "
            "WHERE r.name = %s",
            (run_name,),
        ).fetchall()
    }


def test_plans_of_flagged_queries(database, conn, swept):
    run = "dba-plans.ef_search=10.1"
    wanted = flagged_ids(conn, run)
    assert wanted  # Cranfield with MiniLM: many queries have low recall
    done = diagnostics.capture(database, run)
    assert done["captured"] == len(wanted) and done["kept"] == 0
    stored = conn.execute(
        "SELECT query_id, plan FROM pgeval.query_plan p JOIN pgeval.run r "
        "USING (run_id) WHERE r.name = %s",
        (run,),
    ).fetchall()
    assert {q for q, _ in stored} == wanted
    plan = stored[0][1]
    assert plan["settings"]["hnsw.ef_search"] == "10"
    summary = diagnostics.summarize(plan)
    assert summary["access"] == "Index Scan using dba_cran_hnsw"
    assert summary["rows"] == 10 and summary["shared_hit"] + summary["shared_read"] > 0
    assert "Execution Time" in plan["explain"]
    # stored plans are kept; --refresh captures again
    assert diagnostics.capture(database, run)["kept"] == len(wanted)
    assert diagnostics.capture(database, run, refresh=True)["captured"] == len(wanted)


def test_exact_stage_plan_is_a_sequential_scan(database, conn, swept):
    run = "dba-plans.exact.1"
    diagnostics.capture(database, run)
    rows = diagnostics.show(database, run)
    assert rows and all(r["access"] == "Seq Scan on dba_cran" for r in rows)
    assert {r["stage_run"] for r in rows} == {run}


def test_non_vector_run_gets_the_plans_of_its_vector_stages(database, conn, swept):
    exp_id = swept.experiment_id
    conn.execute("DELETE FROM pgeval.run WHERE name = 'dba-plans.merge.1'")
    make_run(
        conn,
        "dba-plans.merge.1",
        CRAN_TESTSET,
        {"1": ["999"], "2": ["998"]},
        stage="merge",
        experiment_id=exp_id,
    )
    done = diagnostics.capture(database, "dba-plans.merge.1")
    assert set(done["runs"]) == {"dba-plans.exact.1", "dba-plans.ef_search=10.1"}
    rows = diagnostics.show(database, "dba-plans.merge.1")
    assert {r["stage_run"] for r in rows} == set(done["runs"])
    assert all(r["access"] for r in rows)


def test_cli_plans(pgeval, conn, swept):
    run = "dba-plans.ef_search=10.1"
    code, out, err = pgeval("plans", run, "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows and rows[0]["plan"]["explain"]["Plan"] and rows[0]["access"]
    code, out, err = pgeval("plans", run, "--no-capture", "--full")
    assert code == 0 and "flagged queries and their plans" in out and '"Node Type"' in out
    code, out, err = pgeval("plans", "no-such-run")
    assert code == 1 and "no-such-run" in err
