"""Benchmark: the keyword stage's latency against the application's own statement, same run.

On a Cranfield-sized table (the Cranfield collection when ``../shared/data/cranfield`` holds it,
else 1,400 generated documents and 225 generated queries over a Zipf vocabulary) with a
pg_textsearch BM25 index:

(a) bare loop: one connection, one READ ONLY transaction, one prepared statement
    ``SELECT id FROM t ORDER BY body <@> to_bm25query($1, 'idx') LIMIT depth`` executed and
    fetched per query — what an application runs; per-query client latency;
(b) ``run_pipeline(stages="bm25")``: the stage's recorded per-query latency
    (pgeval.query_timing, the run's timing boundary);
(c) for reference, the statement pgeval timed before: the same ORDER BY ... LIMIT also
    projecting the score (pg_textsearch's standalone scorer then runs once per returned row).

Prints the p50 of each and the ratios b/a (target about 1) and c/a; also the stage's wall time
(it includes the untimed score look-up of the returned chunks).

Usage: python bench/keyword_timing.py [--depth 100] [--rounds 3] [--dsn DSN] [--generated]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _server  # noqa: E402

CRANFIELD = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "cranfield"
IDS_ONLY = (
    "SELECT doc_id::text FROM bench_kw ORDER BY body <@> to_bm25query(%(q)s, "
    "'bench_kw_bm25') LIMIT {k}"
)
WITH_SCORE = (
    "SELECT doc_id::text, body <@> to_bm25query(%(q)s, 'bench_kw_bm25') AS score "
    "FROM bench_kw ORDER BY score LIMIT {k}"
)


def corpus(generated: bool = False) -> tuple[list[tuple[str, str]], list[tuple[str, str]], str]:
    """(documents, queries, description)."""
    if not generated and (CRANFIELD / "cran.all.1400").is_file():
        from evaluator.testset.datasets.cranfield import documents, queries

        docs = [(d, f"{title} {body}".strip()) for d, title, body in documents(CRANFIELD)]
        return docs, list(queries(CRANFIELD)), "Cranfield (1,400 documents, 225 queries)"
    rng = random.Random(11)
    vocab = [f"term{i}" for i in range(5000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    docs = [
        (str(i), " ".join(rng.choices(vocab, weights, k=rng.randint(60, 220))))
        for i in range(1, 1401)
    ]
    qs = [
        (str(i), " ".join(rng.choices(vocab[20:2000], k=rng.randint(5, 12)))) for i in range(1, 226)
    ]
    return docs, qs, "generated (1,400 documents, 225 queries, Zipf vocabulary of 5,000 terms)"


def load(db, docs, queries) -> None:
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    with db.connect(autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS bench_kw")
        c.execute("CREATE TABLE bench_kw (doc_id text PRIMARY KEY, body text, emb vector(3))")
        with c.cursor().copy("COPY bench_kw (doc_id, body) FROM STDIN") as cp:
            for row in docs:
                cp.write_row(row)
        c.execute(
            "CREATE INDEX bench_kw_bm25 ON bench_kw USING bm25 (body) "
            "WITH (text_config = 'english')"
        )
        c.execute("ANALYZE bench_kw")
        c.execute("DELETE FROM pgeval.testset WHERE name = 'bench-kw'")
        tid = c.execute(
            "INSERT INTO pgeval.testset (name, content_hash, source_format, "
            "n_queries, n_judgements) VALUES ('bench-kw', 'bench-kw', 'test', %s, 0) "
            "RETURNING testset_id",
            (len(queries),),
        ).fetchone()[0]
        with c.cursor().copy(
            "COPY pgeval.query (testset_id, query_id, position, query_text) FROM STDIN"
        ) as cp:
            for i, (qid, text) in enumerate(queries, 1):
                cp.write_row((tid, qid, i, text))
        t = Target(
            name="bench-kw",
            table="bench_kw",
            id_column="doc_id",
            vector_column="emb",
            text_column="body",
        )
        validate(c, t)
        save(c, t, replace=True)


def bare(db, statement: str, queries, depth: int) -> list[float]:
    """Client latency (ms) per query of one prepared statement, as an application runs it."""
    stmt = statement.format(k=int(depth))
    out = []
    with db.connect(results=False) as c:
        c.execute("SET TRANSACTION READ ONLY")
        cur = c.cursor()
        for _, text in queries:
            t0 = time.perf_counter()
            cur.execute(stmt, {"q": text}, prepare=True)
            cur.fetchall()
            out.append((time.perf_counter() - t0) * 1000.0)
        c.rollback()
    return out


def stage(db, depth: int, name: str) -> tuple[list[float], float]:
    """The bm25 stage's recorded latencies (ms) and its wall time (s)."""
    from evaluator.run.pipeline import PipelineConfig, run_pipeline

    t0 = time.perf_counter()
    res = run_pipeline(
        db,
        PipelineConfig(
            testset="bench-kw",
            target="bench-kw",
            stages="bm25",
            depth=depth,
            repeat=1,
            name=name,
            checksum=False,
        ),
    )
    wall = time.perf_counter() - t0
    with db.connect(autocommit=True) as c:
        lat = [
            r[0]
            for r in c.execute(
                "SELECT latency_ms FROM pgeval.query_timing WHERE run_id = %s",
                (res.runs[0]["run_id"],),
            )
        ]
    return lat, wall


def p50(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depth", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3, help="rounds; the best p50 of each is kept")
    p.add_argument("--dsn", default=None, help="use this server instead of a temporary one")
    p.add_argument(
        "--generated",
        action="store_true",
        help="generated text even when the Cranfield collection is there",
    )
    args = p.parse_args()
    db, _, stop = _server.start(args.dsn, "pgeval-bench-kw-")
    try:
        docs, queries, desc = corpus(args.generated)
        load(db, docs, queries)
        print(f"{desc}; top {args.depth}; p50 over the queries, best of {args.rounds} rounds")
        bare(db, IDS_ONLY, queries, args.depth)  # warm the caches once
        a, b, c, wall = [], [], [], []
        for r in range(args.rounds):  # interleaved, same conditions
            a.append(p50(bare(db, IDS_ONLY, queries, args.depth)))
            lat, w = stage(db, args.depth, f"bench-kw-{os.getpid()}-{r}")
            b.append(p50(lat))
            wall.append(w)
            c.append(p50(bare(db, WITH_SCORE, queries, args.depth)))
        a, b, c = min(a), min(b), min(c)
        print(f"(a) application's statement (ids in index order) p50 : {a:9.3f} ms")
        print(
            f"(b) bm25 stage, recorded latency p50                   : {b:9.3f} ms  "
            f"ratio b/a = {b / a:.2f}  (target about 1)"
        )
        print(
            f"(c) same statement projecting the score p50            : {c:9.3f} ms  "
            f"ratio c/a = {c / a:.2f}  (what the stage timed before)"
        )
        print(
            f"    bm25 stage wall time (incl. untimed score look-up) : {min(wall):9.3f} s "
            f"for {len(queries)} queries"
        )
    finally:
        stop()


if __name__ == "__main__":
    main()
