"""pgeval.query_embedding: compute once per (test set, embedder), read back for every run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.db import dict_rows
from ...core.errors import InputError, NotFound, param
from ...core.vector_literal import vector_literal
from ...testset.query import Query

if TYPE_CHECKING:
    from collections.abc import Callable

    from . import Embedder

EMBED_LOCK = 1885824373  # first key of the advisory lock that serialises storing embeddings


@dataclass
class EmbedReport:
    testset: str
    embedder: str
    dimension: int
    queries: int
    computed: int  # 0 when every query already had an embedding under this label


def testset_id(conn: Any, name: str) -> int:
    from ...testset.catalog import resolve_testset

    return resolve_testset(conn, name)[0]


def _vec(value: object) -> np.ndarray | None:
    if value is None:
        return None
    if isinstance(value, bytes):  # pgvector's binary form: dimensions (int16), unused, floats
        dim = int.from_bytes(value[:2], "big")
        if len(value) != 4 + 4 * dim:
            raise ValueError(f"not a vector's binary form ({len(value)} bytes for {dim} dims)")
        return np.frombuffer(value, dtype=">f4", offset=4).astype(np.float32)
    if isinstance(value, str):
        return np.array(value.strip("[]").split(","), dtype=np.float32)
    if hasattr(value, "to_numpy"):
        return np.asarray(value.to_numpy(), dtype=np.float32)
    return np.asarray(value, dtype=np.float32)


def testset_queries(conn: Any, tid: int, with_embedding: bool = False) -> list[Query]:
    """The test set's queries in test-set order (text; the loaded embedding when asked)."""
    # the embeddings in binary (pgvector's, read as bytes where the type is not registered:
    # 8 times cheaper than parsing the text of 100 x 384 floats)
    cols = "query_id, position, query_text" + (", embedding" if with_embedding else "")
    rows = (
        conn.cursor(binary=with_embedding)
        .execute(f"SELECT {cols} FROM pgeval.query WHERE testset_id = %s ORDER BY position", (tid,))
        .fetchall()
    )
    return [
        Query(
            query_id=r[0],
            position=r[1],
            text=r[2],
            embedding=_vec(r[3]) if with_embedding else None,
        )
        for r in rows
    ]


def stored_count(conn: Any, tid: int, label: str) -> tuple[int, int | None]:
    n, dim = conn.execute(
        "SELECT count(*), max(dim) FROM pgeval.query_embedding WHERE "
        "testset_id = %s AND embedder = %s",
        (tid, label),
    ).fetchone()
    return n, dim


def ensure(
    conn: Any,
    testset: str,
    embedder: Embedder,
    *,
    recompute: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> EmbedReport:
    """Store the embeddings of ``testset``'s queries under ``embedder.label`` unless every query
    already has one (``recompute`` replaces them). One transaction: all or nothing."""
    tid = testset_id(conn, testset)
    n = conn.execute("SELECT count(*) FROM pgeval.query WHERE testset_id = %s", (tid,)).fetchone()[
        0
    ]
    if n == 0:
        raise InputError(f"test set '{testset}' has no queries", field=param("testset"))
    have, dim = stored_count(conn, tid, embedder.label)
    if have == n and not recompute:  # stored already: read nothing more
        assert dim is not None  # n > 0 stored rows have a dimension
        return EmbedReport(testset, embedder.label, dim, n, 0)
    queries = testset_queries(conn, tid, with_embedding=embedder.label == "precomputed")
    kwargs = (
        {"on_batch": on_batch}
        if on_batch and embedder.label.split(":")[0] in ("openai", "local")
        else {}
    )
    matrix = embedder.embed(queries, **kwargs)
    dim = int(matrix.shape[1])
    with conn.transaction():
        # two pipelines starting at once both find the embeddings missing: one writes them, the
        # other waits here, then keeps what the first stored (no duplicate key)
        conn.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
            (EMBED_LOCK, f"{tid}:{embedder.label}"),
        )
        written = recompute or stored_count(conn, tid, embedder.label)[0] != n
        if written:
            conn.execute(
                "DELETE FROM pgeval.query_embedding WHERE testset_id = %s AND embedder = %s",
                (tid, embedder.label),
            )
            with conn.cursor().copy(
                "COPY pgeval.query_embedding (testset_id, query_id, "
                "embedder, dim, embedding) FROM STDIN"
            ) as copy:
                for q, row in zip(queries, matrix):
                    vec = vector_literal(row)
                    copy.write_row((tid, q.query_id, embedder.label, dim, vec))
    if not conn.autocommit:
        conn.commit()
    return EmbedReport(testset, embedder.label, dim, len(queries), len(queries) if written else 0)


def load(conn: Any, tid: int, label: str) -> list[Query]:
    """Queries of test set ``tid`` in order, each with its embedding under ``label``.

    Two index scans joined here by query id, not one join in SQL: the tables are written in
    bulk just before a run reads them, and with statistics that autovacuum has not refreshed
    yet the planner chose a nested loop comparing every pair (55 ms for 1,000 queries, against
    a few ms for the two scans)."""
    from ...core.vector_types import register_vector

    register_vector(conn)
    queries = conn.execute(
        "SELECT query_id, position, query_text FROM pgeval.query WHERE testset_id = %s "
        "ORDER BY position",
        (tid,),
    ).fetchall()
    vectors = _vectors(conn, tid, label)
    missing = [r[0] for r in queries if vectors.get(r[0]) is None]
    if missing:
        raise NotFound(
            f"{len(missing)} queries have no embedding '{label}' (first: "
            f"'{missing[0]}'): run `pgeval embed --embedder ...` first"
        )
    return [
        Query(query_id=q, position=pos, text=text, embedding=vectors[q]) for q, pos, text in queries
    ]


def _vectors(conn: Any, tid: int, label: str) -> dict[str, np.ndarray | None]:
    """{query id: embedding} of a test set under ``label``: every vector in one ``bytea`` of
    their binary forms (``vector_send``: dimension, a reserved word, float4 values, big-endian),
    read as one numpy array; vectors of several dimensions come one by one instead."""
    ids, blob, dims = (
        conn.cursor(binary=True)
        .execute(
            "SELECT array_agg(query_id ORDER BY query_id), "
            "string_agg(vector_send(embedding), ''::bytea ORDER BY query_id), "
            "array_agg(DISTINCT vector_dims(embedding)) FROM pgeval.query_embedding "
            "WHERE testset_id = %s AND embedder = %s",
            (tid, label),
        )
        .fetchone()
    )
    if not ids:
        return {}
    if len(dims) == 1:
        item = np.dtype([("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (dims[0],))])
        matrix = np.frombuffer(blob, item)["v"].astype(np.float32)
        return dict(zip(ids, matrix))
    rows = conn.cursor(binary=True).execute(  # a binary cursor: raw float4, no text to parse
        "SELECT query_id, embedding FROM pgeval.query_embedding WHERE testset_id = %s "
        "AND embedder = %s",
        (tid, label),
    )
    return {q: _vec(v) for q, v in rows}


def list_embeddings(conn: Any, testset: str | None = None) -> list[dict]:
    return dict_rows(
        conn,
        "SELECT t.name AS testset, e.embedder, max(e.dim) AS dimension, count(*) AS queries, "
        "max(e.created_at) AS created_at FROM pgeval.query_embedding e JOIN pgeval.testset t "
        "USING (testset_id) WHERE %(t)s::text IS NULL OR t.name = %(t)s GROUP BY 1, 2 ORDER BY 1, 2",
        {"t": testset},
    )
