"""Benchmark: tuning hnsw.ef_search on a table of one's own, without judgements.

A table of --docs rows x --dim dimensions (seeded clustered vectors, an HNSW index) is built
once and kept between runs (an embedded server whose data directory is --cache, or --dsn); 300
queries are sampled from it (``--sample-queries``), and hnsw.ef_search 10...320 is swept x 3
repetitions. Printed, measured in the same run on the same server:

(a) computing the exact ground truth (one streamed read of the table, ranked on the client,
    checked against the server on a few queries, stored) against a bare psycopg loop of the same
    exact statements (the exact stage's SQL, prepared, one per query, nothing stored) —
    target <= 0.25;
(b) the sweep's wall time with the ground truth already stored (every point measured again:
    --fresh) against the wall time of a bare loop of the hnsw statements at the same settings
    (prepared, SET LOCAL, nothing stored; its connection opened untimed) — target <= 1.15;
    also against the bare loop's time inside execute+fetch alone.

Usage: python bench/sweep_own_table.py [--docs 100000] [--dim 384] [--queries 300]
       [--cache DIR] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

EF = ("10", "20", "40", "80", "160", "320")
TARGET = "own-bench"


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=100000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3, help="sweep/bare rounds, alternated")
    p.add_argument(
        "--cache",
        default=None,
        help="data directory of the cached embedded server "
        "[default: ~/.cache/pgeval-bench/own-table]",
    )
    p.add_argument("--dsn", default=None, help="use this server instead of the cached one")
    return p.parse_args()


def server(args):
    from evaluator.core.db import Database
    from evaluator.core.install import init

    if args.dsn:
        db = Database.resolve(dsn=args.dsn)
        init(db)
        return db, lambda: None
    datadir = Path(args.cache or Path.home() / ".cache/pgeval-bench/own-table").expanduser()
    datadir.parent.mkdir(parents=True, exist_ok=True)
    os.environ["PGEVAL_DATADIR"] = str(datadir)
    db = Database(datadir=datadir)
    init(db)

    def stop():
        from evaluator.core import server as srv

        srv.stop(db.datadir)  # stopped, kept: the next run starts from the same table

    return db, stop


def table(db, docs: int, dim: int) -> tuple[str, float]:
    """The table (built when missing) and the seconds its build took now (0: cached)."""
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    name = f"own_bench_{docs}_{dim}"
    t0 = time.perf_counter()
    with db.connect(autocommit=True) as c:
        have = c.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{name}_hnsw",)).fetchone()[0]
        built = 0.0
        if not have:
            rng = np.random.default_rng(17)
            centers = rng.normal(size=(200, dim)).astype(np.float32)
            c.execute(f"DROP TABLE IF EXISTS {name}")
            c.execute(f"CREATE TABLE {name} (id text PRIMARY KEY, emb vector({dim}))")
            from pgvector.psycopg import register_vector

            register_vector(c)  # before the COPY: it queries the catalog
            with c.cursor().copy(f"COPY {name} (id, emb) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(["text", "vector"])
                for start in range(0, docs, 10000):
                    n = min(10000, docs - start)
                    block = centers[rng.integers(0, 200, n)] + 0.7 * rng.normal(size=(n, dim))
                    for i, v in enumerate(block.astype(np.float32), start + 1):
                        cp.write_row((f"d{i}", v))
            c.execute("SET maintenance_work_mem = '1GB'")
            c.execute(f"CREATE INDEX {name}_hnsw ON {name} USING hnsw (emb vector_cosine_ops)")
            c.execute(f"VACUUM ANALYZE {name}")
            built = time.perf_counter() - t0
        t = Target(
            name=TARGET,
            table=name,
            id_column="id",
            vector_column="emb",
            dimension=dim,
            unique_id=True,
        )
        validate(c, t)
        save(c, t, replace=True)
    return name, built


def bare(db, target, vectors, depth: int, plans, repeat: int = 1) -> tuple[float, float]:
    """(wall seconds of the loop, seconds inside execute+fetch) of the stages' statements,
    prepared, SET LOCAL per setting, nothing stored; the connection is opened untimed."""
    from evaluator.core.vector_types import register_vector
    from evaluator.stages import gucs, vector_sql

    inside = 0.0
    with db.connect(results=False) as c:
        register_vector(c)
        gucs.load_libraries(c)
        c.commit()
        t0 = time.perf_counter()
        for _ in range(repeat):
            for settings, exact in plans:
                stmt, params, _ = vector_sql.per_query(target, depth, exact=exact)
                text = stmt.as_string(c)
                c.execute("SET TRANSACTION READ ONLY")
                gucs.apply_local(c, settings)
                cur = c.cursor()
                for v in vectors:
                    t = time.perf_counter()
                    cur.execute(text, dict(params, q=v), prepare=True)
                    cur.fetchall()
                    inside += time.perf_counter() - t
                c.rollback()
        wall = time.perf_counter() - t0
    return wall, inside


def main() -> None:
    args = arguments()
    db, stop = server(args)
    try:
        from evaluator.ground_truth import store as ground_truth
        from evaluator.providers.embedders import storage
        from evaluator.table import fingerprint as fpmod
        from evaluator.targets.targets import load
        from evaluator.testset.query_source import QuerySource, materialize
        from evaluator.tuning.sweep import SweepConfig, run_sweep

        name, built = table(db, args.docs, args.dim)
        with db.connect() as c:
            target = load(c, TARGET)
        src = QuerySource("sample", count=args.queries, seed=1)
        t0 = time.perf_counter()
        testset, info = materialize(db, src, target)
        sample_s = time.perf_counter() - t0
        with db.connect() as c:
            tid, ts_hash = c.execute(
                "SELECT testset_id, content_hash FROM pgeval.testset WHERE name = %s", (testset,)
            ).fetchone()
            queries = storage.testset_queries(c, tid, with_embedding=True)
        vectors = [q.embedding for q in queries]
        depth = max(args.k, 20)
        how = f"built in {built:.0f} s" if built else "cached"
        print(
            f"{args.docs} rows x {args.dim} dims ({how}),"
            f" {len(vectors)} sampled queries (sampling {sample_s:.1f} s), depth {depth}, "
            f"hnsw.ef_search {','.join(EF)} x {args.repeat}"
        )

        # (a) ground truth against the bare loop of exact statements (depth + 1: own chunk)
        bare(db, target, vectors[:5], depth + 1, [({"enable_indexscan": "off"}, True)])  # warm
        exact_bare = bare(db, target, vectors, depth + 1, [({"enable_indexscan": "off"}, True)])[0]
        with db.connect(results=False, read_only=True) as kb, db.connect() as res:
            data = fpmod.capture_data(kb, target)
            kb.rollback()
            res.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))
            res.commit()
            t0 = time.perf_counter()
            gt = ground_truth.ensure(
                res,
                kb,
                target,
                testset_hash=ts_hash,
                queries=queries,
                depth=depth,
                data=data,
                own_chunk_removed=True,
                settings={},
                embedder="precomputed",
            )
            gt_s = time.perf_counter() - t0
        print(f"(a) ground truth ({gt.method}, stored)        : {gt_s:8.3f} s")
        print(
            f"    bare psycopg loop of the exact statements : {exact_bare:8.3f} s  "
            f"ratio = {gt_s / exact_bare:.3f}  (target <= 0.25)"
        )

        # (b) the sweep with the ground truth stored, against bare hnsw statements
        cfg = SweepConfig(
            testset=None,
            queries=src,
            target=TARGET,
            stage="hnsw",
            params=("hnsw.ef_search=" + ",".join(EF),),
            k=args.k,
            repeat=args.repeat,
            name="own-bench-sweep",
            fresh=True,
        )
        run_sweep(db, SweepConfig(**{**cfg.__dict__, "repeat": 1, "name": "own-bench-warm"}))
        plans = [({"hnsw.ef_search": ef, "enable_seqscan": "off"}, False) for ef in EF]
        best, rounds, inside = None, [], []
        for _ in range(args.rounds):  # alternate, keep the best of each (the machine is shared)
            b, b_in = bare(db, target, vectors, depth + 1, plans, args.repeat)
            t0 = time.perf_counter()
            res = run_sweep(db, cfg)
            s = time.perf_counter() - t0
            rounds.append(s / b)
            inside.append(s / b_in)
            best = (min(b, best[0]) if best else b, min(s, best[1]) if best else s, res)
        b, s, res = best
        print(f"(b) pgeval sweep (ground truth {res.ground_truth['status']})       : {s:8.3f} s")
        print(
            f"    bare prepared-statement loop, same settings: {b:8.3f} s  ratio = {s / b:.3f}"
            f"  (target <= 1.15)"
        )
        print(
            "    ratio within each round: "
            + ", ".join(f"{r:.3f}" for r in rounds)
            + f" (median {statistics.median(rounds):.3f})"
        )
        print(
            "    against the bare loop's execute+fetch time alone (stricter): "
            + ", ".join(f"{r:.3f}" for r in inside)
        )
        for p in res.points:
            print(
                f"  {p['label']:>14}: recall@{args.k} {p['index_recall']:.4f}  "
                f"p95 {p['p95_ms']:.3f} ms"
            )
        print("recommendation:", res.recommendation)
    finally:
        stop()


if __name__ == "__main__":
    main()
