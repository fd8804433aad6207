"""Shared set-up of the vector-stage benchmarks: a server (temporary embedded one, or --dsn), a
knowledge-base table with an HNSW index, a test set with query embeddings, a target.

Vectors: the Cranfield MiniLM embeddings (../shared/data/cranfield/minilm) tiled with small
noise up to --docs rows and --queries queries, else (or with --vectors random) seeded random
clustered 128-d vectors.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import _server
import numpy as np

warnings.filterwarnings("ignore")
MINILM = Path(__file__).resolve().parent.parent.parent / "shared/data/cranfield/minilm"


def arguments(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--depth", type=int, default=100)
    p.add_argument("--ef-search", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3, help="timed rounds; the best is reported")
    p.add_argument("--dsn", default=None, help="use this server instead of a temporary one")
    p.add_argument(
        "--vectors",
        choices=("auto", "cranfield", "random"),
        default="auto",
        help="cranfield: the Cranfield MiniLM embeddings (384-d, where present); random: seeded "
        "clustered 128-d vectors; auto (default): cranfield where present",
    )
    return p.parse_args()


def vectors(n_docs: int, n_queries: int, source: str = "auto"):
    rng = np.random.default_rng(3)
    present = (MINILM / "documents.npy").exists()
    if source == "cranfield" and not present:
        raise SystemExit(f"--vectors cranfield: {MINILM} is missing")
    if present and source != "random":
        base_d, base_q, source = (
            np.load(MINILM / "documents.npy"),
            np.load(MINILM / "queries.npy"),
            "cranfield minilm (tiled with noise)",
        )
    else:
        centers = rng.normal(size=(50, 128))
        base_d = centers[rng.integers(0, 50, 2000)] + 0.5 * rng.normal(size=(2000, 128))
        base_q = centers[rng.integers(0, 50, 300)] + 0.5 * rng.normal(size=(300, 128))
        source = "random clustered"
    docs = base_d[rng.integers(0, len(base_d), n_docs)] + 0.02 * rng.normal(
        size=(n_docs, base_d.shape[1])
    )
    qs = base_q[rng.integers(0, len(base_q), n_queries)] + 0.02 * rng.normal(
        size=(n_queries, base_q.shape[1])
    )
    return docs.astype(np.float32), qs.astype(np.float32), source


def vtext(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def setup(args):
    """Return (Database, cleanup, description)."""
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    db, _, stop = _server.start(args.dsn, "pgeval-bench-")
    docs, qs, source = vectors(args.docs, args.queries, getattr(args, "vectors", "auto"))
    t0 = time.perf_counter()
    with db.connect(autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS bench_kb")
        c.execute(f"CREATE TABLE bench_kb (id text PRIMARY KEY, emb vector({docs.shape[1]}))")
        with c.cursor().copy("COPY bench_kb FROM STDIN") as cp:
            for i, v in enumerate(docs, 1):
                cp.write_row((str(i), vtext(v)))
        c.execute("SET maintenance_work_mem = '512MB'")
        c.execute("CREATE INDEX bench_kb_hnsw ON bench_kb USING hnsw (emb vector_cosine_ops)")
        c.execute("ANALYZE bench_kb")
        c.execute("DELETE FROM pgeval.testset WHERE name = 'bench'")
        c.execute("DELETE FROM pgeval.experiment WHERE name LIKE 'bench-%'")
        tid = c.execute(
            "INSERT INTO pgeval.testset (name, content_hash, source_format, n_queries) "
            "VALUES ('bench', 'bench', 'bench', %s) RETURNING testset_id",
            (len(qs),),
        ).fetchone()[0]
        with c.cursor().copy(
            "COPY pgeval.query (testset_id, query_id, position, embedding) FROM STDIN"
        ) as cp:
            for j, v in enumerate(qs, 1):
                cp.write_row((tid, str(j), j, vtext(v)))
        t = Target(name="bench", table="bench_kb", id_column="id", vector_column="emb")
        validate(c, t)
        save(c, t, replace=True)
    build_s = time.perf_counter() - t0

    return (
        db,
        stop,
        (
            f"{args.docs} documents x {docs.shape[1]} dims ({source}), "
            f"{args.queries} queries, depth {args.depth}, "
            f"hnsw.ef_search {args.ef_search}; set-up {build_s:.1f} s"
        ),
    )


def query_vectors(db) -> list[np.ndarray]:
    with db.connect() as c:
        return [
            np.array(r[0].strip("[]").split(","), dtype=np.float32)
            for r in c.execute(
                "SELECT embedding::text FROM pgeval.query q JOIN pgeval.testset t USING (testset_id) "
                "WHERE t.name = 'bench' ORDER BY position"
            )
        ]


def interleaved(fns: dict, repeat: int) -> dict[str, list[float]]:
    """Each round runs every function once, in order, so that all of them see the same machine
    load; returns every round's wall time per name (a shared machine's load drifts by the
    minute: compare within a round, or the best of each)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return times


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
