"""Knowledge-base tables for the vector-stage and pipeline tests, built once per session (the
builders are idempotent: the first test that asks builds, later ones find the tables).

Cranfield MiniLM vectors when ../shared holds them (documents.npy row i = doc id i+1), else
seeded random vectors with a planted cluster structure (see dba_data.corpus), so the tests run in
a clone without ../shared.

- ``va_one``  all documents, HNSW (m=16, ef_construction=64) only
- ``va_two``  first 1000 documents, HNSW *and* DiskANN on the same column (the planner picks
  DiskANN: the hnsw stage needs --isolate-index there)
- ``va_ivf``  all documents, IVFFlat (lists=20)
- ``va_wk.embeddings``  WeKnora layout: halfvec column of mixed dimension, two rows per chunk
  (the second one slightly off), rows of another dimension and knowledge base, disabled rows,
  partial HNSW indexes ``WHERE dimension = N`` over ``embedding::halfvec(N)``

Test sets and targets live in schema pgeval, which the ``clean`` fixture empties: tests create
them per test with :func:`testset` and :func:`target`.
"""

from __future__ import annotations

import numpy as np
from dba_data import corpus, qrels

ONE, TWO, IVF = "va_one", "va_two", "va_ivf"
_BUILT: dict[str, object] = {}


def vtext(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def data():
    if "data" not in _BUILT:
        _BUILT["data"] = corpus()
    return _BUILT["data"]


def _exists(conn, name: str) -> bool:
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()[0]


def _table(conn, name: str, docs: np.ndarray) -> None:
    conn.execute(
        f"CREATE TABLE {name} (doc_id text PRIMARY KEY, body text, emb vector({docs.shape[1]}))"
    )
    with conn.cursor().copy(f"COPY {name} (doc_id, body, emb) FROM STDIN") as cp:
        for i, v in enumerate(docs, 1):
            cp.write_row((str(i), f"document {i}", vtext(v)))


def build(conn) -> None:
    """Create every table and index of this module (once per session)."""
    if _BUILT.get("tables"):
        return
    docs, _, _ = data()
    conn.execute("SET maintenance_work_mem = '128MB'")
    conn.execute("SET max_parallel_maintenance_workers = 0")
    if not _exists(conn, ONE):
        _table(conn, ONE, docs)
        conn.execute(f"CREATE INDEX va_one_hnsw ON {ONE} USING hnsw (emb vector_cosine_ops)")
        conn.execute(f"ANALYZE {ONE}")
    if not _exists(conn, TWO):
        _table(conn, TWO, docs[:1000])
        conn.execute(f"CREATE INDEX va_two_hnsw ON {TWO} USING hnsw (emb vector_cosine_ops)")
        conn.execute(f"CREATE INDEX va_two_diskann ON {TWO} USING diskann (emb vector_cosine_ops)")
        conn.execute(f"ANALYZE {TWO}")
    if not _exists(conn, IVF):
        _table(conn, IVF, docs)
        conn.execute(
            f"CREATE INDEX va_ivf_ivfflat ON {IVF} USING ivfflat (emb vector_cosine_ops) "
            "WITH (lists = 20)"
        )
        conn.execute(f"ANALYZE {IVF}")
    if not _exists(conn, "va_wk.embeddings"):
        _weknora(conn, docs)
    _BUILT["tables"] = True


def _weknora(conn, docs: np.ndarray) -> None:
    dim = docs.shape[1]
    rng = np.random.default_rng(11)
    conn.execute("CREATE SCHEMA IF NOT EXISTS va_wk")
    conn.execute(
        "CREATE TABLE va_wk.embeddings (id bigserial PRIMARY KEY, chunk_id text NOT NULL, "
        "knowledge_id text, knowledge_base_id text NOT NULL, content text, "
        "dimension integer NOT NULL, is_enabled boolean NOT NULL DEFAULT true, "
        "embedding halfvec NOT NULL)"
    )
    rows = []
    for i, v in enumerate(docs[:600], 1):
        rows.append((f"c{i}", "kb1", dim, i % 50 != 0, v))  # every 50th disabled
        rows.append((f"c{i}", "kb1", dim, True, v + 0.05 * rng.normal(size=dim)))  # duplicate
    for i, v in enumerate(docs[600:700], 601):
        rows.append((f"c{i}", "kb2", dim, True, v))  # other knowledge base
    for i in range(1, 101):
        rows.append((f"s{i}", "kb1", 8, True, rng.normal(size=8)))  # another dimension
    with conn.cursor().copy(
        "COPY va_wk.embeddings (chunk_id, knowledge_base_id, content, "
        "dimension, is_enabled, embedding) FROM STDIN"
    ) as cp:
        for chunk, kb, d, enabled, v in rows:
            cp.write_row((chunk, kb, f"text of {chunk}", d, enabled, vtext(v)))
    conn.execute(
        f"CREATE INDEX va_wk_hnsw_{dim} ON va_wk.embeddings USING hnsw "
        f"((embedding::halfvec({dim})) halfvec_cosine_ops) WHERE (dimension = {dim})"
    )
    conn.execute(
        "CREATE INDEX va_wk_hnsw_8 ON va_wk.embeddings USING hnsw "
        "((embedding::halfvec(8)) halfvec_cosine_ops) WHERE (dimension = 8)"
    )
    conn.execute("ANALYZE va_wk.embeddings")


def table_vectors(conn, table: str) -> tuple[list[str], np.ndarray]:
    """The vectors as stored (ids, float32 matrix): the truth for brute-force checks."""
    rows = conn.execute(f"SELECT doc_id, emb::text FROM {table}").fetchall()
    return [r[0] for r in rows], np.array(
        [np.array(r[1].strip("[]").split(","), dtype=np.float32) for r in rows]
    )


def testset(conn, name: str = "va", n_queries: int | None = None) -> int:
    """A test set over the corpus' queries (Cranfield qrels or planted neighbours), each query
    with its embedding in pgeval.query.embedding (the ``precomputed`` embedder)."""
    docs, queries, source = data()
    queries = queries[:n_queries] if n_queries else queries
    judged = qrels(len(queries), source, docs, queries)
    tid = conn.execute(
        "INSERT INTO pgeval.testset (name, content_hash, source_format, n_queries, n_judgements) "
        "VALUES (%s, %s, 'test', %s, %s) RETURNING testset_id",
        (name, f"hash-{name}", len(queries), sum(len(v) for v in judged.values())),
    ).fetchone()[0]
    with conn.cursor().copy(
        "COPY pgeval.query (testset_id, query_id, position, query_text, embedding) FROM STDIN"
    ) as cp:
        for j, v in enumerate(queries):
            cp.write_row((tid, str(j + 1), j + 1, f"query {j + 1}", vtext(v)))
    with conn.cursor().copy(
        "COPY pgeval.qrel (testset_id, query_id, chunk_id, grade) FROM STDIN"
    ) as cp:
        for qid, judged_docs in judged.items():
            for doc, grade in judged_docs.items():
                cp.write_row((tid, qid, doc, grade))
    conn.execute("SELECT pgeval.refresh_ideal(%s)", (tid,))
    return tid


def target(conn, name: str, table: str, **kw):
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    t = Target(
        name=name, table=table, id_column="doc_id", vector_column="emb", text_column="body", **kw
    )
    validate(conn, t)
    save(conn, t, replace=True)
    return t
