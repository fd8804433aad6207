"""Benchmark: `sweep --find hnsw.ef_search` against a fixed 8-point grid, same table, same run.

A table of --docs rows x --dim dimensions (seeded clustered vectors, HNSW m=8,
ef_construction=32) on a fresh embedded server (or --dsn); --queries rows sampled as queries;
target recall --target-recall. Both sweeps run with --fresh (neither reuses the other's points):

(a) the grid hnsw.ef_search = 10, 20, 40, 80, 120, 160, 240, 320 and its recommendation;
(b) --find hnsw.ef_search.

Printed: each answer (the find's must equal the grid's, or be smaller and still reach the
target, since the grid only knows its own values), the points each measured, their wall times
and the ratio (b)/(a), measured in the same run.

Usage: python bench/find.py [--docs 50000] [--dim 64] [--queries 200] [--target-recall 0.95]
       [--dsn DSN]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GRID = "hnsw.ef_search=10,20,40,80,120,160,240,320"


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=50000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--target-recall", type=float, default=0.95)
    p.add_argument("--dsn", default=None)
    return p.parse_args()


def table(db, docs: int, dim: int) -> None:
    from evaluator.core.vector_literal import vector_literal
    from evaluator.targets.targets import Target, save

    rng = np.random.default_rng(5)
    centers = rng.normal(size=(64, dim))
    vecs = centers[rng.integers(0, 64, docs)] + 0.7 * rng.normal(size=(docs, dim))
    with db.connect(results=False, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS find_bench")
        c.execute(f"CREATE TABLE find_bench (id text PRIMARY KEY, e vector({dim}))")
        with c.cursor().copy("COPY find_bench (id, e) FROM STDIN") as cp:
            for i, v in enumerate(vecs, 1):
                cp.write_row((f"c{i}", vector_literal(v)))
        c.execute("SET maintenance_work_mem = '512MB'")
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(
            "CREATE INDEX ON find_bench USING hnsw (e vector_cosine_ops) "
            "WITH (m = 8, ef_construction = 32)"
        )
        c.execute("ANALYZE find_bench")
    with db.connect(autocommit=True) as c:
        save(
            c,
            Target(
                name="find-bench",
                table="find_bench",
                id_column="id",
                vector_column="e",
                distance="cosine",
                dimension=dim,
                unique_id=True,
            ),
            replace=True,
        )


def main() -> None:
    import _server

    from evaluator.testset.query_source import QuerySource
    from evaluator.tuning.sweep import SweepConfig, run_sweep

    args = arguments()
    db, _, stop = _server.start(args.dsn, "pgeval-bench-find-")
    try:
        table(db, args.docs, args.dim)
        common = dict(
            testset=None,
            queries=QuerySource("sample", count=args.queries, seed=3),
            target="find-bench",
            stage="hnsw",
            settings={"enable_seqscan": "off"},
            repeat=1,
            target_recall=args.target_recall,
            fresh=True,
        )
        t0 = time.perf_counter()
        grid = run_sweep(db, SweepConfig(**common, params=(GRID,), name="find-bench-grid"))
        t_grid = time.perf_counter() - t0
        t0 = time.perf_counter()
        found = run_sweep(db, SweepConfig(**common, find="hnsw.ef_search", name="find-bench-find"))
        t_find = time.perf_counter() - t0
        rec = grid.recommendation
        answer = found.finds[0]
        print(
            f"table {args.docs} x {args.dim}, {args.queries} sampled queries, "
            f"target recall@10 {args.target_recall}"
        )
        print(
            f"(a) grid: {grid.measured} points measured in {t_grid:.1f} s; recommends "
            f"{rec['label'] if rec else 'nothing (no point reaches the target)'}"
        )
        print(
            f"(b) find: {found.measured} points measured in {t_find:.1f} s; "
            f"hnsw.ef_search={answer['value']} (recall {answer['recall']}); path "
            f"{answer['path']}"
        )
        print(f"ratio (b)/(a) wall time: {t_find / t_grid:.2f}")
        if rec and answer["reached"]:
            grid_value = int(rec["label"].split("=")[1])
            verdict = (
                "same answer"
                if answer["value"] == grid_value
                else "smaller answer, still reaching the target"
                if answer["value"] < grid_value
                else "LARGER ANSWER THAN THE GRID'S"
            )
            print(f"find against grid: {verdict} ({answer['value']} vs {grid_value})")
    finally:
        stop()


if __name__ == "__main__":
    main()
