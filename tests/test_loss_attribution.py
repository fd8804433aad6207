"""Loss attribution in SQL (METRICS.md "Loss attribution"): hand-computed chains for every
category, counts that add up to the relevant chunks missing from the final top K, and Recall@K
points that sum with the final Recall@K to 1."""

from __future__ import annotations

import psycopg
import pytest
from helpers import make_testset
from helpers_stage import dist, make_experiment, stage_run

FULL = ["exact", "hnsw", "bm25", "merge", "rerank"]


def fate(conn, exp, k, rep=1):
    rows = conn.execute(
        "SELECT query_id, chunk_id, category FROM pgeval.chunk_fate(%s, %s, %s)", (exp, k, rep)
    ).fetchall()
    return {(q, c): cat for q, c, cat in rows}


def summary(conn, exp, k, rep=1):
    rows = conn.execute(
        "SELECT category, chunks, share, recall_points, points_min, points_max "
        "FROM pgeval.loss_summary(%s, %s, %s)",
        (exp, k, rep),
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


def recall(conn, run_id, k):
    return conn.execute(
        "SELECT value FROM pgeval.summary(%s, %s)", (run_id, [f"recall@{k}"])
    ).fetchone()[0]


def missing_from_final(conn, final_run, k):
    """Independent count: relevant chunks of valid queries not in the final run's top K."""
    return conn.execute(
        """SELECT count(*) FROM pgeval.qrel j JOIN pgeval.run r ON r.testset_id = j.testset_id
            WHERE r.run_id = %s AND j.grade >= 1
              AND NOT EXISTS (SELECT 1 FROM pgeval.result x WHERE x.run_id = r.run_id
                                 AND x.query_id = j.query_id AND x.chunk_id = j.chunk_id
                                 AND x.rank <= %s)""",
        (final_run, k),
    ).fetchone()[0]


@pytest.fixture
def full_chain(clean, conn):
    """exact, hnsw, bm25 (D = 3), merge (M = rerank top-n = 3), rerank (K = 2)."""
    make_testset(
        conn,
        "la",
        {
            "q1": {"a": 3, "b": 2, "c": 1, "d": 1, "e": 2, "f": 1, "g": 0},
            "q2": {"x": 2},
            "q3": {"y": 1},
            "q4": {"n": 0},  # no relevant chunk: excluded
            "q5": {},  # unanswerable
        },
        types={"q1": ["multi_answer"], "q2": ["single_answer", "exact"], "q3": ["single_answer"]},
        unanswerable=("q5",),
    )
    exp = make_experiment(conn, "e1", "la", FULL)
    runs = {
        "exact": stage_run(
            conn,
            "e1",
            "exact",
            {
                "q1": dist(["d", "a", "c"]),
                "q2": dist(["x", "z1", "z2"]),
                "q3": dist(["z1", "z2", "z3"]),
                "q4": dist(["n"]),
                "q5": dist(["z1"]),
            },
            testset="la",
            depth=3,
        ),
        "hnsw": stage_run(
            conn,
            "e1",
            "hnsw",
            {"q1": dist(["a", "c", "g"]), "q2": dist(["x"]), "q3": dist(["z1"]), "q4": dist(["n"])},
            testset="la",
            depth=3,
        ),
        "bm25": stage_run(
            conn, "e1", "bm25", {"q1": ["b", "a", "h"], "q3": ["y", "z2"]}, testset="la", depth=3
        ),
        "merge": stage_run(
            conn,
            "e1",
            "merge",
            {"q1": ["a", "b", "g", "c", "h"], "q2": ["x"], "q3": ["z1", "y", "z2"]},
            testset="la",
            depth=6,
            params={"score": "similarity", "inputs": ["hnsw", "bm25"]},
        ),
        "rerank": stage_run(
            conn,
            "e1",
            "rerank",
            {"q1": ["g", "a", "b"], "q2": ["x"], "q3": ["z1", "z2"]},
            testset="la",
            depth=3,
            params={"score": "similarity", "input": "merge", "top_n": 3},
        ),
    }
    return exp, runs


def test_full_chain_categories_by_hand(conn, full_chain):
    exp, runs = full_chain
    f = fate(conn, exp, 2)
    assert f == {
        ("q1", "a"): "kept",
        ("q1", "b"): "rerank",
        ("q1", "c"): "fusion",
        ("q1", "d"): "index",
        ("q1", "e"): "reach",
        ("q1", "f"): "reach",
        ("q2", "x"): "kept",
        ("q3", "y"): "rerank",
    }
    lost = conn.execute("SELECT count(*) FROM pgeval.loss_attribution(%s, 2)", (exp,)).fetchone()[0]
    assert lost == missing_from_final(conn, runs["rerank"], 2) == 6


def test_full_chain_summary_points_add_up(conn, full_chain):
    exp, runs = full_chain
    s = summary(conn, exp, 2)
    assert list(s) == ["index", "reach", "fusion", "rerank", "kept"]
    assert {c: v[0] for c, v in s.items()} == {
        "index": 1,
        "reach": 2,
        "fusion": 1,
        "rerank": 2,
        "kept": 2,
    }
    assert s["reach"][1] == pytest.approx(2 / 8)
    points = {c: v[2] for c, v in s.items()}
    assert points["index"] == pytest.approx(1 / 18)
    assert points["reach"] == pytest.approx(2 / 18)
    assert points["fusion"] == pytest.approx(1 / 18)
    assert points["rerank"] == pytest.approx(7 / 18)
    assert points["kept"] == pytest.approx(recall(conn, runs["rerank"], 2)) == pytest.approx(7 / 18)
    assert sum(points.values()) == pytest.approx(1.0)
    assert sum(v[0] for c, v in s.items() if c != "kept") == missing_from_final(
        conn, runs["rerank"], 2
    )


def test_chain_links(conn, full_chain):
    exp, runs = full_chain
    rows = conn.execute("SELECT label, link, cut FROM pgeval.loss_chain(%s, 2)", (exp,)).fetchall()
    assert rows == [
        ("rerank", "final", 2),
        ("rerank", "rerank", 2),
        ("merge", "merge", 3),
        ("hnsw", "path", 3),
        ("bm25", "path", 3),
        ("exact", "exact", 3),
    ]


def test_by_type_and_worst_queries(conn, full_chain):
    exp, _ = full_chain
    rows = conn.execute(
        "SELECT query_type, category, queries, chunks, recall_points "
        "FROM pgeval.loss_by_type(%s, 2)",
        (exp,),
    ).fetchall()
    by = {(t, c): (q, n, p) for t, c, q, n, p in rows}
    assert by[("single_answer", "kept")] == (2, 1, pytest.approx(0.5))
    assert by[("single_answer", "rerank")] == (2, 1, pytest.approx(0.5))
    assert by[("single_answer", "index")][1] == 0
    assert by[("multi_answer", "reach")] == (1, 2, pytest.approx(2 / 6))
    for t in ("single_answer", "multi_answer", "exact"):
        assert sum(p for (tt, _), (_, _, p) in by.items() if tt == t) == pytest.approx(1.0)
    worst = conn.execute(
        "SELECT query_id, recall, lost_rerank, lost_reach, lost "
        "FROM pgeval.loss_worst_queries(%s, 2)",
        (exp,),
    ).fetchall()
    assert [w[0] for w in worst] == ["q3", "q1"]  # q2 lost nothing
    assert worst[0][1:4] == (0.0, 1, 0)
    assert worst[1][1] == pytest.approx(1 / 6) and worst[1][3] == 2
    assert {x["chunk_id"]: x["category"] for x in worst[1][4]} == {
        "b": "rerank",
        "c": "fusion",
        "d": "index",
        "e": "reach",
        "f": "reach",
    }


def test_order_comes_from_experiment_config(clean, conn):
    """The final stage is the last one in config->'stages', not the last run written."""
    make_testset(conn, "ord", {"q": {"a": 1, "b": 1}})
    exp = make_experiment(conn, "o1", "ord", ["exact", "hnsw"])
    stage_run(conn, "o1", "hnsw", {"q": dist(["b", "x", "a"])}, testset="ord", depth=3)
    stage_run(conn, "o1", "exact", {"q": dist(["a", "b", "x"])}, testset="ord", depth=3)
    assert fate(conn, exp, 1) == {("q", "a"): "index", ("q", "b"): "kept"}
    # without a configured order the later run is final: exact keeps a and b is out of reach
    conn.execute("UPDATE pgeval.experiment SET config = '{}' WHERE experiment_id = %s", (exp,))
    assert fate(conn, exp, 1) == {("q", "a"): "kept", ("q", "b"): "reach"}


def test_no_exact_stage_is_retrieval(clean, conn):
    make_testset(conn, "nx", {"q": {"a": 1, "b": 1, "c": 1}})
    exp = make_experiment(conn, "n1", "nx", ["hnsw", "bm25", "merge"])
    stage_run(conn, "n1", "hnsw", {"q": dist(["a", "z"])}, testset="nx", depth=2)
    stage_run(conn, "n1", "bm25", {"q": ["b"]}, testset="nx", depth=2)
    final = stage_run(conn, "n1", "merge", {"q": ["a", "z", "b"]}, testset="nx", depth=4)
    assert fate(conn, exp, 2) == {("q", "a"): "kept", ("q", "b"): "fusion", ("q", "c"): "retrieval"}
    s = summary(conn, exp, 2)
    assert list(s) == ["retrieval", "fusion", "kept"]
    assert sum(v[2] for v in s.values()) == pytest.approx(1.0)
    assert s["kept"][2] == pytest.approx(recall(conn, final, 2))


def test_single_path_is_cut_at_k(clean, conn):
    """exact, hnsw: the path and exact search are both cut at K."""
    make_testset(conn, "sp", {"q": {"a": 1, "b": 1, "c": 1, "d": 1}})
    exp = make_experiment(conn, "s1", "sp", ["exact", "hnsw"])
    stage_run(conn, "s1", "exact", {"q": dist(["a", "b", "c", "d"])}, testset="sp", depth=4)
    final = stage_run(conn, "s1", "hnsw", {"q": dist(["a", "c", "b", "d"])}, testset="sp", depth=4)
    # b: exact rank 2 <= K, hnsw rank 3 > K -> index; d: exact rank 4 > K -> reach
    assert fate(conn, exp, 2) == {
        ("q", "a"): "kept",
        ("q", "c"): "kept",
        ("q", "b"): "index",
        ("q", "d"): "reach",
    }
    assert missing_from_final(conn, final, 2) == 2
    assert list(summary(conn, exp, 2)) == ["index", "reach", "kept"]


def test_keyword_path_alone_cannot_split(clean, conn):
    """exact, bm25 (final): the path holds no vector search, so the loss is retrieval."""
    make_testset(conn, "kw", {"q": {"a": 1, "b": 1}})
    exp = make_experiment(conn, "k1", "kw", ["exact", "bm25"])
    stage_run(conn, "k1", "exact", {"q": dist(["b", "a"])}, testset="kw", depth=2)
    stage_run(conn, "k1", "bm25", {"q": ["a", "x"]}, testset="kw", depth=2)
    assert fate(conn, exp, 1) == {("q", "a"): "kept", ("q", "b"): "retrieval"}


def test_rerank_over_a_single_path(clean, conn):
    """exact, hnsw, rerank (top-n 3, K 2): no merge, so no fusion category; the path is cut at 3."""
    make_testset(conn, "rp", {"q": {"a": 1, "b": 1, "d": 1, "r": 1}})
    exp = make_experiment(conn, "r1", "rp", ["exact", "hnsw", "rerank"])
    stage_run(conn, "r1", "exact", {"q": dist(["a", "d", "b", "c"])}, testset="rp", depth=4)
    stage_run(conn, "r1", "hnsw", {"q": dist(["a", "b", "c", "d"])}, testset="rp", depth=4)
    final = stage_run(
        conn,
        "r1",
        "rerank",
        {"q": ["c", "a", "b"]},
        testset="rp",
        depth=3,
        params={"score": "similarity", "top_n": 3},
    )
    # d: hnsw rank 4 > M = 3, exact rank 2 <= 3 -> index; b: handed to rerank, cut -> rerank;
    # r: nowhere -> reach
    assert fate(conn, exp, 2) == {
        ("q", "a"): "kept",
        ("q", "b"): "rerank",
        ("q", "d"): "index",
        ("q", "r"): "reach",
    }
    s = summary(conn, exp, 2)
    assert list(s) == ["index", "reach", "rerank", "kept"]
    assert s["kept"][2] == pytest.approx(recall(conn, final, 2)) == pytest.approx(0.25)


def test_merge_inputs_exclude_vector_paths(clean, conn):
    """A merge that fused only bm25: exact search cannot split its loss -> retrieval."""
    make_testset(conn, "mi", {"q": {"a": 1, "b": 1}})
    exp = make_experiment(conn, "m1", "mi", ["exact", "hnsw", "bm25", "merge"])
    stage_run(conn, "m1", "exact", {"q": dist(["a", "b"])}, testset="mi", depth=2)
    stage_run(conn, "m1", "hnsw", {"q": dist(["a", "b"])}, testset="mi", depth=2)
    stage_run(conn, "m1", "bm25", {"q": ["b"]}, testset="mi", depth=2)
    stage_run(
        conn,
        "m1",
        "merge",
        {"q": ["b"]},
        testset="mi",
        depth=2,
        params={"score": "similarity", "inputs": ["bm25"]},
    )
    assert fate(conn, exp, 2) == {("q", "a"): "retrieval", ("q", "b"): "kept"}


def test_merge_without_named_inputs_uses_exact_only_without_ann(clean, conn):
    make_testset(conn, "me", {"q": {"a": 1, "b": 1, "c": 1}})
    exp = make_experiment(conn, "m2", "me", ["exact", "bm25", "merge"])
    stage_run(conn, "m2", "exact", {"q": dist(["a", "c"])}, testset="me", depth=2)
    stage_run(conn, "m2", "bm25", {"q": ["b"]}, testset="me", depth=2)
    stage_run(conn, "m2", "merge", {"q": ["a", "b", "c"]}, testset="me", depth=3)
    # exact is a path here: c was fused out (merge rank 3 > K 2), not lost by an index
    assert fate(conn, exp, 2) == {("q", "a"): "kept", ("q", "b"): "kept", ("q", "c"): "fusion"}
    links = conn.execute(
        "SELECT label, link FROM pgeval.loss_chain(%s, 2) WHERE link = 'path'", (exp,)
    ).fetchall()
    assert links == [("exact", "path"), ("bm25", "path")]


def test_repetitions_average(clean, conn):
    make_testset(conn, "rep", {"q": {"a": 1, "b": 1, "c": 1, "d": 1}})
    exp = make_experiment(conn, "p1", "rep", ["exact", "hnsw"])
    for rep, hnsw in ((1, ["a", "c", "b", "d"]), (2, ["a", "b", "c", "d"])):
        stage_run(
            conn,
            "p1",
            "exact",
            {"q": dist(["a", "b", "c", "d"])},
            testset="rep",
            depth=4,
            repetition=rep,
        )
        stage_run(conn, "p1", "hnsw", {"q": dist(hnsw)}, testset="rep", depth=4, repetition=rep)
    assert summary(conn, exp, 2, 2)["index"][2] == 0.0
    s = summary(conn, exp, 2, None)
    assert s["index"][2] == pytest.approx(0.125)
    assert s["index"][3:5] == (0.0, 0.25)
    assert s["reach"][2] == pytest.approx(0.375)
    assert s["kept"][2] == pytest.approx(0.5)
    reps = conn.execute(
        "SELECT DISTINCT repetitions FROM pgeval.loss_summary(%s, 2, NULL)", (exp,)
    ).fetchall()
    assert reps == [(2,)]


def test_a_query_missing_from_every_stage(clean, conn):
    make_testset(conn, "ms", {"q": {"a": 1}, "r": {"b": 1}})
    exp = make_experiment(conn, "x1", "ms", ["exact", "hnsw"])
    stage_run(conn, "x1", "exact", {"q": dist(["a"]), "r": dist(["b"])}, testset="ms", depth=2)
    stage_run(conn, "x1", "hnsw", {"q": dist(["a"])}, testset="ms", depth=2)
    assert fate(conn, exp, 2) == {("q", "a"): "kept", ("r", "b"): "index"}


def test_bad_cutoff_is_refused(clean, conn):
    make_testset(conn, "bad", {"q": {"a": 1}})
    exp = make_experiment(conn, "b1", "bad", ["exact"])
    stage_run(conn, "b1", "exact", {"q": dist(["a"])}, testset="bad", depth=1)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="cut-off K must be >= 1"):
        conn.execute("SELECT * FROM pgeval.loss_summary(%s, 0)", (exp,)).fetchall()
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="relevance threshold"):
        conn.execute("SELECT * FROM pgeval.chunk_fate(%s, 10, 1, 0)", (exp,)).fetchall()
