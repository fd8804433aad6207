"""Benchmark: the overhead of the pipeline runner over a bare psycopg loop, same queries.

(a) bare loop: one connection, one READ ONLY transaction, SET LOCAL hnsw.ef_search and
    enable_seqscan, one prepared statement ``SELECT id, emb <=> $1 FROM t ORDER BY emb <=> $1
    LIMIT depth`` executed per query and fetched — nothing stored;
(b) ``run_pipeline(stages="hnsw")`` in-process: the same statement shape, plus query embeddings
    read from pgeval, GUC validation, EXPLAIN plan checks, the configuration fingerprint, results
    and timings written by COPY, run bookkeeping;
(c) ``pgeval run pipeline --stages hnsw`` as a new process (adds interpreter start-up).

Prints wall times and the ratios (b)/(a) (target <= 1.05) and (c)/(a). Also the ratio without
the fingerprint's content checksum (``--no-checksum`` equivalent), a one-off table scan.

Usage: python bench/runner_overhead.py [--docs 20000] [--queries 1000] [--depth 100]
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _vector_kb as vkb  # noqa: E402

_names = itertools.count(1)


def bare_loop(db, vectors, depth, ef):
    from pgvector.psycopg import register_vector

    with db.connect(results=False) as c:
        register_vector(c)
        c.execute("SET TRANSACTION READ ONLY")
        c.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
        c.execute("SELECT set_config('enable_seqscan', 'off', true)")
        cur = c.cursor()
        stmt = (f"SELECT id, emb <=> %(q)s::vector AS d FROM bench_kb "
                f"ORDER BY emb <=> %(q)s::vector LIMIT {int(depth)}")
        n = 0
        for v in vectors:
            cur.execute(stmt, {"q": v}, prepare=True)
            n += len(cur.fetchall())
        c.rollback()
    return n


def pipeline(db, depth, ef, checksum=True):
    from evaluator.pipeline import PipelineConfig, run_pipeline

    run_pipeline(db, PipelineConfig(testset="bench", target="bench", stages="hnsw", depth=depth,
                                    repeat=1, settings={"hnsw.ef_search": str(ef)},
                                    name=f"bench-{next(_names)}", checksum=checksum))


def cli(db, depth, ef):
    env = dict(os.environ)
    if db.dsn is not None:
        env["PGEVAL_DSN"] = db.dsn
    else:
        env["PGEVAL_DATADIR"] = str(db.datadir)
    proc = subprocess.run([sys.executable, "-m", "evaluator", "run", "pipeline", "--testset", "bench",
                    "--target", "bench", "--stages", "hnsw", "--depth", str(depth), "--repeat",
                    "1", "--set", f"hnsw.ef_search={ef}", "--name", f"bench-{next(_names)}",
                    "--format", "json"], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"pgeval run pipeline failed: {proc.stderr.strip()}")


def main() -> None:
    args = vkb.arguments(__doc__.splitlines()[0])
    db, cleanup, desc = vkb.setup(args)
    try:
        vectors = vkb.query_vectors(db)
        print(desc)
        bare_loop(db, vectors, args.depth, args.ef_search)        # warm the caches once
        pipeline(db, args.depth, args.ef_search)
        n = len(vectors)
        a = vkb.best_of(lambda: bare_loop(db, vectors, args.depth, args.ef_search), args.repeat)
        print(f"(a) bare psycopg loop, one prepared statement : {a:8.3f} s  "
              f"({1000 * a / n:.3f} ms/query)", flush=True)
        b = vkb.best_of(lambda: pipeline(db, args.depth, args.ef_search), args.repeat)
        print(f"(b) run_pipeline --stages hnsw (in-process)   : {b:8.3f} s  ratio b/a = {b / a:.3f}"
              f"  (target <= 1.05)", flush=True)
        b0 = vkb.best_of(lambda: pipeline(db, args.depth, args.ef_search, checksum=False),
                         args.repeat)
        print(f"    same without the content checksum         : {b0:8.3f} s  ratio = {b0 / a:.3f}",
              flush=True)
        c = vkb.best_of(lambda: cli(db, args.depth, args.ef_search), args.repeat)
        print(f"(c) pgeval run pipeline (new process)         : {c:8.3f} s  ratio c/a = {c / a:.3f}")
    finally:
        cleanup()


if __name__ == "__main__":
    main()
