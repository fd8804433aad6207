"""Benchmark: what a `pgeval watch` probe costs (issue 27).

On the table of bench/sweep_own_table.py (--docs rows x --dim dimensions, seeded clustered vectors,
an HNSW index; built once and kept), measured in the same run on the same server:

(a) a probe's wall time (library call, one connection setup included) with its exact ground
    truth stored, against a bare psycopg loop of the statements it times (the same sampled
    queries, prepared, SET LOCAL hnsw.ef_search, LIMIT k + 1, nothing stored; its connection
    opened untimed) — the issue's target is <= 1.2; rounds alternated, each round's ratio printed;
(b) the exact ground truth after 1 % of the rows changed (the probe recomputes it) against a
    full recomputation on unchanged data (the stored one deleted first).

Usage: python bench/watch_overhead.py [--docs 100000] [--dim 384] [--queries 100]
       [--cache DIR] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweep_own_table import TARGET, bare, server, table  # noqa: E402


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=100000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--ef", default="40")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cache", default=None)
    p.add_argument("--dsn", default=None)
    return p.parse_args()


def main() -> None:
    args = arguments()
    db, stop = server(args)
    try:
        from evaluator.dba.watch import WatchConfig, run_probe
        from evaluator.providers.embedders import storage
        from evaluator.testset.query_source import QuerySource

        name, built = table(db, args.docs, args.dim)
        src = QuerySource("sample", count=args.queries, seed=0)
        cfg = WatchConfig(
            target=TARGET,
            stage="hnsw",
            queries=src,
            settings={"hnsw.ef_search": args.ef},
            k=args.k,
            remedy=False,
        )
        first = run_probe(db, cfg)  # the ground truth of this sample, stored when missing
        with db.connect() as c:
            from evaluator.target.targets import load

            target = load(c, TARGET)
            tid = c.execute(
                "SELECT testset_id FROM pgeval.testset WHERE name = %s", (first.testset,)
            ).fetchone()[0]
            vectors = [q.embedding for q in storage.testset_queries(c, tid, with_embedding=True)]
        how = f"built in {built:.0f} s" if built else "cached"
        print(
            f"{args.docs} rows x {args.dim} dims ({how}), {len(vectors)} sampled queries, "
            f"hnsw.ef_search={args.ef}, LIMIT {args.k} + 1"
        )
        plans = [({"hnsw.ef_search": args.ef, "enable_seqscan": "off"}, False)]
        bare(db, target, vectors[:5], args.k + 1, plans)  # warm
        ratios, probes, bares = [], [], []
        for _ in range(args.rounds):  # alternated: the machine is shared
            b, _ = bare(db, target, vectors, args.k + 1, plans)
            t0 = time.perf_counter()
            res = run_probe(db, cfg)
            p = time.perf_counter() - t0
            assert res.ground_truth and res.ground_truth["status"] == "reused"
            ratios.append(p / b)
            probes.append(p)
            bares.append(b)
        print(
            f"(a) probe (ground truth reused): median {statistics.median(probes):.3f} s; bare "
            f"loop of its statements: median {statistics.median(bares):.3f} s; ratio per round "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f" (median {statistics.median(ratios):.2f}; target <= 1.2)"
        )
        print(
            f"    recall@{args.k} {res.probe['recall']:.4f}, p95 {res.probe['p95_ms']:.3f} ms, "
            f"timed statements {res.probe['timed_ms']:.1f} ms in all"
        )

        # (b) 1 % of the rows changed: the probe's ground truth is computed again
        rng = np.random.default_rng(5)
        n = max(1, args.docs // 100)
        ids = [f"d{i}" for i in rng.choice(np.arange(1, args.docs + 1), n, replace=False)]
        with db.connect(results=False, autocommit=True) as c:
            from pgvector.psycopg import register_vector

            register_vector(c)
            moved = rng.normal(size=(n, args.dim)).astype(np.float32)
            with c.cursor() as cur:
                cur.executemany(f"UPDATE {name} SET emb = %s WHERE id = %s", list(zip(moved, ids)))
        changed = run_probe(db, cfg)
        gt = changed.ground_truth or {}
        with db.connect() as c:
            c.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))
            c.commit()
        full = run_probe(db, cfg)
        fg = full.ground_truth or {}
        print(
            f"(b) after {n} rows (1 %) changed: ground truth {gt.get('status')} in "
            f"{gt.get('compute_ms', 0) / 1000:.3f} s (probe {changed.wall_ms / 1000:.3f} s); "
            f"full recomputation: {fg.get('compute_ms', 0) / 1000:.3f} s (probe "
            f"{full.wall_ms / 1000:.3f} s); ratio {gt.get('compute_ms', 0) / fg['compute_ms']:.2f}"
            " (the refresh is a full recomputation: 1.0 expected)"
        )
    finally:
        stop()


if __name__ == "__main__":
    main()
