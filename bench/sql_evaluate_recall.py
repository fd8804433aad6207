"""Benchmark: pgeval.evaluate_recall against the same statements in a bare PL/pgSQL loop (issue 38).

On a small table (--docs rows x --dim dimensions, seeded clustered vectors, an HNSW index), in
one session, measured in the same run, rounds alternated:

(a) ``SELECT * FROM pgeval.evaluate_recall(statement, queries, grid)`` over --queries queries and
    a 5-point grid of hnsw.ef_search: the statement checked, each query's exact twin and every
    point measured in a READ ONLY subtransaction, stored as a sweep (lists, timings, points,
    values filled by pgeval.index_recall), with its exact answer computed (the earlier
    evaluation deleted first, untimed) — and once more reusing it;
(b) a bare DO block: the same statements (EXECUTE ... USING, one per query for the exact search
    with index scans off, then one per query and point with SET LOCAL hnsw.ef_search), their
    rows aggregated into arrays, nothing checked, stored or scored.

Prints each round's times and ratio (a) / (b); the issue's target is <= 1.2.

Usage: python bench/sql_evaluate_recall.py [--docs 20000] [--dim 64] [--queries 300]
       [--rounds 3] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _server  # noqa: E402

TABLE = "bench_sqleval"
GRID = [10, 20, 40, 80, 160]


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dsn", default=None)
    return p.parse_args()


def build(db, docs: int, dim: int) -> None:
    rng = np.random.default_rng(7)
    centers = rng.normal(size=(50, dim))
    vecs = (centers[rng.integers(0, 50, docs)] + 0.4 * rng.normal(size=(docs, dim))).astype(
        np.float32
    )
    with db.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({dim}))")
        with c.cursor().copy(f"COPY {TABLE} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(vecs):
                cp.write_row((f"c{i}", "[" + ",".join(f"{x:.5f}" for x in v) + "]"))
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(f"CREATE INDEX ON {TABLE} USING hnsw (e vector_cosine_ops)")
        c.execute(f"ANALYZE {TABLE}")


STATEMENT = f"SELECT id, e <=> $1 AS distance FROM {TABLE} ORDER BY e <=> $1 LIMIT 10"


def queries_sql(n: int) -> str:
    return f"SELECT id AS query_id, e FROM {TABLE} ORDER BY id LIMIT {n}"


def evaluate(c, n: int) -> float:
    t0 = time.perf_counter()
    rows = c.execute(
        "SELECT * FROM pgeval.evaluate_recall(%s, %s, %s, name => 'bench-sqleval', "
        "replace => true)",
        (STATEMENT, queries_sql(n), json.dumps({"hnsw.ef_search": GRID, "enable_seqscan": "off"})),
    ).fetchall()
    dt = time.perf_counter() - t0
    assert len(rows) == len(GRID)
    return dt


BARE = """
DO $bench$
DECLARE
    qs vector[];
    q vector;
    ids text[];
    ds float8[];
    ef integer;
BEGIN
    SELECT array_agg(e ORDER BY id) INTO qs FROM (%(queries)s) s(id, e);
    PERFORM set_config('enable_indexscan', 'off', true);
    FOREACH q IN ARRAY qs LOOP
        EXECUTE 'SELECT array_agg(id), array_agg(distance) FROM (%(statement)s) s'
           INTO ids, ds USING q;
    END LOOP;
    PERFORM set_config('enable_indexscan', 'on', true);
    PERFORM set_config('enable_seqscan', 'off', true);
    FOREACH ef IN ARRAY ARRAY%(grid)s LOOP
        PERFORM set_config('hnsw.ef_search', ef::text, true);
        FOREACH q IN ARRAY qs LOOP
            EXECUTE 'SELECT array_agg(id), array_agg(distance) FROM (%(statement)s) s'
               INTO ids, ds USING q;
        END LOOP;
    END LOOP;
END
$bench$
"""


def bare(c, n: int) -> float:
    sql = BARE % {
        "queries": queries_sql(n).replace("id AS query_id", "id"),
        "statement": STATEMENT.replace("'", "''"),
        "grid": GRID,
    }
    t0 = time.perf_counter()
    with c.transaction():
        c.execute(sql)
    return time.perf_counter() - t0


def main() -> None:
    args = arguments()
    db, _tmp, stop = _server.start(args.dsn, "pgeval-bench-sqleval-")
    try:
        build(db, args.docs, args.dim)
        ratios, reused = [], []
        with db.connect(autocommit=True) as c:
            evaluate(c, args.queries)  # warm: the table and index in shared buffers
            bare(c, args.queries)
            for r in range(args.rounds):
                c.execute("DELETE FROM pgeval.experiment WHERE name LIKE 'bench-sqleval%'")
                c.execute("DELETE FROM pgeval.sweep WHERE name LIKE 'bench-sqleval%'")
                a = evaluate(c, args.queries)
                b = bare(c, args.queries)
                again = evaluate(c, args.queries)  # the exact answer reused
                ratios.append(a / b)
                reused.append(again / b)
                print(
                    f"round {r + 1}: evaluate_recall {a:.3f} s (exact computed), {again:.3f} s "
                    f"(exact reused); bare PL/pgSQL loop {b:.3f} s; ratio {a / b:.2f} "
                    f"({again / b:.2f} reused)"
                )
        print(
            f"{args.queries} queries x {len(GRID)} points on {args.docs} x {args.dim}: median "
            f"ratio {statistics.median(ratios):.2f} (target <= 1.2), "
            f"{statistics.median(reused):.2f} with the exact answer reused"
        )
    finally:
        stop()


if __name__ == "__main__":
    main()
