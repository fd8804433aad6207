"""One p95 for one point (issue "Output a DBA can trust", item 3): a sweep point's p50/p95/p99
are the nearest-rank percentiles of the latencies of all its repetitions pooled, as the stage
report computes them, with the spread of the repetitions' own p95 beside it (p95_sd)."""

from __future__ import annotations

import statistics

import pytest
from dba_data import CRAN_TARGET, CRAN_TESTSET, ensure_cranfield

from evaluator.core.percentile import nearest_rank
from evaluator.tuning.sweep import SweepConfig, run_sweep

pytestmark = pytest.mark.slow


def test_point_percentiles_are_pooled_over_repetitions(database, conn):
    ensure_cranfield(conn)
    res = run_sweep(
        database,
        SweepConfig(
            testset=CRAN_TESTSET,
            target=CRAN_TARGET,
            stage="hnsw",
            params=("hnsw.ef_search=40",),
            settings={"enable_seqscan": "off", "work_mem": "4409kB"},
            repeat=3,
        ),
    )
    (point,) = res.points
    runs = [
        r[0]
        for r in conn.execute(
            "SELECT run_id FROM pgeval.sweep_point WHERE sweep_id = %s ORDER BY repetition",
            (res.sweep_id,),
        )
    ]
    assert len(runs) == 3
    per_run = []
    pooled: list[float] = []
    for run_id in runs:
        lat = [
            r[0]
            for r in conn.execute(
                "SELECT latency_ms FROM pgeval.query_timing WHERE run_id = %s", (run_id,)
            )
        ]
        per_run.append(nearest_rank(lat, 0.95))
        pooled += lat
    assert point["p95_ms"] == pytest.approx(nearest_rank(pooled, 0.95), abs=1e-12)
    assert point["p50_ms"] == pytest.approx(nearest_rank(pooled, 0.5), abs=1e-12)
    assert point["p99_ms"] == pytest.approx(nearest_rank(pooled, 0.99), abs=1e-12)
    assert point["p95_sd"] == pytest.approx(statistics.stdev(per_run), rel=1e-9)
