"""A clustered vector table for the stage-kind tests (tests/test_stage_hnsw_*.py): seeded cluster
centers, documents and query vectors around them, the documents in ``table(id text PRIMARY KEY,
e vector(dim))`` with the indexes asked for, analysed; the query vectors saved as a .npy file for
``--queries-file``."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def vtext(v) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


def build(database, folder: Path, table: str, *, dim, n, nq, seed, spread, indexes):
    """(documents, queries, path of the queries' .npy); ``indexes``: CREATE INDEX statements."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(30, dim))

    def around(count: int) -> np.ndarray:
        picked = centers[rng.integers(0, 30, count)]
        return (picked + spread * rng.normal(size=(count, dim))).astype(np.float32)

    docs, queries = around(n), around(nq)
    path = folder / "q.npy"
    np.save(path, queries)
    with database.connect(results=False, autocommit=True) as c:
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(f"DROP TABLE IF EXISTS {table}")
        c.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, e vector({dim}))")
        with c.cursor().copy(f"COPY {table} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(docs, 1):
                cp.write_row((f"c{i}", vtext(v)))
        for ddl in indexes:
            c.execute(ddl)
        c.execute(f"ANALYZE {table}")
    return docs, queries, path


def drop(database, table: str) -> None:
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}")


def tenant_table(database, table: str, *, dim: int, n: int, shares: dict, seed: int = 11):
    """A table of tenants laid out as multi-tenant applications lay it out: ``table(id text
    PRIMARY KEY, e vector(dim), tenant text)``, ``n`` clustered rows shared among the tenants of
    ``shares`` ({tenant: fraction}, the first takes the rounding) at random, an HNSW index
    ``{table}_hnsw`` and a btree ``{table}_tenant``, analysed, autovacuum off: the planner's
    costs stay those of the first plan (an autovacuum after the inserts, setting the visibility
    map, makes the btree cheaper: every tenant, t30 too, was then served exactly, and a tenant
    at the switching point changed path between pgeval's EXPLAIN and the test's, in CI).
    Returns {id: (vector, tenant)}."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(25, dim))
    docs = (centers[rng.integers(0, 25, n)] + 0.5 * rng.normal(size=(n, dim))).astype(np.float32)
    names = list(shares)
    counts = [int(round(shares[name] * n)) for name in names]
    counts[0] += n - sum(counts)
    tenant = np.repeat(np.array(names, dtype=object), counts)[rng.permutation(n)]
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}")
        c.execute(
            f"CREATE TABLE {table} (id text PRIMARY KEY, e vector({dim}), tenant text) "
            "WITH (autovacuum_enabled = off)"
        )
        with c.cursor().copy(f"COPY {table} (id, e, tenant) FROM STDIN") as cp:
            for i, v in enumerate(docs):
                cp.write_row((f"c{i + 1}", vtext(v), tenant[i]))
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (e vector_cosine_ops)")
        c.execute(f"CREATE INDEX {table}_tenant ON {table} (tenant)")
        c.execute(f"ANALYZE {table}")
    return {f"c{i + 1}": (docs[i], tenant[i]) for i in range(n)}
