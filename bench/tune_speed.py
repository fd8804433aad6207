"""Benchmark: `pgeval tune` on the Cranfield demo collection (tests/tune_kb.py: the demo's table,
HNSW at ef_search=10 and BM25, merge rrf k=60), measured in the same run against

  (a) the SQL floor: one configuration as one statement on one connection, `pgeval.fuse_rrf`
      plus the metric (the per-configuration statement of evaluator/run/tune/evaluate.py), and
      `fuse_rrf` alone -> configurations per minute and the ratio tune / floor
      (target: at least 1,000 merge configurations a minute on 2 cores);
  (b) ranx's `optimize_fusion` (RRF, k 10..100 step 10, nDCG@10 with 2^g - 1 gains:
      ranx's ndcg_burges, pgeval's ndcg) on the same stored HNSW and BM25 lists: its in-sample
      pick and gain, and its rule applied on pgeval's folds (the held-out gain of its choice,
      which ranx does not report), beside pgeval's held-out gain.

Usage: python bench/tune_speed.py [--configs 200] [--jobs 2] [--dsn DSN]
Uses a temporary embedded server (or --dsn).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import _server  # noqa: E402

warnings.filterwarnings("ignore")

KS = list(range(10, 101, 10))  # ranx optimize_rrf's default trials


def _grid(n: int) -> list[str]:
    """About ``n`` RRF configurations: k by the BM25 weight."""
    ks = [1, 2, 5, 10, 15, 20, 30, 40, 50, 60, 80, 100, 150, 200, 300, 500]
    weights = max(1, n // len(ks))
    ws = [round(0.25 + i * (2.75 / max(1, weights - 1)), 4) for i in range(weights)]
    return [
        "merge:k=" + ",".join(str(k) for k in ks),
        "merge:weights=" + ",".join(f"[1,{w}]" for w in ws),
    ]


def speed(db, experiment: str, n: int, jobs: int) -> None:
    from evaluator.run.tune import evaluate, stage_lists
    from evaluator.run.tune.tune import tune

    t = time.perf_counter()
    result = tune(db, experiment, "merge", _grid(n), jobs=jobs, store=False)
    total = time.perf_counter() - t
    configs = len(result.configs)
    with db.connect(read_only=True) as conn:
        lists = stage_lists.read(conn, experiment, "merge")
        conn.rollback()
    one = [result.configs[i % configs] for i in range(20)]
    t = time.perf_counter()
    evaluate.measure(db, lists, one, ["ndcg@10"], jobs=1)
    floor = (time.perf_counter() - t) / len(one)
    with db.connect(read_only=True) as conn:
        t = time.perf_counter()
        for options in one:
            source, bound = lists.source(options)
            conn.execute(f"SELECT count(*) FROM {source}", bound).fetchone()
        fuse_only = (time.perf_counter() - t) / len(one)
        conn.rollback()
    per_min = configs / total * 60
    print(f"tune: {configs} merge configurations in {total:.1f} s ({jobs} connections, with the "
          f"cross-validation): {per_min:,.0f} a minute "
          f"({'meets' if per_min >= 1000 else 'below'} the 1,000 target)")  # fmt: skip
    print(f"SQL floor, one statement (fuse_rrf + metric) a configuration on one connection: "
          f"{floor * 1000:.1f} ms = {60 / floor:,.0f} a minute; fuse_rrf alone {fuse_only * 1000:.1f} ms")  # fmt: skip
    print(f"ratio tune / floor (configurations a minute): {per_min / (60 / floor):.2f}")


def _ranx_inputs(db, experiment: str):
    from ranx import Qrels, Run

    with db.connect(read_only=True) as conn:
        rows = conn.execute(
            "SELECT r.stage, x.query_id, x.chunk_id, x.score, r.params->>'score' FROM pgeval.result x "
            "JOIN pgeval.run r USING (run_id) JOIN pgeval.experiment e USING (experiment_id) "
            "WHERE e.name = %s AND r.stage IN ('hnsw', 'bm25') AND r.repetition = 1",
            (experiment,),
        ).fetchall()
        judged = conn.execute(
            "SELECT query_id, chunk_id, grade FROM pgeval.qrel WHERE grade > 0"
        ).fetchall()
        conn.rollback()
    qrels: dict = {}
    for q, c, g in judged:
        qrels.setdefault(q, {})[c] = int(g)
    runs: dict = {"hnsw": {}, "bm25": {}}
    for stage, q, c, s, kind in rows:
        if q in qrels:
            runs[stage].setdefault(q, {})[c] = -s if kind == "distance" else s
    for run in runs.values():  # ranx wants every query in every run
        for q in qrels:
            run.setdefault(q, {"__none__": 0.0})
    return Qrels(qrels), [Run(runs["hnsw"]), Run(runs["bm25"])], sorted(qrels, key=str.encode)


def versus_ranx(db, experiment: str) -> None:
    try:
        from ranx import evaluate, fuse, optimize_fusion
    except ImportError:
        print("ranx is not installed: pip install ranx (the comparison is skipped)")
        return
    import numpy as np

    from evaluator.measure import stats
    from evaluator.run.tune.tune import tune

    qrels, runs, queries = _ranx_inputs(db, experiment)
    grid = ["merge:k=" + ",".join(map(str, KS))]
    got = tune(db, experiment, "merge", grid, store=False).as_dict()
    t = time.perf_counter()
    best_k = optimize_fusion(qrels, runs, norm=None, method="rrf", metric="ndcg_burges@10",
                             show_progress=False)["k"]  # fmt: skip
    ranx_s = time.perf_counter() - t

    fused = {k: fuse(runs, norm=None, method="rrf", params={"k": k}) for k in [*KS, 60]}
    order = {q: i for i, q in enumerate(sorted(qrels.keys()))}
    at = [order[q] for q in queries]  # ranx's per-query values, in pgeval's query order
    scores = {
        k: np.asarray(evaluate(qrels, run, "ndcg_burges@10", return_mean=False))[at]
        for k, run in fused.items()
    }
    base = scores[60]

    def ranx_pick(rows: np.ndarray) -> int:  # optimize_rrf's rule: the last k of the best score
        best = max(scores[k][rows].mean() for k in KS)
        return [k for k in KS if scores[k][rows].mean() >= best][-1]

    everything = np.arange(len(queries))
    assert ranx_pick(everything) == best_k, (ranx_pick(everything), best_k)
    mine = max(range(len(got["configs"])), key=lambda i: got["configs"][i]["in_sample"]["ndcg@10"])
    gain_mine = (
        got["configs"][mine]["in_sample"]["ndcg@10"] - got["configs"][0]["in_sample"]["ndcg@10"]
    )
    print(f"in sample (RRF k {KS[0]}..{KS[-1]}): pgeval picks k={got['configs'][mine]['options']['k']:g} "
          f"({gain_mine:+.4f} nDCG@10 over k=60); ranx optimize_fusion picks k={best_k} "
          f"({scores[best_k].mean() - base.mean():+.4f}) in {ranx_s:.1f} s")  # fmt: skip
    held = np.empty(len(queries))
    position = {q: i for i, q in enumerate(queries)}
    for fold in got["held_out"]["folds"]:
        rows = np.array([position[q] for q in fold])
        k = ranx_pick(np.setdiff1d(everything, rows))
        held[rows] = scores[k][rows]
    r = stats.paired(base, held)
    h = got["held_out"]
    print(f"held out (pgeval's {len(h['folds'])} folds): pgeval {h['gain']:+.4f} (p = {h['p']:.3f}); "
          f"ranx's rule chosen on the other folds {r.delta:+.4f} (p = {r.p_value:.3f}); "
          "ranx itself reports no held-out figure")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--configs", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    db, tmp, stop = _server.start(args.dsn, "pgeval-bench-tune-")
    try:
        from tune_kb import build

        t = time.perf_counter()
        experiment = build(db, tmp)
        print(f"the Cranfield experiment built in {time.perf_counter() - t:.1f} s")
        speed(db, experiment, args.configs, args.jobs)
        versus_ranx(db, experiment)
    finally:
        stop()


if __name__ == "__main__":
    main()
