"""Ceilings and headroom per stage (sql/125_stage_ceilings.sql, `pgeval stage-report`): the
oracle of each stage's candidates computed by hand with numpy, judged@K counted by hand, the
index against exact search and a higher setting, and the advice naming the largest headroom
where the largest loss bucket is another."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import make_testset
from helpers_stage import dist, make_experiment, stage_run

K = 2
GRADES = {
    "q1": {"a": 3, "b": 1, "c": 1, "d": 1, "e": 1, "z": 0},
    "q2": {"f": 2, "g": 0},
    "q3": {},  # unanswerable: no list of it counts
}
LISTS = {
    "exact": {"q1": ["a", "z", "b"], "q2": ["f", "g", "u"]},
    "hnsw": {"q1": ["z", "a", "u"], "q2": ["g", "u", "v"]},
    "hnsw_hi": {"q1": ["a", "z", "u"], "q2": ["g", "u", "v"]},
    "bm25": {"q1": ["w", "b"], "q2": ["u"]},
    # the final merge: a and b are there, below chunks nobody judged
    "merge": {"q1": ["w", "u", "a", "z", "b"], "q2": ["u", "g", "v", "f"]},
}


def _cli(*args: str) -> tuple[int, str, str]:
    """The CLI in-process, as the ``pgeval`` fixture runs it (that one is function-scoped)."""
    from click.testing import CliRunner

    from evaluator.cli import main

    with CliRunner().isolation() as streams:
        code = main(list(args))
    return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()


@pytest.fixture(scope="module")
def runs(database):
    """exact, hnsw (ef_search 10), hnsw_hi (ef_search 40), bm25 (D = 3), merge of the hnsw
    stages and bm25 final. Loss at K = 2: q2's f found by exact search alone (index: 0.5
    points), q1's c, d, e beyond reach (0.3), a and b cut by the merge (fusion, 0.2): index is
    the largest bucket; the merge's ordering the largest headroom. Built once for the module,
    with every output the tests read: {name: (code, stdout, stderr)}."""
    with database.connect(autocommit=True) as conn:
        conn.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
        _build(conn)
    report = ("stage-report", "cx", "--k", str(K))
    metrics = ("metrics", "cx.merge.1", "--k", str(K))
    return {
        "json": _cli(*report, "--format", "json"),
        "judged_only": _cli(*report, "--format", "json", "--judged-only"),
        "table": _cli(*report),
        "metrics": _cli(*metrics, "--format", "json"),
        "metrics_judged_only": _cli(*metrics, "--judged-only", "--per-query"),
    }


def _build(conn) -> None:
    make_testset(conn, "ceil", GRADES, unanswerable=("q3",))
    make_experiment(conn, "cx", "ceil", ["exact", "hnsw", "hnsw_hi", "bm25", "merge"])
    for name, lists in LISTS.items():
        kind = "hnsw" if name.startswith("hnsw") else name
        params = {
            "exact": {"score": "distance"},
            "hnsw": {"score": "distance", "settings": {"hnsw.ef_search": "10"}},
            "hnsw_hi": {"score": "distance", "settings": {"hnsw.ef_search": "40"}},
            "bm25": {"score": "similarity"},
            "merge": {"score": "similarity", "inputs": ["hnsw", "bm25"]},
        }[name]
        rid = stage_run(
            conn,
            "cx",
            name,
            {q: dist(c) if kind in ("exact", "hnsw") else c for q, c in lists.items()},
            testset="ceil",
            depth=5 if name == "merge" else 3,
            params=params,
        )
        conn.execute("UPDATE pgeval.run SET stage = %s WHERE run_id = %s", (kind, rid))


def _dcg(grades) -> float:
    g = np.asarray(grades, dtype=float)
    return float(np.sum((2.0**g - 1) / np.log2(np.arange(2, len(g) + 2))))


def _oracle(ranked: list[str], judged: dict[str, int], k: int) -> tuple[float, float]:
    """(recall@k, nDCG@k) of ``ranked`` sorted by its judgements: numpy, by hand."""
    relevant = [g for g in judged.values() if g >= 1]
    best = -np.sort(-np.array([judged.get(c, 0) for c in ranked]))[:k]
    ideal = -np.sort(-np.array(relevant))[:k]
    return float(np.sum(best >= 1)) / len(relevant), _dcg(best) / _dcg(ideal)


def _actual(ranked: list[str], judged: dict[str, int], k: int) -> tuple[float, float]:
    relevant = [g for g in judged.values() if g >= 1]
    top = np.array([judged.get(c, 0) for c in ranked[:k]])
    ideal = -np.sort(-np.array(relevant))[:k]
    return float(np.sum(top >= 1)) / len(relevant), _dcg(top) / _dcg(ideal)


def _means(fn, lists: dict[str, list[str]]) -> tuple[float, float]:
    valid = [q for q, g in GRADES.items() if any(v >= 1 for v in g.values())]
    values = np.array([fn(lists.get(q, []), GRADES[q], K) for q in valid])
    return tuple(values.mean(axis=0))  # type: ignore[return-value]


def report(runs, name: str = "json") -> tuple[dict, str]:
    code, out, err = runs[name]
    assert code == 0, err
    return json.loads(out), err


def test_ceilings_are_the_oracle_of_each_stage_by_hand(runs):
    rep, _ = report(runs)
    by = {s["stage"]: s for s in rep["stages"]}
    for name, lists in LISTS.items():
        recall, ndcg = _means(_oracle, lists)
        ceiling = by[name]["ceiling"]
        assert ceiling[f"recall@{K}"]["ceiling"] == pytest.approx(recall, abs=1e-12), name
        assert ceiling[f"ndcg@{K}"]["ceiling"] == pytest.approx(ndcg, abs=1e-12), name
        recall_now, ndcg_now = _means(_actual, lists)
        assert ceiling[f"ndcg@{K}"]["actual"] == pytest.approx(ndcg_now, abs=1e-12), name
        assert ceiling[f"ndcg@{K}"]["headroom"] == pytest.approx(ndcg - ndcg_now, abs=1e-12)
    # the merge's ceiling is high, its ranking poor: the headroom is in the ordering
    assert by["merge"]["ceiling"][f"ndcg@{K}"]["headroom"] > 0.5


def test_judged_at_k_per_stage_by_hand(runs):
    rep, _ = report(runs)
    by = {s["stage"]: s for s in rep["stages"]}
    valid = ["q1", "q2"]
    for name, lists in LISTS.items():
        by_hand = np.mean([sum(c in GRADES[q] for c in lists.get(q, [])[:K]) / K for q in valid])
        assert by[name]["metrics"][f"judged@{K}"]["mean"] == pytest.approx(by_hand), name
    # merge's top 2 holds nothing judged for q1 and one (g, grade 0) for q2: 0.25
    assert by["merge"]["metrics"][f"judged@{K}"]["mean"] == pytest.approx(0.25)


def test_index_against_exact_and_a_higher_setting(runs):
    rep, _ = report(runs)
    rows = {(r["kind"], r["stage"], r["against"]): r for r in rep["headroom"]}
    exact = _means(_actual, LISTS["exact"])
    hnsw = _means(_actual, LISTS["hnsw"])
    hi = _means(_actual, LISTS["hnsw_hi"])
    r = rows[("index", "hnsw", "exact")]
    assert r[f"ndcg@{K}"]["headroom"] == pytest.approx(exact[1] - hnsw[1])
    assert r[f"recall@{K}"]["headroom"] == pytest.approx(exact[0] - hnsw[0])
    r = rows[("index", "hnsw", "hnsw_hi")]  # ef_search 40 against 10
    assert r[f"ndcg@{K}"]["ceiling"] == pytest.approx(hi[1])
    assert r[f"ndcg@{K}"]["headroom"] == pytest.approx(hi[1] - hnsw[1])
    assert ("index", "hnsw_hi", "hnsw") not in rows  # a lower setting is no ceiling


def test_reach_is_the_pool_ordered_perfectly_by_hand(runs):
    """reach: the chain's lists (exact search aside) pooled and ordered by the judgements,
    against the final stage's candidates ordered so."""
    rep, _ = report(runs)
    (reach,) = [r for r in rep["headroom"] if r["kind"] == "reach"]
    paths = ("hnsw", "hnsw_hi", "bm25", "merge")
    pool = {q: sorted({c for p in paths for c in LISTS[p].get(q, [])}) for q in ("q1", "q2")}
    assert reach["against"] == "bm25 + hnsw + hnsw_hi + merge"
    for i, m in enumerate((f"recall@{K}", f"ndcg@{K}")):
        assert reach[m]["ceiling"] == pytest.approx(_means(_oracle, pool)[i], abs=1e-12)
        assert reach[m]["actual"] == pytest.approx(_means(_oracle, LISTS["merge"])[i], abs=1e-12)


def test_advice_names_the_largest_headroom_not_the_largest_loss(runs):
    rep, _ = report(runs)
    loss = {
        r["category"]: r["recall_points"]
        for r in rep["loss_attribution"]
        if r["category"] != "kept"
    }
    assert loss == pytest.approx({"index": 0.5, "reach": 0.3, "fusion": 0.2})
    heads = [r for r in rep["headroom"] if r["largest"]]
    assert [(r["kind"], r["stage"]) for r in heads] == [("reorder", "merge")]
    merge = _means(_oracle, LISTS["merge"])[1] - _means(_actual, LISTS["merge"])[1]
    others = [r[f"ndcg@{K}"]["headroom"] for r in rep["headroom"] if not r["largest"]]
    assert heads[0][f"ndcg@{K}"]["headroom"] == pytest.approx(merge)
    assert all(h < merge for h in others)
    assert "reorder" in rep["advice"] and "rerank" in rep["advice"]
    assert "merge" in rep["advice"]
    code, out, err = runs["table"]
    assert code == 0, err
    assert rep["advice"] in " ".join(out.split())
    assert "ceilings" in out


def test_judged_warning_and_judged_only(runs, conn):
    rep, err = report(runs)
    assert f"judged@{K}" in err and "lower bounds" in err  # the merge's top 2: 0.25 judged
    only, err2 = report(runs, "judged_only")
    assert "lower bounds" not in err2 and only["judged_only"] is True
    merge = {s["stage"]: s for s in only["stages"]}["merge"]
    run_id = conn.execute("SELECT run_id FROM pgeval.run WHERE name = 'cx.merge.1'").fetchone()[0]
    (value,) = conn.execute(
        "SELECT value FROM pgeval.summary(%s, %s, 1, true)", (run_id, [f"ndcg@{K}"])
    ).fetchone()
    # merge's lists without their unjudged chunks: q1 [a, z, b], q2 [g, f]
    judged = {"q1": ["a", "z", "b"], "q2": ["g", "f"]}
    assert value == pytest.approx(_means(_actual, judged)[1])
    assert merge["ceiling"][f"ndcg@{K}"]["actual"] == pytest.approx(value)
    # the ceiling does not move: the unjudged chunks add nothing to a perfect ordering
    assert merge["ceiling"][f"ndcg@{K}"]["ceiling"] == pytest.approx(1.0)


def test_metrics_shows_judged_at_k_and_warns(runs):
    """`pgeval metrics`: judged@K beside the measures asked for (K: the largest recall cut-off),
    the warning under 0.5, none with --judged-only (the lists hold judged chunks only)."""
    code, out, err = runs["metrics"]
    assert code == 0, err
    doc = json.loads(out)
    assert doc["summary"]["judged@2"] == pytest.approx(0.25) and doc["judged_only"] is False
    assert "judged@2 is 0.25 (< 0.5)" in err and "lower bounds" in err
    code, out, err = runs["metrics_judged_only"]
    assert code == 0, err
    assert "lower bounds" not in err and "judged@2" in out.splitlines()[1]
