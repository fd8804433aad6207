"""Benchmark: the overhead of the pipeline runner over a bare psycopg loop, same queries.

(a) bare loop: one connection, one READ ONLY transaction, SET LOCAL hnsw.ef_search and
    enable_seqscan, one prepared statement ``SELECT id, emb <=> $1 FROM t ORDER BY emb <=> $1
    LIMIT depth`` executed per query and fetched — nothing stored;
(b) ``run_pipeline(stages="hnsw")`` in-process: the same statement shape, plus query embeddings
    read from pgeval, GUC validation, EXPLAIN plan checks, the configuration fingerprint, results
    and timings written by COPY, run bookkeeping;
(c) ``pgeval run pipeline --stages hnsw`` as a new process (adds interpreter start-up);
(d) the bare loop of (a) plus storing what it measured (ranked lists and latencies, one binary
    COPY each): the peer for the runner's own overhead, since a bare loop that keeps nothing
    pays none of the cost of writing 100 rows per query.

Prints wall times and the ratios (b)/(a) (target <= 1.15) and (c)/(a), the variants run
interleaved, round by round (best of --repeat rounds; and b/a within each round, with its
median). Also the ratio without the fingerprint's content checksum (``--no-checksum``
equivalent), a one-off table scan, and the time (a) and (b) spend outside their timed statements
(wall time less the sum of the per-query latencies: what the runner adds around the queries).

Usage: python bench/runner_overhead.py [--docs 20000] [--queries 1000] [--depth 100]
       [--vectors random]   (seeded clustered 128-d vectors: shorter queries, so the
                             fixed costs weigh more)
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _vector_kb as vkb  # noqa: E402

_names = itertools.count(1)


def bare_search(db, vectors, depth, ef):
    """Yield (query number, rows, client ms) for each vector: one connection, one READ ONLY
    transaction, the settings by SET LOCAL, one prepared statement executed and fetched."""
    import time

    from pgvector.psycopg import register_vector

    with db.connect(results=False) as c:
        register_vector(c)
        c.execute("SET TRANSACTION READ ONLY")
        c.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
        c.execute("SELECT set_config('enable_seqscan', 'off', true)")
        cur = c.cursor()
        stmt = (
            f"SELECT id, emb <=> %(q)s::vector AS d FROM bench_kb "
            f"ORDER BY emb <=> %(q)s::vector LIMIT {int(depth)}"
        )
        for i, v in enumerate(vectors, 1):
            t0 = time.perf_counter()
            cur.execute(stmt, {"q": v}, prepare=True)
            rows = cur.fetchall()
            yield i, rows, (time.perf_counter() - t0) * 1000.0
        c.rollback()


_timed: dict[str, list[float]] = {"a": [], "b": []}  # each round's sum of timed spans, s
_runs: list[int] = []  # the runs of the rounds of (b)


def bare_loop(db, vectors, depth, ef, record=False):
    n, timed = 0, 0.0
    for _, rows, ms in bare_search(db, vectors, depth, ef):
        n, timed = n + len(rows), timed + ms
    if record:
        _timed["a"].append(timed / 1000.0)
    return n


def bare_loop_and_store(db, vectors, depth, ef):
    """(a) plus what any runner must do with its answers: store the ranked lists and the
    per-query latencies in pgeval (one COPY each, like the pipeline's writer), then drop them."""
    from evaluator.stages.store import judged_grades, write_lists

    lists, timings = [], []
    for i, got, ms in bare_search(db, vectors, depth, ef):
        timings.append((str(i), ms, len(got)))
        lists.append((str(i), [str(cid) for cid, _ in got], [d for _, d in got]))
    with db.connect() as r:
        run_id = r.execute(
            "INSERT INTO pgeval.run (name, testset_id, stage, order_rule) SELECT "
            "'bench-bare-' || pg_backend_pid(), testset_id, 'hnsw', 'bench' FROM "
            "pgeval.testset WHERE name = 'bench' RETURNING run_id"
        ).fetchone()[0]
        write_lists(r, run_id, lists, judged_grades(r, run_id, [q for q, _, _ in lists]))
        with r.cursor().copy(
            "COPY pgeval.query_timing (run_id, query_id, latency_ms, "
            "rows_returned) FROM STDIN WITH (FORMAT BINARY)"
        ) as cp:
            cp.set_types(["int8", "text", "float8", "int4"])
            for t in timings:
                cp.write_row((run_id, *t))
        r.commit()
        r.execute("DELETE FROM pgeval.run WHERE run_id = %s", (run_id,))
        r.commit()
    return sum(len(c) for _, c, _ in lists)


def pipeline(db, depth, ef, checksum=True, record=False):
    from evaluator.run.pipeline import PipelineConfig, run_pipeline

    result = run_pipeline(
        db,
        PipelineConfig(
            testset="bench",
            target="bench",
            stages="hnsw",
            depth=depth,
            repeat=1,
            settings={"hnsw.ef_search": str(ef)},
            name=f"bench-{next(_names)}",
            checksum=checksum,
        ),
    )
    if record:  # its latencies are summed after the rounds (untimed)
        _runs.append(result.runs[0]["run_id"])


def stored_latencies(db) -> list[float]:
    """The sum of the timed spans (s) of each run recorded by :func:`pipeline`, in order."""
    with db.connect() as c:
        return [
            c.execute(
                "SELECT sum(latency_ms) / 1000.0 FROM pgeval.query_timing WHERE run_id = %s",
                (run_id,),
            ).fetchone()[0]
            for run_id in _runs
        ]


def cli(db, depth, ef):
    env = dict(os.environ)
    if db.dsn is not None:
        env["PGEVAL_DSN"] = db.dsn
    else:
        env["PGEVAL_DATADIR"] = str(db.datadir)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "run",
            "pipeline",
            "--testset",
            "bench",
            "--target",
            "bench",
            "--stages",
            "hnsw",
            "--depth",
            str(depth),
            "--repeat",
            "1",
            "--set",
            f"hnsw.ef_search={ef}",
            "--name",
            f"bench-{next(_names)}",
            "--format",
            "json",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise SystemExit(f"pgeval run pipeline failed: {proc.stderr.strip()}")


def main() -> None:
    args = vkb.arguments(__doc__.splitlines()[0])
    db, cleanup, desc = vkb.setup(args)
    try:
        vectors = vkb.query_vectors(db)
        print(desc)
        bare_loop(db, vectors, args.depth, args.ef_search)  # warm the caches once
        pipeline(db, args.depth, args.ef_search)
        n = len(vectors)
        dp, ef = args.depth, args.ef_search
        t = vkb.interleaved(
            {
                "a": lambda: bare_loop(db, vectors, dp, ef, record=True),
                "b": lambda: pipeline(db, dp, ef, record=True),
                "b0": lambda: pipeline(db, dp, ef, checksum=False),
                "c": lambda: cli(db, dp, ef),
                "d": lambda: bare_loop_and_store(db, vectors, dp, ef),
            },
            args.repeat,
        )
        a, b, b0, c, d = (min(t[k]) for k in ("a", "b", "b0", "c", "d"))
        rounds = ", ".join(f"{x / y:.3f}" for x, y in zip(t["b"], t["a"]))
        print(
            f"(a) bare psycopg loop, one prepared statement : {a:8.3f} s  "
            f"({1000 * a / n:.3f} ms/query)"
        )
        print(
            f"(b) run_pipeline --stages hnsw (in-process)   : {b:8.3f} s  ratio b/a = {b / a:.3f}"
            f"  (target <= 1.15)"
        )
        med = statistics.median(x / y for x, y in zip(t["b"], t["a"]))
        print(f"    b/a within each round: {rounds} (median {med:.3f})")
        _timed["b"] = stored_latencies(db)
        untimed = {k: [w - x for w, x in zip(t[k], _timed[k])] for k in ("a", "b")}
        print(
            "    time outside the timed statements, median of the rounds: bare loop "
            f"{1000 * statistics.median(untimed['a']):.0f} ms, run_pipeline "
            f"{1000 * statistics.median(untimed['b']):.0f} ms; timed spans summed: "
            f"{statistics.median(_timed['a']):.3f} s and {statistics.median(_timed['b']):.3f} s"
        )
        print(f"    same without the content checksum         : {b0:8.3f} s  ratio = {b0 / a:.3f}")
        print(
            f"(c) pgeval run pipeline (new process)         : {c:8.3f} s  ratio c/a = {c / a:.3f}"
        )
        print(
            f"(d) bare loop + storing its results (COPY)    : {d:8.3f} s  ratio b/d = {b / d:.3f}"
            f"  (the runner against a loop that keeps what it measured)"
        )
    finally:
        cleanup()


if __name__ == "__main__":
    main()
