"""Knowledge-base tables for the DBA-tooling tests (fingerprint, health, warmup, sweep).

Every builder is idempotent on the session's database: the first test that asks builds the table
(and its ANN index), later ones find it. Cranfield minilm vectors are used when ../shared holds
them (documents.npy row i = doc id i+1, queries.npy row j = query j+1), else seeded random vectors
with a planted neighbour structure, so that an ANN index has something to lose.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
CRAN = SHARED / "data" / "cranfield"


def vec_text(v) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in v) + "]"


def corpus(max_docs: int = 1400, max_queries: int = 225):
    """(documents, queries, source): float32 arrays; Cranfield when present."""
    docs_file, q_file = CRAN / "minilm" / "documents.npy", CRAN / "minilm" / "queries.npy"
    if docs_file.exists() and q_file.exists():
        return (
            np.load(docs_file)[:max_docs].astype(np.float32),
            np.load(q_file)[:max_queries].astype(np.float32),
            "cranfield",
        )
    rng = np.random.default_rng(7)
    centers = rng.normal(size=(40, 64))
    docs = centers[rng.integers(0, 40, max_docs)] + 0.6 * rng.normal(size=(max_docs, 64))
    queries = centers[rng.integers(0, 40, max_queries)] + 0.6 * rng.normal(size=(max_queries, 64))
    return docs.astype(np.float32), queries.astype(np.float32), "random"


def qrels(n_queries: int, source: str, docs: np.ndarray, queries: np.ndarray) -> dict:
    """Judgements: Cranfield's own (codes 1-3 -> relevant) or, for random vectors, each query's
    five exact nearest neighbours — except every third query, judged on five random documents,
    so that (as with Cranfield) some queries have low recall and get flagged."""
    if source == "cranfield":
        from evaluator.testset.datasets.cranfield import GRADE_MAP
        from evaluator.testset.datasets.cranfield import qrels as cran_qrels

        out: dict[str, dict[str, int]] = {str(q): {} for q in range(1, n_queries + 1)}
        for qid, doc, code in cran_qrels(CRAN):
            if qid in out and int(doc) <= len(docs):
                out[qid][doc] = GRADE_MAP.get(code, 0)
        return out
    d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    top = np.argsort(-(q @ d.T), axis=1)[:, :5]
    rng = np.random.default_rng(11)
    return {
        str(j + 1): {
            str(i + 1): 2 for i in (rng.choice(len(docs), 5, replace=False) if j % 3 == 0 else row)
        }
        for j, row in enumerate(top)
    }


def ensure_table(conn, name: str, docs: np.ndarray, *, text: bool = True) -> None:
    """``name(id text primary key, embedding vector(D), body text)`` filled with ``docs``."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()[0]
    if exists:
        return
    dim = docs.shape[1]
    conn.execute(f"CREATE TABLE {name} (id text PRIMARY KEY, embedding vector({dim}), body text)")
    with conn.cursor().copy(f"COPY {name} (id, embedding, body) FROM STDIN") as cp:
        for i, v in enumerate(docs, 1):
            cp.write_row((str(i), vec_text(v), f"document {i}" if text else None))
    conn.execute(f"ANALYZE {name}")


def ensure_index(
    conn, table: str, index: str, method: str, options: str = "", opclass: str = "vector_cosine_ops"
) -> None:
    if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (index,)).fetchone()[0]:
        return
    with_ = f" WITH ({options})" if options else ""
    conn.execute("SET maintenance_work_mem = '256MB'")
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute(f"CREATE INDEX {index} ON {table} USING {method} (embedding {opclass}){with_}")


def ensure_target(conn, name: str, table: str, *, text_column: str | None = "body"):
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    t = Target(
        name=name,
        table=table,
        id_column="id",
        vector_column="embedding",
        text_column=text_column,
        distance="cosine",
    )
    validate(conn, t)
    save(conn, t, replace=True)
    return t


def ensure_testset(
    conn, name: str, judged: dict, queries: np.ndarray, embedder: str = "precomputed"
) -> int:
    """A test set with every query's embedding (in pgeval.query and pgeval.query_embedding)."""
    from helpers import make_testset

    row = conn.execute("SELECT testset_id FROM pgeval.testset WHERE name = %s", (name,)).fetchone()
    if row is not None:
        return row[0]
    embeddings = {str(j + 1): queries[j] for j in range(len(queries)) if str(j + 1) in judged}
    tid = make_testset(conn, name, judged, embeddings=embeddings, content_hash=f"hash-{name}")
    with conn.cursor().copy(
        "COPY pgeval.query_embedding (testset_id, query_id, embedder, dim, embedding) FROM STDIN"
    ) as cp:
        for qid, v in embeddings.items():
            cp.write_row((tid, qid, embedder, len(v), vec_text(v)))
    return tid


CRAN_TABLE = "dba_cran"
CRAN_TARGET = "dba-cran"
CRAN_TESTSET = "dba-cran-ts"
CRAN_EMBEDDER = "precomputed"


def ensure_cranfield(conn, n_queries: int = 225):
    """The session's shared knowledge base: 1400 documents, an HNSW index (m=16,
    ef_construction=64), target ``dba-cran``, test set ``dba-cran-ts`` with embeddings."""
    docs, queries, source = corpus()
    ensure_table(conn, CRAN_TABLE, docs)
    ensure_index(conn, CRAN_TABLE, "dba_cran_hnsw", "hnsw")
    target = ensure_target(conn, CRAN_TARGET, CRAN_TABLE)
    judged = qrels(n_queries, source, docs, queries[:n_queries])
    ensure_testset(conn, CRAN_TESTSET, judged, queries[:n_queries], CRAN_EMBEDDER)
    return target, source
