"""Fusion in SQL (pgeval.fuse_rrf, pgeval.fuse_scores) with hand-computed values, and the merge
stage: inputs, weights, depth, one entry per chunk, recorded parameters, errors."""

from __future__ import annotations

import math

import psycopg
import pytest
from helpers import make_run, make_testset
from helpers_stage import make_experiment, prepare_and_run, stage_ctx, stage_run, stored

from evaluator.core.errors import InputError
from evaluator.stages.merge import MergeStage, parse_weights


@pytest.fixture
def two_paths(clean, conn):
    make_testset(conn, "fu", {"q": {"c": 1}, "r": {"x": 1}})
    make_experiment(conn, "fx", "fu", ["exact", "hnsw", "bm25", "merge"])
    runs = {
        "exact": stage_run(
            conn,
            "fx",
            "exact",
            {"q": [("a", 0.1), ("e", 0.2)], "r": [("x", 0.1)]},
            testset="fu",
            depth=3,
        ),
        "hnsw": stage_run(
            conn,
            "fx",
            "hnsw",
            {"q": [("a", 0.1), ("b", 0.3), ("c", 0.5)], "r": [("y", 0.2)]},
            testset="fu",
            depth=3,
        ),
        "bm25": stage_run(
            conn, "fx", "bm25", {"q": [("c", 10.0), ("d", 4.0)]}, testset="fu", depth=3
        ),
    }
    return runs


def fuse(conn, fn, *args):
    rows = conn.execute(f"SELECT query_id, rank, chunk_id, score FROM pgeval.{fn}", args).fetchall()
    return {q: [(c, s) for qq, _, c, s in rows if qq == q] for q in {r[0] for r in rows}}


def test_rrf_by_hand(conn, two_paths):
    a, b = two_paths["hnsw"], two_paths["bm25"]
    got = fuse(conn, "fuse_rrf(%s)", [a, b])
    assert [c for c, _ in got["q"]] == ["c", "a", "b", "d"]  # b and d tie: chunk id order
    assert dict(got["q"]) == {
        "c": pytest.approx(1 / 63 + 1 / 61),
        "a": pytest.approx(1 / 61),
        "b": pytest.approx(1 / 62),
        "d": pytest.approx(1 / 62),
    }
    assert got["r"] == [("y", pytest.approx(1 / 61))]
    weighted = fuse(conn, "fuse_rrf(%s, %s, %s, %s)", [a, b], [1.0, 2.0], 10.0, 3)
    assert weighted["q"] == [
        ("c", pytest.approx(1 / 13 + 2 / 11)),
        ("d", pytest.approx(2 / 12)),
        ("a", pytest.approx(1 / 11)),
    ]  # cut at depth 3
    # per-input depths (merge:input_depth): hnsw cut at its top 1, bm25 whole
    cut = fuse(conn, "fuse_rrf(%s, NULL, 60, NULL, NULL, %s)", [a, b], [1, None])
    assert cut["q"] == [
        ("a", pytest.approx(1 / 61)),
        ("c", pytest.approx(1 / 61)),  # a tie with a: chunk id order
        ("d", pytest.approx(1 / 62)),
    ]
    assert fuse(conn, "fuse_rrf(%s, NULL, 60, NULL, 1)", [a, b])["q"] == cut["q"][:2]


def test_minmax_by_hand(conn, two_paths):
    got = fuse(conn, "fuse_scores(%s, NULL, 'minmax')", [two_paths["hnsw"], two_paths["bm25"]])
    # hnsw distances 0.1, 0.3, 0.5 -> 1, 0.5, 0; bm25 10, 4 -> 1, 0; a and c tie at 1
    assert got["q"] == [("a", 1.0), ("c", 1.0), ("b", 0.5), ("d", 0.0)]
    assert got["r"] == [("y", 1.0)]  # a single value: 1


def test_zscore_by_hand(conn, two_paths):
    got = dict(
        fuse(
            conn,
            "fuse_scores(%s, %s, 'zscore')",
            [two_paths["hnsw"], two_paths["bm25"]],
            [1.0, 1.0],
        )["q"]
    )
    z = 0.2 / math.sqrt(0.08 / 3)  # |z| of 0.1 and 0.5 around 0.3
    # a missing from bm25 and d from hnsw take that path's lowest z-score
    assert got == {
        "a": pytest.approx(z - 1),
        "b": pytest.approx(-1.0),
        "c": pytest.approx(-z + 1),
        "d": pytest.approx(-z - 1),
    }


def test_fusion_errors(conn, two_paths):
    runs = [two_paths["hnsw"], two_paths["bm25"]]
    for call, args, msg in (
        ("fuse_rrf(%s, %s)", (runs, [1.0]), "1 weights for 2 input runs"),
        ("fuse_rrf(%s, %s)", (runs, [1.0, -1.0]), "weights must be >= 0"),
        ("fuse_rrf(%s, NULL, %s)", (runs, -1.0), "k must be >= 0"),
        ("fuse_scores(%s, NULL, %s)", (runs, "mean"), 'unknown fusion method "mean"'),
        ("fuse_rrf(%s)", ([999999],), "no run with id 999999"),
        ("fuse_rrf(%s, NULL, 60, NULL, NULL, %s)", (runs, [5]), "1 input depths for 2 input"),
        ("fuse_scores(%s, NULL, 'minmax', NULL, NULL, %s)", (runs, [5, 0]), "input depth must"),
    ):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=msg):
            conn.execute(f"SELECT * FROM pgeval.{call}", args).fetchall()
    conn.execute(
        "UPDATE pgeval.result_list SET scores = array_fill(NULL::float8, "
        "ARRAY[cardinality(scores)]) WHERE run_id = %s",
        (runs[1],),
    )
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="without a score"):
        conn.execute("SELECT * FROM pgeval.fuse_scores(%s)", (runs,)).fetchall()
    assert fuse(conn, "fuse_rrf(%s)", runs)["q"][0][0] == "c"  # rrf needs ranks only


def run_merge(database, conn, previous, options=None, depth=10):
    ctx = stage_ctx(
        database,
        conn,
        testset="fu",
        experiment="fx",
        stage="merge",
        depth=depth,
        options=options,
        previous=previous,
    )
    run_id = prepare_and_run(MergeStage(), ctx, "fx.merge.1")
    return run_id, ctx.warnings


def test_merge_stage_default_inputs_skip_exact(database, conn, two_paths):
    run_id, _ = run_merge(database, conn, two_paths)  # exact, hnsw, bm25 in that order
    params, depth, status = conn.execute(
        "SELECT params, depth, status FROM pgeval.run WHERE run_id = %s", (run_id,)
    ).fetchone()
    assert params["inputs"] == ["hnsw", "bm25"] and params["method"] == "rrf"
    assert params["k"] == 60 and params["weights"] == {"hnsw": 1.0, "bm25": 1.0}
    assert depth == 10 and status == "complete" and params["rows"] == 5
    got = stored(conn, run_id)
    assert got["q"] == fuse(conn, "fuse_rrf(%s)", [two_paths["hnsw"], two_paths["bm25"]])["q"]
    assert "e" not in dict(got["q"])  # the exact stage is not fused
    # the loss attribution reads the merge's inputs: e is exact-only, so "index"
    conn.execute(
        "INSERT INTO pgeval.qrel SELECT testset_id, 'q', 'e', 1 FROM pgeval.testset "
        "WHERE name = 'fu'"
    )
    cats = dict(
        conn.execute(
            "SELECT chunk_id, category FROM pgeval.loss_attribution("
            "(SELECT experiment_id FROM pgeval.experiment WHERE name = 'fx'), 1)"
            " WHERE query_id = 'q'"
        ).fetchall()
    )
    assert cats == {"e": "index"}  # c is kept (rank 1)


def test_merge_stage_options(database, conn, two_paths):
    run_id, warnings = run_merge(
        database, conn, two_paths, {"inputs": "bm25", "method": "minmax", "depth": "1"}
    )
    params = conn.execute("SELECT params FROM pgeval.run WHERE run_id = %s", (run_id,)).fetchone()[
        0
    ]
    assert params["inputs"] == ["bm25"] and params["method"] == "minmax" and "k" not in params
    assert stored(conn, run_id) == {"q": [("c", 1.0)]}
    assert any("single input" in w for w in warnings)
    conn.execute("DELETE FROM pgeval.run WHERE run_id = %s", (run_id,))
    run_id, _ = run_merge(database, conn, two_paths, {"weights": "hnsw:0,bm25:1", "k": "0"})
    assert [c for c, _ in stored(conn, run_id)["q"]] == ["c", "d", "a", "b"]


def test_parse_weights():
    assert parse_weights("0.5,2", ["a", "b"]) == {"a": 0.5, "b": 2.0}
    assert parse_weights("b:3", ["a", "b"]) == {"a": 1.0, "b": 3.0}
    for spec, msg in (
        ("1", "2 numbers"),
        ("c:1", "not an input"),
        ("a:x,b:1", "not a number"),
        ("a:-1,b:1", ">= 0"),
        ("a:1,2", "NAME:W"),
    ):
        with pytest.raises(InputError, match=msg):
            parse_weights(spec, ["a", "b"])


def test_merge_stage_errors(database, conn, two_paths):
    with pytest.raises(InputError, match="not an earlier stage"):
        run_merge(database, conn, two_paths, {"inputs": "hnsw,rerank"})
    with pytest.raises(InputError, match="method='mean'"):
        run_merge(database, conn, two_paths, {"method": "mean"})
    with pytest.raises(InputError, match="nothing to fuse"):
        run_merge(database, conn, {})
    assert conn.execute("SELECT count(*) FROM pgeval.run WHERE stage = 'merge'").fetchone()[0] == 0


def _at(rank_of: dict[str, int], length: int, filler: str) -> list[str]:
    """A ranked list of ``length`` chunks with the given chunks at the given ranks (1-based)."""
    out = [f"{filler}{i}" for i in range(1, length + 1)]
    for chunk, rank in rank_of.items():
        out[rank - 1] = chunk
    return out


def test_rrf_sums_equal_in_exact_arithmetic_tie_by_chunk_id(clean, conn):
    """Two chunks whose RRF scores are 1/45 by different sums (k = 60): 1396 at ranks 60, 84, 84
    and 602 at 75, 75, 75. In float8 the first sum is 0.02222222222222222 and the second
    0.022222222222222223, which put 602 first; the fused scores are equal and the chunk id
    (byte order: '1396' < '602') decides."""
    assert 1 / 120 + 1 / 144 + 1 / 144 < 1 / 135 + 1 / 135 + 1 / 135  # the float8 rounding
    make_testset(conn, "ties45", {"q": {"602": 1}})
    ranks = [{"1396": 60, "602": 75}, {"1396": 84, "602": 75}, {"1396": 84, "602": 75}]
    runs = [
        make_run(conn, f"in{i}", "ties45", {"q": _at(r, 100, f"f{i}-")})
        for i, r in enumerate(ranks)
    ]
    for order in (runs, runs[::-1], [runs[1], runs[0], runs[2]]):
        got = fuse(conn, "fuse_rrf(%s)", order)["q"]
        ids = [c for c, _ in got]
        i = ids.index("1396")
        assert ids[i + 1] == "602", ids[i - 2 : i + 3]
        assert got[i][1] == got[i + 1][1] == pytest.approx(1 / 45, rel=1e-12)
        assert got[i][1] == float(f"{1 / 45:.12g}")  # the score at 12 significant digits


def test_score_fusion_sums_equal_in_exact_arithmetic_tie_by_chunk_id(clean, conn):
    """minmax: b gets 0.1 + 0.2 and a 0.3 + 0 (0.30000000000000004 and 0.3 in float8): equal."""
    make_testset(conn, "tiesmm", {"q": {"a": 1}})
    sim = {"score": "similarity"}
    one = make_run(
        conn, "mm1", "tiesmm", {"q": [("z", 10.0), ("a", 3.0), ("b", 1.0), ("y", 0.0)]}, params=sim
    )
    two = make_run(conn, "mm2", "tiesmm", {"q": [("x", 10.0), ("b", 2.0), ("a", 0.0)]}, params=sim)
    assert 0.1 + 0.2 != 0.3
    got = fuse(conn, "fuse_scores(%s, NULL, 'minmax')", [one, two])["q"]
    assert [c for c, _ in got] == ["x", "z", "a", "b", "y"]
    assert dict(got)["a"] == dict(got)["b"] == 0.3
