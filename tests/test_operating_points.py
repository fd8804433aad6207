"""A sweep's operating points (evaluator/measure/operating_points.py) against the real server:
the reach rule is SQL's (one tolerance, pgeval.reaches), and every answer of OperatingPoints
(the point by number or at a setting, the points reaching a target, the cheapest, the Pareto
front, the best) agrees with pgeval.sweep_recommendation and with numbers computed here from
the stored points. Points are injected, as test_recommendation_rule.py does; the last test
reads a real sweep."""

from __future__ import annotations

import json
import statistics

import pytest
from helpers import make_testset

from evaluator.measure import operating_points as stored
from evaluator.measure.operating_points import REACH_TOLERANCE, OperatingPoints, reaches
from evaluator.tuning.sweep import store

WORK = ("hnsw.ef_search",)
# point -> (ef_search, recall per repetition, p95 per repetition)
POINTS = {
    1: ("10", [0.90, 0.92], [1.0, 1.1]),
    2: ("20", [0.95 - REACH_TOLERANCE / 2, 0.95 - REACH_TOLERANCE / 2], [2.0, 2.1]),
    3: ("40", [0.97, 0.99], [1.9, 2.0]),
    4: ("80", [0.96, 0.96], [3.0, 3.2]),
}


def test_the_tolerance_is_sqls(conn):
    assert conn.execute("SELECT pgeval.reach_tolerance()").fetchone()[0] == REACH_TOLERANCE
    cases = [(0.95 - REACH_TOLERANCE / 2, 0.95), (0.95 - 2 * REACH_TOLERANCE, 0.95), (1.0, 1.0)]
    for recall, target in cases:
        got = conn.execute("SELECT pgeval.reaches(%s, %s)", (recall, target)).fetchone()[0]
        assert got is reaches(recall, target), (recall, target)
    assert conn.execute("SELECT pgeval.reaches(NULL, 0.9)").fetchone()[0] is None
    assert reaches(None, 0.9) is False


@pytest.fixture
def sweep(clean, conn):
    make_testset(conn, "op", {"q1": {"c1": 1}})
    sweep_id = conn.execute(
        "INSERT INTO pgeval.sweep (name, testset_id, target, stage, grid, k, depth, repeat) "
        "SELECT 'op', testset_id, 't', 'hnsw', '{}', 10, 20, 2 FROM pgeval.testset "
        "RETURNING sweep_id"
    ).fetchone()[0]
    for point, (ef, recalls, p95s) in POINTS.items():
        for rep, (recall, p95) in enumerate(zip(recalls, p95s, strict=True), 1):
            conn.execute(
                "INSERT INTO pgeval.sweep_point (sweep_id, point, repetition, label, settings, "
                "config_hash, index_recall, p95_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (sweep_id, point, rep, f"ef_search={ef}", json.dumps({WORK[0]: ef}),
                 f"h{point}", recall, p95),
            )  # fmt: skip
    return sweep_id


def _points(conn, sweep_id: int, target: float) -> OperatingPoints:
    rec = store.recommendation(conn, sweep_id, target, WORK)
    return OperatingPoints.of(sweep_id, stored.summary(conn, sweep_id), target, rec)


def test_the_answers_agree_with_sql_and_the_stored_points(conn, sweep):
    ops = _points(conn, sweep, 0.95)
    recall = {p: statistics.fmean(r) for p, (_, r, _) in POINTS.items()}
    p95 = {p: statistics.fmean(v) for p, (_, _, v) in POINTS.items()}
    assert [m.point for m in ops.points] == list(POINTS)
    for m in ops.points:
        assert m.recall == pytest.approx(recall[m.point], abs=1e-15)
        assert m.p95_ms == pytest.approx(p95[m.point])
    assert ops.point(3).label == "ef_search=40" and ops.point(9) is None
    assert ops.at(WORK[0], 80).point == 4 and ops.at(WORK[0], 5) is None
    # point 2 is under 0.95 by less than the tolerance: it reaches it, and is the least work
    assert [m.point for m in ops.reaching()] == [2, 3, 4]
    assert [m.point for m in ops.reaching(0.965)] == [3]
    sql = conn.execute(
        "SELECT point FROM pgeval.sweep_recommendation(%s, 0.95, %s)", (sweep, list(WORK))
    ).fetchone()[0]
    assert ops.cheapest().point == sql == 2
    # the front by hand: no other point at least as good on both axes and better on one
    front = [
        p
        for p in POINTS
        if not any(
            recall[o] >= recall[p]
            and p95[o] <= p95[p]
            and (recall[o], p95[o]) != (recall[p], p95[p])
            for o in POINTS
            if o != p
        )
    ]
    assert [m.point for m in ops.pareto()] == sorted(front, key=lambda p: p95[p]) == [1, 3]
    assert ops.best().point == max(recall, key=lambda p: recall[p]) == 3
    # out of reach: no cheapest, and the object says so as SQL does
    none = _points(conn, sweep, 0.999)
    assert none.reaching() == [] and none.cheapest() is None and none.recommendation is None


@pytest.mark.slow
def test_a_real_sweep(database, conn):
    from dba_data import CRAN_TARGET, CRAN_TESTSET, ensure_cranfield

    from evaluator.tuning.sweep import SweepConfig, run_sweep

    ensure_cranfield(conn)
    cfg = SweepConfig(
        testset=CRAN_TESTSET,
        target=CRAN_TARGET,
        stage="hnsw",
        settings={"enable_seqscan": "off", "work_mem": "7MB"},
        params=("hnsw.ef_search=10,40,200",),
        repeat=1,
        name="dba-operating-points",
    )
    res = run_sweep(database, cfg)
    ops = res.operating_points
    stored = dict(
        conn.execute(
            "SELECT point, avg(index_recall) FROM pgeval.sweep_point WHERE sweep_id = %s "
            "GROUP BY point",
            (res.sweep_id,),
        ).fetchall()
    )
    assert {m.point: m.recall for m in ops.points} == pytest.approx(stored, abs=1e-12)
    reaching = sorted(p for p, r in stored.items() if r >= res.target_recall - 1e-12)
    assert [m.point for m in ops.reaching()] == reaching
    rec = store.recommendation(conn, res.sweep_id, res.target_recall, WORK)
    assert (ops.cheapest() and ops.cheapest().point) == (rec and rec["point"])
    assert ops.at(WORK[0], 40) == ops.point(2) != ops.point(1)
