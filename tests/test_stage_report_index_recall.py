"""Index recall against exact search (METRICS.md "Index recall"), hand-computed: ties at d_K
count, epsilon = 1e-6 * max(1, |d_K|), missing rows are misses, the mean runs over every query
with exact results (judgements play no part)."""

from __future__ import annotations

import pytest
from helpers import make_testset
from helpers_stage import make_experiment, stage_run


def recall_rows(conn, exp, k=3, rep=1):
    return {
        r[0]: r[1:]
        for r in conn.execute(
            "SELECT label, queries, index_recall, short_queries, repetition "
            "FROM pgeval.index_recall(%s, %s, %s)",
            (exp, k, rep),
        ).fetchall()
    }


@pytest.fixture
def tied(clean, conn):
    # judgements are irrelevant to index recall: q3 has none and still counts
    make_testset(conn, "ir", {"q1": {"c1": 1}, "q2": {"x": 1}, "q3": {}, "q4": {"y": 1}})
    exp = make_experiment(conn, "ir1", "ir", ["exact", "hnsw", "diskann", "bm25"])
    stage_run(
        conn,
        "ir1",
        "exact",
        {
            "q1": [("c1", 0.1), ("c2", 0.2), ("c3", 0.3), ("c4", 0.3), ("c5", 0.5)],
            "q2": [("x1", 2.0), ("x2", 4.0), ("x3", 1000.0), ("x4", 1001.0)],
            "q3": [("y1", 0.5), ("y2", 0.6)],  # fewer rows than K in the whole table
        },
        testset="ir",
        depth=5,
    )
    stage_run(
        conn,
        "ir1",
        "hnsw",
        {
            # c4 ties with the 3rd neighbour (0.3): a hit; c5 at 0.5 is not -> 2/3
            "q1": [("c1", 0.1), ("c4", 0.3), ("c5", 0.5)],
            # d_K = 1000: eps = 1e-3 -> 1000.0009 counts, 1000.002 does not; one row missing -> 1/3
            "q2": [("x9", 1000.0009), ("x8", 1000.002)],
            # q3 is missing from the run: 0
        },
        testset="ir",
        depth=5,
    )
    stage_run(
        conn,
        "ir1",
        "diskann",
        {
            # scores are NULL: the exact stage's distance of the same chunk is used; x3 counts
            "q1": [("c2", None), ("c3", None), ("c1", None)],
            "q2": [("x1", None), ("x2", None), ("x3", None)],
            "q3": [("y2", None), ("y1", None)],
        },
        testset="ir",
        depth=5,
    )
    stage_run(conn, "ir1", "bm25", {"q1": ["c1"]}, testset="ir", depth=5)
    return exp


def test_index_recall_by_hand(conn, tied):
    rows = recall_rows(conn, tied, k=3)
    assert set(rows) == {"hnsw", "diskann"}  # exact and bm25 are not ANN stages
    queries, value, short, rep = rows["hnsw"]
    assert queries == 3 and rep == 1
    assert value == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert short == 2  # q2 returned 2 of 3 rows, q3 none
    queries, value, short, _ = rows["diskann"]
    # q3: exact returned only 2 rows, so the denominator is 2 and both are hits
    assert value == pytest.approx((1 + 1 + 1) / 3) and short == 0


def test_epsilon_is_relative_to_d_k(clean, conn):
    make_testset(conn, "eps", {"q": {}})
    exp = make_experiment(conn, "eps1", "eps", ["exact", "hnsw", "ivfflat"])
    stage_run(conn, "eps1", "exact", {"q": [("a", 0.1), ("b", 0.3)]}, testset="eps", depth=2)
    stage_run(conn, "eps1", "hnsw", {"q": [("a", 0.1), ("c", 0.3 + 5e-7)]}, testset="eps", depth=2)
    stage_run(
        conn, "eps1", "ivfflat", {"q": [("a", 0.1), ("c", 0.3 + 5e-6)]}, testset="eps", depth=2
    )
    rows = recall_rows(conn, exp, k=2)
    assert rows["hnsw"][1] == pytest.approx(1.0)  # within 1e-6 of d_K
    assert rows["ivfflat"][1] == pytest.approx(0.5)  # beyond it


def test_repetitions_pair_with_their_own_exact_run(clean, conn):
    make_testset(conn, "rr", {"q": {}})
    exp = make_experiment(conn, "rr1", "rr", ["exact", "hnsw"])
    for rep, far in ((1, 0.2), (2, 0.9)):
        stage_run(
            conn,
            "rr1",
            "exact",
            {"q": [("a", 0.1), ("b", far)]},
            testset="rr",
            depth=2,
            repetition=rep,
        )
        stage_run(
            conn,
            "rr1",
            "hnsw",
            {"q": [("a", 0.1), ("c", 0.5)]},
            testset="rr",
            depth=2,
            repetition=rep,
        )
    rows = conn.execute(
        "SELECT repetition, index_recall FROM pgeval.index_recall(%s, 2, NULL)", (exp,)
    ).fetchall()
    assert rows == [(1, 0.5), (2, 1.0)]
    assert (
        conn.execute("SELECT count(*) FROM pgeval.index_recall(%s, 2, 2)", (exp,)).fetchone()[0]
        == 1
    )


def test_named_stage_kind_from_params(clean, conn):
    """`fast=hnsw`: run.stage is the name, params carry the kind and the distance score."""
    make_testset(conn, "nk", {"q": {}})
    exp = make_experiment(conn, "nk1", "nk", ["exact", "fast"])
    stage_run(conn, "nk1", "exact", {"q": [("a", 0.1), ("b", 0.2)]}, testset="nk", depth=2)
    stage_run(
        conn,
        "nk1",
        "fast",
        {"q": [("a", 0.1)]},
        testset="nk",
        depth=2,
        params={"kind": "hnsw", "score": "distance"},
    )
    assert recall_rows(conn, exp, k=2)["fast"][1] == pytest.approx(0.5)
    roles = conn.execute(
        "SELECT label, role, is_final FROM pgeval.experiment_stages(%s)", (exp,)
    ).fetchall()
    assert roles == [("exact", "exact", False), ("fast", "ann", True)]


def test_without_exact_stage_there_is_no_index_recall(clean, conn):
    make_testset(conn, "nx", {"q": {}})
    exp = make_experiment(conn, "nx1", "nx", ["hnsw"])
    stage_run(conn, "nx1", "hnsw", {"q": [("a", 0.1)]}, testset="nx", depth=2)
    assert recall_rows(conn, exp) == {}


def test_distribution_and_missed_neighbours_by_hand(conn, tied):
    """Per ANN stage: the per-query recall's minimum, p5, p10 (nearest rank), the queries at 0;
    per query the exact neighbours the index missed, with their exact rank and distance."""
    dist = {
        r[0]: r[1:]
        for r in conn.execute(
            "SELECT label, queries, recall_min, p5, p10, at_zero, zero_queries "
            "FROM pgeval.index_recall_distribution(%s, 3)",
            (tied,),
        ).fetchall()
    }
    # hnsw: q1 2/3, q2 1/3, q3 0 (missing from the run); 3 values: p5 = p10 = the smallest
    assert dist["hnsw"] == (3, 0.0, 0.0, 0.0, 1, ["q3"])
    assert dist["diskann"] == (3, 1.0, 1.0, 1.0, 0, [])
    missed = conn.execute(
        "SELECT label, query_id, exact_rank, chunk_id, distance "
        "FROM pgeval.index_recall_misses(%s, 3)",
        (tied,),
    ).fetchall()
    assert missed == [
        # q1: c2 and c3 not in hnsw's first 3 (c4, tied with c3 at 0.3, counts as a hit)
        ("hnsw", "q1", 2, "c2", 0.2),
        ("hnsw", "q1", 3, "c3", 0.3),
        ("hnsw", "q2", 1, "x1", 2.0),
        ("hnsw", "q2", 2, "x2", 4.0),
        ("hnsw", "q2", 3, "x3", 1000.0),
        ("hnsw", "q3", 1, "y1", 0.5),
        ("hnsw", "q3", 2, "y2", 0.6),
    ]


def test_distribution_matches_numpy(clean, conn):
    """Random per-query recall over 57 queries and two repetitions: SQL's min, p5, p10 and zeros
    equal numpy's over the per-query means (nearest rank: sorted[ceil(p * n) - 1])."""
    import math
    import random

    import numpy as np

    rng = random.Random(5)
    qids = [f"q{i:02d}" for i in range(57)]
    make_testset(conn, "ird", {q: {} for q in qids})
    exp = make_experiment(conn, "ird1", "ird", ["exact", "hnsw"])
    values = {q: [] for q in qids}
    for rep in (1, 2):
        exact = {q: [(f"{q}-n{j}", 0.1 * j) for j in range(1, 6)] for q in qids}
        ann = {}
        for q in qids:
            keep = rng.choice([0, 0, 1, 3, 4, 5]) if rep == 1 or q > "q30" else 5
            ann[q] = exact[q][:keep] + [(f"{q}-far{j}", 9.0) for j in range(5 - keep)]
            values[q].append(keep / 5)
        stage_run(conn, "ird1", "exact", exact, testset="ird", depth=5, repetition=rep)
        stage_run(conn, "ird1", "hnsw", ann, testset="ird", depth=5, repetition=rep)
    mean = np.sort([np.mean(v) for v in values.values()])
    row = conn.execute(
        "SELECT queries, recall_min, p5, p10, at_zero, zero_queries "
        "FROM pgeval.index_recall_distribution(%s, 5)",
        (exp,),
    ).fetchone()
    n = len(mean)
    assert row[0] == n and row[1] == pytest.approx(mean[0])
    assert row[2] == pytest.approx(mean[math.ceil(0.05 * n) - 1])
    assert row[3] == pytest.approx(mean[math.ceil(0.10 * n) - 1])
    zeros = sorted(q for q, v in values.items() if max(v) == 0)
    assert row[4] == len(zeros) > 0 and row[5] == zeros
    assert row[2] < mean.mean()  # the tail is below the mean: the numbers differ


def test_stage_report_shows_the_tail(pgeval, tied):
    code, out, err = pgeval("stage-report", "ir1", "--k", "3")
    assert code == 0, err
    assert "hnsw: p5 0.0000 · p10 0.0000 · min 0.0000 · 1 query at 0.0: q3" in out
    assert "diskann: p5 1.0000 · p10 1.0000 · min 1.0000 · no query at 0.0" in out


def test_html_report_shows_the_tail(pgeval, tied, tmp_path):
    page = tmp_path / "ir.html"
    code, out, err = pgeval("report", "ir1", "--k", "3", "--format", "html", "--out", str(page))
    assert code == 0, err
    text = page.read_text()
    assert "index_recall@3 per query" in text
    assert "p5 0.0000 · p10 0.0000 · min 0.0000 · 1 query at 0.0: q3" in text
