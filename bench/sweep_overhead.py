"""Benchmark: the overhead of `pgeval sweep` over the bare query times of the statements it runs.

A sweep of six hnsw.ef_search values (10, 20, 40, 80, 160, 320) x 3 repetitions over the test
set's queries (225 by default) runs, per repetition, exact search once and the hnsw stage at each
value. Its total wall time (in-process ``run_sweep``: fingerprints, plan checks, results and
timings written by COPY, index recall / metrics / percentiles computed in SQL, bookkeeping) is set
against the sum of the bare execute+fetch times of the very same statements (the stages' own SQL
from ``vector_sql.per_query``, same settings by SET LOCAL, prepared, one connection, nothing
stored), measured in the same run on the same server. Target: overhead <= 10 %.

Two peers are printed: (1) the sum of the per-query latencies the sweep itself recorded for those
statements (pgeval.query_timing: execute+fetch, measured inside the sweep, so machine noise hits
both sides alike), and (2) a separate bare loop; bare loop and sweep alternate for --rounds
rounds and the best of each is kept (the machine is shared: best-of filters out the others).

Usage: python bench/sweep_overhead.py [--docs 20000] [--queries 225] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _vector_kb as vkb  # noqa: E402

EF = ("10", "20", "40", "80", "160", "320")


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--queries", type=int, default=225)
    p.add_argument("--repeat", type=int, default=3, help="sweep repetitions")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--rounds", type=int, default=2, help="alternating timed rounds (best kept)")
    p.add_argument("--dsn", default=None, help="use this server instead of a temporary one")
    args = p.parse_args()
    args.depth = max(args.k, 20)  # the sweep's default depth
    args.ef_search = 40  # (only printed by the shared set-up)
    return args


def bare(db, vectors, depth: int, repeat: int) -> float:
    """Sum of execute+fetch times of the sweep's statements (exact, then each ef_search)."""
    from evaluator.core.vector_types import register_vector
    from evaluator.stages import gucs, vector_sql
    from evaluator.targets.targets import load

    with db.connect() as res:
        target = load(res, "bench")
    total = 0.0
    with db.connect(results=False) as c:
        register_vector(c)
        gucs.load_libraries(c)
        c.commit()
        plans = [({"enable_indexscan": "off"}, True)] + [
            ({"hnsw.ef_search": ef}, False) for ef in EF
        ]
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
                    total += time.perf_counter() - t
                c.rollback()
    return total


def sweep(db, k: int, repeat: int, name: str) -> tuple[float, object]:
    from evaluator.tuning.sweep import SweepConfig, run_sweep

    t = time.perf_counter()
    res = run_sweep(
        db,
        SweepConfig(
            testset="bench",
            target="bench",
            stage="hnsw",
            params=("hnsw.ef_search=" + ",".join(EF),),
            k=k,
            repeat=repeat,
            name=name,
            fresh=True,
        ),
    )
    return time.perf_counter() - t, res


def recorded(db, name: str) -> float:
    """Sum of the per-query latencies (s) the sweep recorded for its runs."""
    with db.connect() as c:
        return c.execute(
            "SELECT sum(t.latency_ms) / 1000 FROM pgeval.query_timing t "
            "JOIN pgeval.run r USING (run_id) JOIN pgeval.experiment e "
            "USING (experiment_id) WHERE e.name = %s",
            (name,),
        ).fetchone()[0]


def main() -> None:
    args = arguments()
    db, cleanup, desc = vkb.setup(args)
    try:
        vectors = [np.asarray(v, dtype=np.float32) for v in vkb.query_vectors(db)]
        print(desc)
        bare(db, vectors, args.depth, 1)  # warm the caches once
        sweep(db, args.k, 1, "bench-warm")  # query embeddings stored once
        best = None
        bares = []
        for _ in range(args.rounds):
            bares.append(bare(db, vectors, args.depth, args.repeat))
            s, res = sweep(db, args.k, args.repeat, "bench-sweep")
            inner = float(recorded(db, "bench-sweep"))
            if best is None or s - inner < best[0] - best[1]:
                best = (s, inner, res)
        s, inner, res = best
        b = min(bares)
        n = len(vectors) * (1 + len(EF)) * args.repeat
        print(
            f"statements: {n} ({len(vectors)} queries x (exact + {len(EF)} ef_search) x "
            f"{args.repeat} repetitions); best of {args.rounds} rounds"
        )
        print(f"pgeval sweep (in-process total)          : {s:8.3f} s")
        print(
            f"(1) its statements' recorded latencies   : {inner:8.3f} s  ratio = {s / inner:.3f}"
            f"  overhead = {100 * (s / inner - 1):.1f} %  (target <= 10 %)"
        )
        print(
            f"(2) separate bare execute+fetch loop     : {b:8.3f} s  ratio = {s / b:.3f}  "
            f"overhead = {100 * (s / b - 1):.1f} %"
        )
        for p in res.points:
            print(
                f"  {p['label']:>14}: recall@{args.k} {p['index_recall']:.4f}  "
                f"p95 {p['p95_ms']:.3f} ms"
            )
        print(res.recommendation)
    finally:
        cleanup()


if __name__ == "__main__":
    main()
