"""Small knowledge bases for the robustness tests (bad inputs, injection, least privilege, resume,
concurrency, faults). Seeded random vectors with a planted neighbour structure; judgements are
each query's exact nearest neighbours, so every stage has something to find and to lose.

Tables are built once per test session (idempotent); test sets are rebuilt after ``clean``.
"""

from __future__ import annotations

import numpy as np
from helpers import make_testset
from psycopg import sql


def vec_text(v) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in v) + "]"


def vectors(n_rows: int, n_queries: int, dim: int, seed: int = 11):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(max(4, n_rows // 50), dim))
    docs = centers[rng.integers(0, len(centers), n_rows)] + 0.5 * rng.normal(size=(n_rows, dim))
    queries = centers[rng.integers(0, len(centers), n_queries)] + 0.5 * rng.normal(
        size=(n_queries, dim)
    )
    return docs.astype(np.float32), queries.astype(np.float32)


def ensure_table(
    conn,
    table: str,
    n_rows: int = 300,
    dim: int = 8,
    *,
    hnsw: bool = True,
    seed: int = 11,
    schema: str | None = None,
    id_col: str = "id",
    vec_col: str = "embedding",
    text_col: str = "body",
) -> None:
    """``table(id text primary key, embedding vector(dim), body text)`` with an HNSW index."""
    name = sql.Identifier(schema, table) if schema else sql.Identifier(table)
    if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name.as_string(conn),)).fetchone()[0]:
        return
    docs, _ = vectors(n_rows, 1, dim, seed)
    conn.execute(
        sql.SQL("CREATE TABLE {} ({} text PRIMARY KEY, {} vector({}), {} text)").format(
            name,
            sql.Identifier(id_col),
            sql.Identifier(vec_col),
            sql.Literal(dim),
            sql.Identifier(text_col),
        )
    )
    with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(name)) as cp:
        for i, v in enumerate(docs, 1):
            cp.write_row((f"c{i}", vec_text(v), f"document {i}"))
    if hnsw:
        conn.execute(
            sql.SQL("CREATE INDEX ON {} USING hnsw ({} vector_cosine_ops)").format(
                name, sql.Identifier(vec_col)
            )
        )
    conn.execute(sql.SQL("ANALYZE {}").format(name))


def ensure_testset(
    conn,
    name: str,
    table: str,
    n_queries: int = 20,
    dim: int = 8,
    *,
    n_rows: int = 300,
    seed: int = 11,
    per_query: int = 3,
) -> int:
    """A test set whose query embeddings (pgeval.query.embedding, embedder ``precomputed``)
    come from the same distribution as ``table``; judged: the ``per_query`` exact nearest
    neighbours by cosine distance, graded 3, 2, 1."""
    row = conn.execute("SELECT testset_id FROM pgeval.testset WHERE name = %s", (name,)).fetchone()
    if row is not None:
        return row[0]
    docs, queries = vectors(n_rows, n_queries, dim, seed)
    d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    top = np.argsort(-(q @ d.T), axis=1)[:, :per_query]
    qrels = {
        f"q{j + 1}": {f"c{i + 1}": 3 - k for k, i in enumerate(row)} for j, row in enumerate(top)
    }
    embeddings = {f"q{j + 1}": queries[j] for j in range(n_queries)}
    return make_testset(conn, name, qrels, embeddings=embeddings, content_hash=f"hash-{name}")


def add_target(
    conn,
    name: str,
    table: str,
    *,
    schema: str | None = None,
    id_col: str = "id",
    vec_col: str = "embedding",
    text_col: str | None = "body",
):
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    t = Target(
        name=name,
        table=table,
        schema=schema,
        id_column=id_col,
        vector_column=vec_col,
        text_column=text_col,
        distance="cosine",
    )
    validate(conn, t)
    save(conn, t, replace=True)
    return t


def pgeval_counts(conn) -> dict[str, int]:
    """Row count of every table of schema pgeval (the 'database unchanged' check)."""
    names = [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'pgeval' AND c.relkind IN ('r', 'p') ORDER BY 1"
        ).fetchall()
    ]
    return {
        t: conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("pgeval", t))
        ).fetchone()[0]
        for t in names
    }


def dsn(
    database, user: str | None = None, dbname: str | None = None, password: str | None = None
) -> str:
    """A URI to the embedded server (its unix socket) as ``user`` on ``dbname``."""
    from urllib.parse import parse_qs, quote, urlparse

    uri = urlparse(database.uri())
    socket = parse_qs(uri.query)["host"][0]
    auth = (user or uri.username) + (f":{quote(password)}" if password else "")
    return f"postgresql://{auth}@/{dbname or uri.path.lstrip('/')}?host={quote(socket)}"


def fresh_database(conn, name: str) -> None:
    """Drop (if present) and create database ``name`` on the server of ``conn`` (autocommit)."""
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
