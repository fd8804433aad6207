"""`pgeval tune` on the Cranfield demo collection (evaluator/demo/data: the demo's table,
indexes and settings; tests/tune_kb.py), on the real server:

- its figures for a configuration equal those of `run pipeline` run with the same options (to
  1e-9; judged@10 a count by hand), and tune itself searches nothing again (no new run of a
  retrieval stage, no reranker called);
- its in-sample figures, folds, per-fold choices and held-out gain equal a reference computed
  here: RRF by hand from the stored HNSW and BM25 lists, the measures by
  tests/reference_metrics.py, the cross-validation with numpy;
- a skewed start (BM25 weight 0.01) gets a change whose held-out gain is significant; the demo's
  own configuration gets "keep the current configuration";
- bad grids: one line, exit 1."""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference_metrics import per_query
from tune_kb import build, cli, ok, pipeline

MEASURES = ("ndcg@10", "recall@10", "mrr@20")


@pytest.fixture(scope="module")
def kb(database, tmp_path_factory):
    """The experiment (merge rrf k=60, rerank top_n=30), a pipeline with rerank top_n=10 and
    one with a skewed merge (k=20, BM25 weight 0.01, input depths 10 and 40)."""
    build(database, tmp_path_factory.mktemp("cran"))
    paths = "hnsw,bm25,merge,rerank"  # exact search plays no part here
    pipeline("cran-top10", "--opt", "rerank:top_n=10", stages=paths)
    pipeline(
        "cran-skew",
        "--opt", "merge:k=20", "--opt", "merge:weights=hnsw:1,bm25:0.01",
        "--opt", "merge:input_depth=hnsw:10,bm25:40", stages=paths,
    )  # fmt: skip
    return database


def tune_json(*args: str) -> dict:
    return json.loads(ok("tune", *args, "--json"))


def lists(conn, run: str) -> dict[str, list[str]]:
    rows = conn.execute(
        "SELECT x.query_id, x.chunk_id FROM pgeval.result x JOIN pgeval.run r USING (run_id) "
        "WHERE r.name = %s ORDER BY x.query_id, x.rank",
        (run,),
    ).fetchall()
    out: dict[str, list[str]] = {}
    for q, c in rows:
        out.setdefault(q, []).append(c)
    return out


def qrels(conn) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for q, c, g in conn.execute("SELECT query_id, chunk_id, grade FROM pgeval.qrel"):
        out.setdefault(q, {})[c] = g
    return out


def hand_figures(ranked: dict[str, list[str]], judged: dict[str, dict[str, int]]) -> dict:
    """Means over valid queries of MEASURES and judged@10 (judged chunks in the top 10 / 10)."""
    valid = [q for q, g in judged.items() if any(v >= 1 for v in g.values())]
    out = {
        m: np.mean([per_query(ranked.get(q, []), judged[q], m) for q in valid]) for m in MEASURES
    }
    out["judged@10"] = np.mean(
        [sum(c in judged[q] for c in ranked.get(q, [])[:10]) / 10 for q in valid]
    )
    return out


def test_figures_are_those_of_run_pipeline_with_the_same_options(kb, conn):
    before = conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0]
    merge = tune_json(
        "cran-exp", "--stage", "merge", "--grid", "merge:k=20", "--grid",
        "merge:weights=[hnsw:1,bm25:0.01]", "--grid", "merge:input_depth=[10,40]", "--no-store",
    )  # fmt: skip
    rerank = tune_json("cran-exp", "--stage", "rerank", "--grid", "rerank:top_n=10", "--no-store")
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == before  # no search
    judged = qrels(conn)
    for got, run in (
        (merge["configs"][1], "cran-skew.merge.1"),
        (rerank["configs"][1], "cran-top10.rerank.1"),
    ):
        want = hand_figures(lists(conn, run), judged)
        sql = dict(conn.execute(
            "SELECT measure, value FROM pgeval.summary((SELECT run_id FROM pgeval.run WHERE "
            "name = %s), %s)", (run, list(MEASURES)),
        ).fetchall())  # fmt: skip
        for m in MEASURES:
            assert got["in_sample"][m] == pytest.approx(sql[m], abs=1e-9), (run, m)
            assert got["in_sample"][m] == pytest.approx(want[m], abs=1e-9), (run, m)
        assert got["in_sample"]["judged@10"] == pytest.approx(want["judged@10"], abs=1e-12)
    assert merge["configs"][1]["options"]["input_depth"] == {"hnsw": 10, "bm25": 40}
    # the current configuration comes first, with the figures of the experiment's own run
    own = hand_figures(lists(conn, "cran-exp.merge.1"), judged)
    assert merge["configs"][0]["in_sample"]["ndcg@10"] == pytest.approx(own["ndcg@10"], abs=1e-9)


def _rrf(paths: list[dict[str, list[str]]], k: float, weights: list[float]) -> dict[str, list[str]]:
    out = {}
    for q in set().union(*paths):
        score: dict[str, float] = {}
        for w, path in zip(weights, paths, strict=True):
            for rank, c in enumerate(path.get(q, []), 1):
                score[c] = score.get(c, 0.0) + w / (k + rank)
        rounded = {c: float(f"{s:.11e}") for c, s in score.items()}  # 12 significant digits
        out[q] = sorted(rounded, key=lambda c: (-rounded[c], c.encode()))
    return out


def test_folds_and_held_out_gain_equal_a_reference_by_hand(kb, conn):
    ks, weights, folds, seed = [60.0, 1.0, 200.0], [[1.0, 1.0], [1.0, 0.3]], 4, 7
    got = tune_json(
        "cran-exp", "--stage", "merge", "--grid", "merge:k=60,1,200", "--grid",
        "merge:weights=[1,1],[1,0.3]", "--folds", str(folds), "--seed", str(seed), "--no-store",
    )  # fmt: skip
    paths = [lists(conn, "cran-exp.hnsw.1"), lists(conn, "cran-exp.bm25.1")]
    judged = qrels(conn)
    valid = sorted(
        (q for q, g in judged.items() if any(v >= 1 for v in g.values())), key=str.encode
    )
    configs = [(k, w) for k in ks for w in weights]
    assert [
        (c["options"]["k"], list(c["options"]["weights"].values())) for c in got["configs"]
    ] == configs
    fused = [_rrf(paths, k, w) for k, w in configs]
    values = np.array(
        [[per_query(f.get(q, []), judged[q], "ndcg@10") for q in valid] for f in fused]
    )
    means = [c["in_sample"]["ndcg@10"] for c in got["configs"]]
    assert means == pytest.approx(values.mean(axis=1), abs=1e-9)
    order = np.random.default_rng(seed).permutation(len(valid))
    parts = np.array_split(order, folds)
    assert [sorted(f, key=str.encode) for f in got["held_out"]["folds"]] == [
        sorted((valid[i] for i in p), key=str.encode) for p in parts
    ]
    held = np.empty(len(valid))
    chosen = []
    for p in parts:
        train = np.setdiff1d(np.arange(len(valid)), p)
        m = values[:, train].mean(axis=1)
        chosen.append(int(np.argmax(m)))  # the first of equal means: the current one first
        held[p] = values[chosen[-1], p]
    assert got["held_out"]["chosen"] == chosen
    assert got["held_out"]["gain"] == pytest.approx((held - values[0]).mean(), abs=1e-12)
    low, high = got["held_out"]["interval"]
    assert low <= got["held_out"]["gain"] <= high and 0 < got["held_out"]["p"] <= 1


def test_a_skewed_merge_gets_a_significant_change_and_the_demos_is_kept(kb, conn):
    skew = tune_json("cran-skew", "--stage", "merge", "--grid", "merge:weights=[1,0.01],[1,1]")
    rec, held = skew["recommendation"], skew["held_out"]
    assert rec["keep"] is False and held["significant"] and held["p"] < 0.05 and held["gain"] > 0
    assert rec["options"]["weights"] == {"hnsw": 1.0, "bm25": 1.0}, rec
    assert held["interval"][0] > 0 and "significant at 0.05" in rec["why"]
    # the pick is a run that metrics and compare read
    code, out, err = cli(
        "compare", "cran-skew.merge.1", "cran-skew.merge.tuned", "--format", "json"
    )
    assert code == 0, err
    # compared with more runs, a pair with the in-sample pick carries the note (compare_many)
    code, out, err = cli(
        "compare", "cran-skew.merge.1", "cran-skew.merge.tuned", "cran-skew.hnsw.1",
        "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    noted = [p for p in json.loads(out)["pairs"] if p.get("in_sample")]
    assert len(noted) == 2 and "picked in-sample" in err, (out, err)
    tuned = conn.execute(
        "SELECT params->'tuned'->>'recommended', params->'weights' FROM pgeval.run "
        "WHERE name = 'cran-skew.merge.tuned'"
    ).fetchone()
    assert tuned[0] == "true" and tuned[1] == rec["options"]["weights"]
    demo = tune_json(
        "cran-exp", "--stage", "merge", "--grid", "merge:k=10,60,100",
        "--grid", "merge:weights=[1,0.5],[1,1],[1,2]",
    )  # fmt: skip
    assert demo["recommendation"]["keep"] is True and not demo["held_out"]["significant"]
    assert demo["recommendation"]["options"] == demo["current"]
    text = ok("tune", "cran-exp", "--stage", "merge", "--grid", "merge:k=10,60", "--no-store")
    assert "keep the current configuration" in text and "held out (5-fold" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--grid", "merge:alpha=1"],
            "unknown key 'alpha' for a merge stage (method, k, weights, input_depth, depth)",
        ),
        (["--grid", "merge:weights=[1,0.5"], "cannot read the values"),
        (
            ["--grid", "merge:weights=[1,0.5,2]"],
            "weights=[1,0.5,2]: weights '1,0.5,2': give NAME:W",
        ),
        (["--grid", "merge:k=-1"], "k=-1: must be >= 0"),
        (["--grid", "merge:k=1,"], "an empty value"),
        (["--grid", "merge:method=mean"], "one of rrf, minmax, zscore"),
        (["--grid", "rerank:top_n=5"], "names stage 'rerank', but --stage is 'merge'"),
        (["--grid", "merge-k=1"], "expected STAGE:KEY=V1,V2"),
    ],
)
def test_bad_grid_one_line(kb, args, message):
    code, out, err = cli("tune", "cran-exp", "--stage", "merge", *args)
    assert code == 1 and message in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_bad_stage_and_top_n_one_line(kb):
    code, _, err = cli("tune", "cran-exp", "--stage", "rerank", "--grid", "rerank:top_n=10,40")
    assert code == 1 and "scored the top 30 of its input" in err and len(err.splitlines()) == 1
    code, _, err = cli("tune", "cran-exp", "--stage", "hnsw")
    assert code == 1 and "is a hnsw stage: tune tunes a merge or a rerank" in err
    code, _, err = cli("tune", "cran-exp", "--stage", "fuse")
    assert code == 1 and "has no stage 'fuse'" in err and "merge" in err
    code, _, err = cli("tune", "nope", "--stage", "merge")
    assert code == 1 and "no experiment named 'nope'" in err
