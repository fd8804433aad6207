"""Benchmark: index designs on one table (issue "Index designs and tenants"): per design, its
build time, index size and the p95 at the least setting reaching the target recall, one table.

A table of --docs rows x --dim dimensions (seeded clustered vectors, the issue's 200,000 x 384
with ``--docs 200000 --dim 384``) on a fresh embedded server (or --dsn); --queries rows sampled
as queries. For each design in turn: its index built on the table (CREATE INDEX, timed here; m 16,
ef_construction 64; maintenance_work_mem --mwm), then ``sweep --find`` of its work setting to
--target-recall (hnsw, hnsw-halfvec: hnsw.ef_search; hnsw-bq: bq.candidates up to 400, with
hnsw.ef_search 400 so that the scan is not the limit), then the index dropped.

Also, for hnsw-bq: its timed statement (the sweep's p95 at the found setting) against the same
two-level statement run by hand in a bare psycopg loop over the same queries (prepared, READ ONLY,
SET LOCAL settings, rows fetched, nothing stored): the ratio (target <= 1.15), measured in the same
run. Latency ratios, not absolute times: this machine is shared.

Usage: python bench/designs.py [--docs 50000] [--dim 128] [--queries 200]
       [--target-recall 0.95] [--designs hnsw,hnsw-halfvec,hnsw-bq] [--mwm 1GB] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TABLE, TARGET = "designs_bench", "designs-bench"
FIND = {"hnsw": "hnsw.ef_search", "hnsw-halfvec": "hnsw.ef_search", "hnsw-bq": "bq.candidates"}
BQ_EF = 400  # hnsw-bq's scan: at least the candidates, else the index returns fewer
SETTINGS = {"hnsw-bq": {"hnsw.ef_search": str(BQ_EF)}}
FIND_MAX = {"hnsw-bq": BQ_EF}


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=50000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--target-recall", type=float, default=0.95)
    p.add_argument("--designs", default="hnsw,hnsw-halfvec,hnsw-bq")
    p.add_argument("--mwm", default="1GB", help="maintenance_work_mem for the builds")
    p.add_argument("--dsn", default=None)
    return p.parse_args()


def table(db, docs: int, dim: int) -> None:
    from evaluator.core.vector_literal import vector_literal
    from evaluator.targets.targets import Target, save

    rng = np.random.default_rng(11)
    centers = rng.normal(size=(64, dim))
    vecs = centers[rng.integers(0, 64, docs)] + 0.7 * rng.normal(size=(docs, dim))
    with db.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({dim}))")
        with c.cursor().copy(f"COPY {TABLE} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(vecs, 1):
                cp.write_row((f"c{i}", vector_literal(v)))
        c.execute(f"ANALYZE {TABLE}")
    with db.connect(autocommit=True) as c:
        save(
            c,
            Target(
                name=TARGET,
                table=TABLE,
                id_column="id",
                vector_column="e",
                dimension=dim,
                unique_id=True,
            ),
            replace=True,
        )


def ddl(design: str, dim: int) -> str:
    expr = {
        "hnsw": "e vector_cosine_ops",
        "hnsw-halfvec": f"(e::halfvec({dim})) halfvec_cosine_ops",
        "hnsw-bq": f"(binary_quantize(e)::bit({dim})) bit_hamming_ops",
    }[design]
    return (
        f"CREATE INDEX designs_bench_idx ON {TABLE} USING hnsw ({expr}) "
        "WITH (m = 16, ef_construction = 64)"
    )


def build(db, design: str, dim: int, mwm: str) -> tuple[float, int]:
    with db.connect(results=False, autocommit=True) as c:
        c.execute("DROP INDEX IF EXISTS designs_bench_idx")
        c.execute("SELECT set_config('maintenance_work_mem', %s, false)", (mwm,))
        c.execute("SET max_parallel_maintenance_workers = 0")
        t0 = time.perf_counter()
        c.execute(ddl(design, dim))
        took = time.perf_counter() - t0
        size = c.execute("SELECT pg_relation_size('designs_bench_idx')").fetchone()[0]
    return took, int(size)


def bare_bq_p95(db, dim: int, vectors: list, candidates: int, k: int = 10) -> float:
    """The README's two-level statement in a bare loop; p95 by nearest rank (ms)."""
    from pgvector.psycopg import register_vector

    from evaluator.core.percentile import nearest_rank

    stmt = (
        f"SELECT s.id, s.d FROM (SELECT id::text AS id, e <=> %(q)s::vector AS d FROM {TABLE} "
        f"ORDER BY binary_quantize(e)::bit({dim}) <~> binary_quantize(%(q)s::vector)::bit({dim}) "
        f"LIMIT {candidates}) s ORDER BY s.d LIMIT {k + 1}"
    )
    lat = []
    with db.connect(results=False) as c:
        register_vector(c)
        c.execute("SET TRANSACTION READ ONLY")
        c.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(BQ_EF),))
        c.execute("SET LOCAL enable_seqscan = off")
        for v in vectors:  # once to warm, once timed
            c.execute(stmt, {"q": v}, prepare=True).fetchall()
        for v in vectors:
            t0 = time.perf_counter()
            c.execute(stmt, {"q": v}, prepare=True).fetchall()
            lat.append((time.perf_counter() - t0) * 1000)
        c.rollback()
    return float(nearest_rank(lat, 0.95) or 0.0)


def main() -> None:
    import _server

    from evaluator.testset.query_source import QuerySource
    from evaluator.tuning.sweep import SweepConfig, run_sweep

    args = arguments()
    designs = [d.strip() for d in args.designs.split(",") if d.strip()]
    db, _, stop = _server.start(args.dsn, "pgeval-bench-designs-")
    try:
        table(db, args.docs, args.dim)
        print(
            f"table {args.docs} x {args.dim}, {args.queries} sampled queries, target "
            f"recall@10 {args.target_recall}, HNSW m 16 ef_construction 64, one client"
        )
        print(f"{'design':14} {'build s':>8} {'index MB':>9} {'setting':>24} {'recall':>7} "
              f"{'p95 ms':>7}")  # fmt: skip
        rows = {}
        for design in designs:
            took, size = build(db, design, args.dim, args.mwm)
            res = run_sweep(
                db,
                SweepConfig(
                    testset=None,
                    queries=QuerySource("sample", count=args.queries, seed=3),
                    target=TARGET,
                    stage=design,
                    settings={"enable_seqscan": "off", **SETTINGS.get(design, {})},
                    repeat=1,
                    target_recall=args.target_recall,
                    find=FIND[design],
                    find_max=FIND_MAX.get(design, 1000),
                    fresh=True,
                    name=f"designs-bench-{design}",
                ),
            )
            found = res.finds[0]
            point = next(
                (p for p in res.points if p["settings"].get(FIND[design]) == str(found["value"])),
                None,
            )
            p95 = point["p95_ms"] if point else None
            rows[design] = (found, p95)
            best = found.get("best") or [None, None]
            setting = (
                f"{FIND[design]}={found['value']}"
                if found["reached"]
                else f"not reached (best {best[0]})"
            )
            recall = found["recall"] if found["reached"] else best[1]
            print(
                f"{design:14} {took:8.1f} {size / 1048576:9.1f} {setting:>24} "
                f"{(recall or 0):7.4f} {(p95 or float('nan')):7.3f}"
            )
            if design == "hnsw-bq" and found["reached"] and p95:
                with db.connect(results=False) as c:
                    from pgvector.psycopg import register_vector

                    register_vector(c)
                    vectors = [
                        r[0]
                        for r in c.execute(
                            f"SELECT e FROM {TABLE} ORDER BY hashtextextended(id, 3) LIMIT %s",
                            (args.queries,),
                        )
                    ]
                bare = bare_bq_p95(db, args.dim, vectors, int(found["value"]))
                print(
                    f"hnsw-bq timed statement: p95 {p95:.3f} ms in the sweep against "
                    f"{bare:.3f} ms in a bare loop: ratio {p95 / bare:.3f} (target <= 1.15)"
                )
        with db.connect(results=False, autocommit=True) as c:
            c.execute("DROP INDEX IF EXISTS designs_bench_idx")
    finally:
        stop()


if __name__ == "__main__":
    main()
