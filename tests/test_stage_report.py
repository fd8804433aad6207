"""`pgeval stage-report`: stages side by side (metrics from pgeval.summary, index recall, latency
by nearest rank, rows returned), loss attribution, by type, worst queries; table and JSON; the
errors a user can make."""

from __future__ import annotations

import json

import pytest
from helpers import make_testset
from helpers_stage import dist, make_experiment, stage_run

LAT = {"q1": 5.0, "q2": 1.0, "q3": 3.0, "q4": 2.0}


@pytest.fixture
def exp2(clean, conn):
    """exact, hnsw, bm25 (D = 3), merge final; two repetitions whose hnsw differs."""
    make_testset(
        conn,
        "sr",
        {
            "q1": {"a": 3, "b": 1},
            "q2": {"c": 2},
            "q3": {"d": 1, "e": 1},
            "q4": {},
        },
        types={"q1": ["fuzzy"], "q3": ["fuzzy", "long_tail"]},
        texts={"q3": "which wing has the least drag"},
    )
    exp = make_experiment(conn, "exp2", "sr", ["exact", "hnsw", "bm25", "merge"])
    for rep in (1, 2):
        stage_run(
            conn,
            "exp2",
            "exact",
            {
                "q1": dist(["a", "b", "x"]),
                "q2": dist(["c", "x", "y"]),
                "q3": dist(["x", "y", "z"]),
                "q4": dist(["x", "y", "z"]),
            },
            testset="sr",
            depth=3,
            repetition=rep,
            latency_ms=LAT,
        )
        hnsw_q1 = ["a", "x", "y"] if rep == 1 else ["a", "b", "x"]
        stage_run(
            conn,
            "exp2",
            "hnsw",
            {
                "q1": [(c, {"a": 0.1, "b": 0.2, "x": 0.3, "y": 0.5}[c]) for c in hnsw_q1],
                "q2": dist(["c", "x"]),
                "q3": dist(["x", "y", "z"]),
                "q4": dist(["x", "y", "z"]),
            },
            testset="sr",
            depth=3,
            repetition=rep,
            latency_ms={q: v * rep for q, v in LAT.items()},
        )
        stage_run(conn, "exp2", "bm25", {"q3": ["e", "w"]}, testset="sr", depth=3, repetition=rep)
        merged_q1 = ["x", "a", "y"] if rep == 1 else ["a", "b", "x"]
        stage_run(
            conn,
            "exp2",
            "merge",
            {"q1": merged_q1, "q2": ["c", "x"], "q3": ["x", "e", "y"]},
            testset="sr",
            depth=6,
            repetition=rep,
            params={"score": "similarity", "inputs": ["hnsw", "bm25"]},
        )
    return exp


def report_json(pgeval, *args):
    code, out, err = pgeval("stage-report", "exp2", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out), err


def test_json_stages_metrics_and_latency(pgeval, conn, exp2):
    rep, err = report_json(pgeval, "--k", "2", "--repetition", "1")
    assert "not statistically meaningful" in err
    assert [s["stage"] for s in rep["stages"]] == ["exact", "hnsw", "bm25", "merge"]
    by = {s["stage"]: s for s in rep["stages"]}
    # every metric is pgeval.summary of the run
    for name, s in by.items():
        run_id = conn.execute(
            "SELECT run_id FROM pgeval.run WHERE name = %s", (f"exp2.{name}.1",)
        ).fetchone()[0]
        for m, v in conn.execute(
            "SELECT measure, value FROM pgeval.summary(%s, %s)",
            (run_id, ["recall@2", "recall@10", "mrr@20", "ndcg@5"]),
        ):
            assert s["metrics"][m]["mean"] == pytest.approx(v)
    # hnsw rep 1: q1 a, x (x at 0.3 > d_2 = 0.2) -> 1/2; q2, q3, q4 as exact search -> 1
    assert by["hnsw"]["index_recall@2"]["mean"] == pytest.approx((0.5 + 1 + 1 + 1) / 4)
    assert "index_recall@2" not in by["exact"] and "index_recall@2" not in by["bm25"]
    # its distribution over the queries, and the neighbour q1 missed (b: exact rank 2, d = 0.2)
    assert by["hnsw"]["index_recall@2"]["distribution"] == {
        "queries": 4,
        "min": 0.5,
        "p5": 0.5,
        "p10": 0.5,
        "at_zero": 0,
        "zero_queries": [],
        "missed": [
            {
                "query_id": "q1",
                "repetition": 1,
                "neighbours": [{"rank": 2, "chunk_id": "b", "distance": pytest.approx(0.2)}],
            }
        ],
    }
    # nearest rank over [1, 2, 3, 5]: p50 = element 2, p95 = p99 = element 4
    assert by["exact"]["latency_ms"] == {"p50": 2.0, "p95": 5.0, "p99": 5.0}
    assert by["hnsw"]["rows"] == {"mean": 2.75, "min": 2, "max": 3, "depth": 3, "short_queries": 1}
    assert by["merge"]["latency_ms"] is None  # no timings: no latency
    assert by["merge"]["rows"]["mean"] == pytest.approx(8 / 3)


def test_json_loss_attribution_adds_up(pgeval, conn, exp2):
    rep, _ = report_json(pgeval, "--k", "2", "--repetition", "1")
    loss = {r["category"]: r for r in rep["loss_attribution"]}
    assert list(loss) == ["index", "reach", "fusion", "kept"]
    # rep 1: q1 a kept, b index (exact had it, hnsw did not); q2 c kept;
    # q3 d reach (no stage found it), e kept (bm25 had it, merge rank 2)
    assert {c: r["chunks"] for c, r in loss.items()} == {
        "index": 1,
        "reach": 1,
        "fusion": 0,
        "kept": 3,
    }
    assert sum(r["recall_points"] for r in loss.values()) == pytest.approx(1.0)
    final = conn.execute(
        "SELECT value FROM pgeval.summary((SELECT run_id FROM pgeval.run "
        "WHERE name = 'exp2.merge.1'), ARRAY['recall@2'])"
    ).fetchone()[0]
    assert loss["kept"]["recall_points"] == pytest.approx(final)
    assert [c["link"] for c in rep["chain"]] == ["final", "merge", "path", "path", "exact"]
    assert rep["worst_queries"]["queries"][0]["query_id"] == "q1"
    assert {(r["type"], r["category"]): r["chunks"] for r in rep["loss_by_type"]}[
        ("long_tail", "reach")
    ] == 1


def test_all_repetitions_mean_and_spread(pgeval, exp2):
    rep, _ = report_json(pgeval, "--k", "2")
    assert rep["repetition"] == "all" and rep["repetitions"] == [1, 2]
    hnsw = next(s for s in rep["stages"] if s["stage"] == "hnsw")
    r2 = hnsw["metrics"]["recall@2"]
    # q1 recall@2: rep 1 a only (1/2), rep 2 a, b (1) -> (1/2 + 1 + 0) / 3 and (1 + 1 + 0) / 3
    assert (r2["min"], r2["max"]) == (pytest.approx(1.5 / 3), pytest.approx(2 / 3))
    assert r2["mean"] == pytest.approx(1.75 / 3)
    # latencies of both repetitions pooled: [1,2,3,5,2,4,6,10] -> p50 element 4 = 3
    assert hnsw["latency_ms"]["p50"] == 3.0 and hnsw["latency_ms"]["p99"] == 10.0
    bm25 = next(s for s in rep["stages"] if s["stage"] == "bm25")
    assert bm25["rows"]["mean"] == 2.0 and bm25["rows"]["max"] == 2  # per run, not pooled
    loss = {r["category"]: r for r in rep["loss_attribution"]}
    assert loss["index"]["repetitions"] == 2
    assert (loss["index"]["points_min"], loss["index"]["points_max"]) == (0.0, pytest.approx(1 / 6))
    assert sum(r["recall_points"] for r in loss.values()) == pytest.approx(1.0)


def test_table_output(pgeval, exp2):
    code, out, err = pgeval("stage-report", "exp2", "--k", "2")
    assert code == 0, err
    # both repetitions: q1's recall is (1/2 + 1) / 2
    assert "hnsw: p5 0.7500 · p10 0.7500 · min 0.7500 · no query at 0.0" in out
    for text in (
        "stages: quality",
        "spread over 2 repetitions",
        "rows returned",
        "loss attribution",
        "reach",
        "worst queries",
        "b:index",
        "hnsw (top 3) + bm25 (top 3) -> merge (top 2)",
        "long_tail",
    ):
        assert text in out, text


def test_user_errors(pgeval, conn, exp2):
    code, _, err = pgeval("stage-report", "nope")
    assert code == 1 and "no experiment named 'nope'" in err
    code, _, err = pgeval("stage-report", "exp2", "--repetition", "7")
    assert code == 1 and "no repetition 7" in err
    code, _, err = pgeval("stage-report", "exp2", "--repetition", "x")
    assert code == 1 and "--repetition" in err
    code, _, err = pgeval("stage-report", "exp2", "--k", "0")
    assert code == 1 and "K must be >= 1" in err
    code, _, err = pgeval("stage-report", "exp2", "--rel", "4")
    assert code == 1 and "relevance threshold" in err
    assert "Traceback" not in err
    conn.execute("UPDATE pgeval.run SET status = 'failed' WHERE name = 'exp2.bm25.2'")
    code, _, err = pgeval("stage-report", "exp2")
    assert code == 1 and "exp2.bm25.2" in err and "--allow-partial" in err
    code, out, err = pgeval("stage-report", "exp2", "--allow-partial", "--repetition", "2")
    assert code == 0 and "PARTIAL" in err


def test_no_exact_stage_warns(pgeval, conn, clean):
    make_testset(conn, "nx", {"q": {"a": 1}})
    make_experiment(conn, "nx1", "nx", ["hnsw"])
    stage_run(conn, "nx1", "hnsw", {"q": dist(["b", "a"])}, testset="nx", depth=2)
    code, out, err = pgeval("stage-report", "nx1", "--k", "1", "--format", "json")
    assert code == 0, err
    assert "no exact stage" in err
    rep = json.loads(out)
    assert [r["category"] for r in rep["loss_attribution"]] == ["retrieval", "kept"]
    assert "index_recall@1" not in rep["stages"][0]


def test_help_teaches(pgeval):
    code, out, _ = pgeval("stage-report", "--help")
    assert code == 0
    for text in ("index", "reach", "fusion", "rerank", "Examples:", "--repetition"):
        assert text in out


def test_counts_print_as_integers_unless_true_means(pgeval, exp2):
    """Loss counts are means over repetitions: whole ones (one repetition) are integers in JSON,
    the table and the Markdown report; a mean that is not whole keeps its decimals."""
    one, _ = report_json(pgeval, "--k", "2", "--repetition", "1")
    for r in one["loss_attribution"]:
        assert type(r["chunks"]) is int and type(r["relevant"]) is int, r
        assert type(r["valid_queries"]) is int, r
    assert all(type(r["queries"]) is int and type(r["chunks"]) is int for r in one["loss_by_type"])
    code, out, err = pgeval("stage-report", "exp2", "--k", "2", "--repetition", "1")
    assert code == 0, err
    assert "(relevant chunks: 5)" in out
    both, _ = report_json(pgeval, "--k", "2")
    loss = {r["category"]: r for r in both["loss_attribution"]}
    # index: 1 chunk in repetition 1, none in repetition 2 -> the mean 0.5 stays a float;
    # 5 relevant chunks in both -> 5
    assert loss["index"]["chunks"] == 0.5 and type(loss["kept"]["relevant"]) is int
    code, md, err = pgeval("report", "exp2", "--format", "md")
    assert code == 0, err
    table = md.split("was lost")[1].split("\n\n")[1].splitlines()[2:]
    chunks = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in table}
    assert chunks["index"] == "0.5000" and chunks["reach"] == "1", chunks
