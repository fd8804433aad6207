"""The SQL of the vector stages (exact, hnsw, ivfflat, diskann): one statement per query, or one
set-based statement for all queries (``--batch``). Both order the index scan by the *bare*
distance operator (``ORDER BY embedding <=> $1 LIMIT k``): an expression such as
``ORDER BY 1 - (embedding <=> $1) DESC`` can never use an index. The outer query re-sorts the
candidates by exact distance and chunk id (DiskANN and iterative scans return them in relaxed
order) and collapses several rows of one chunk to its best distance. The re-sort orders by
``dist + 0``: ordering by ``dist`` itself lets the planner trust the index's (relaxed) order as a
presorted key and only sort ties — exactly the bug a relaxed scan exposes.
"""

from __future__ import annotations

from psycopg import sql

Q = "pgeval_q"   # alias of the query list in batch mode (unlikely to clash with user columns)


class Dollar:
    """Placeholders ``$1, $2, ...`` for ``EXPLAIN (GENERIC_PLAN)`` (no values bound)."""

    def __init__(self):
        self.names: list[str] = []

    def __call__(self, name: str) -> sql.Composable:
        if name not in self.names:
            self.names.append(name)
        return sql.SQL("$" + str(self.names.index(name) + 1))


def inner(target, depth: int, qparam: sql.Composable, ph=sql.Placeholder,
          cast: bool = True) -> tuple[sql.Composable, dict]:
    """``SELECT id::text AS chunk_id, dist FROM t WHERE ... ORDER BY <bare operator> LIMIT k``."""
    dist = target.distance_expr(qparam, cast=cast)
    where, params = target.where_named(ph=ph)
    stmt = sql.SQL("SELECT {id}::text AS chunk_id, {dist} AS dist FROM {table}{where} "
                   "ORDER BY {dist} LIMIT {k}").format(
        id=sql.Identifier(target.id_column), dist=dist, table=target.table_sql(), where=where,
        k=sql.Literal(int(depth)))
    return stmt, params


def per_query(target, depth: int, ph=sql.Placeholder) -> tuple[sql.Composable, dict]:
    """One query's ranked list: columns chunk_id, dist[, n = rows the scan returned]."""
    body, params = inner(target, depth, ph("q"), ph)
    if target.unique_id:
        return sql.SQL("SELECT s.chunk_id, s.dist FROM ({}) s ORDER BY s.dist + 0, s.chunk_id").format(
            body), params
    return sql.SQL("SELECT s.chunk_id, min(s.dist) AS dist, (sum(count(*)) OVER ())::int AS n "
                   "FROM ({}) s GROUP BY s.chunk_id ORDER BY 2, 1").format(body), params


def batch(target, depth: int) -> tuple[sql.Composable, dict]:
    """All queries at once: ``unnest(ids, vectors) CROSS JOIN LATERAL (per-query)``; columns
    query_id, chunk_id, dist, n; parameters ``ids`` (text[]) and ``vecs`` (text[] of vectors)."""
    # the query vector is converted once per query (in the unnest), never once per scanned row
    body, params = inner(target, depth, sql.SQL("{}.emb").format(sql.Identifier(Q)), cast=False)
    if target.unique_id:
        lateral = sql.SQL("SELECT s.chunk_id, s.dist, (count(*) OVER ())::int AS n "
                          "FROM ({}) s").format(body)
    else:
        lateral = sql.SQL("SELECT s.chunk_id, min(s.dist) AS dist, "
                          "(sum(count(*)) OVER ())::int AS n FROM ({}) s "
                          "GROUP BY s.chunk_id").format(body)
    stmt = sql.SQL(
        "SELECT {q}.query_id, r.chunk_id, r.dist, r.n "
        "FROM (SELECT u.query_id, {qexpr} AS emb, u.ord FROM unnest(%(ids)s::text[], "
        "%(vecs)s::text[]) WITH ORDINALITY AS u(query_id, emb, ord) OFFSET 0) {q} "
        "CROSS JOIN LATERAL ({lateral}) r ORDER BY {q}.ord, r.dist + 0, r.chunk_id").format(
        q=sql.Identifier(Q), lateral=lateral, qexpr=target.query_expr(sql.SQL("u.emb")))
    return stmt, params


def vector_text(vec) -> str:
    return "[" + ",".join(repr(float(x)) for x in vec) + "]"
