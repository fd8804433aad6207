"""The SQL of the vector stages (``registry.vector_kinds()``): one statement per query, or one
set-based statement for all queries (``--batch``). Both order the index scan by the *bare*
distance operator (``ORDER BY embedding <=> $1 LIMIT k``): an expression such as
``ORDER BY 1 - (embedding <=> $1) DESC`` can never use an index. The outer query re-sorts the
candidates by exact distance and chunk id (DiskANN and iterative scans return them in relaxed
order) and collapses several rows of one chunk to its best distance. The re-sort orders by
``dist + 0``: ordering by ``dist`` itself lets the planner trust the index's (relaxed) order as a
presorted key and only sort ties — exactly the bug a relaxed scan exposes.
"""

from __future__ import annotations

from itertools import islice
from operator import lt
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..core.ids import as_text
from . import refetch

if TYPE_CHECKING:
    from ..targets.targets import Target

Q = "pgeval_q"
# hnsw-bq without bq.candidates: this many Hamming candidates per row kept (pgvector's README
# re-ranks 20 for a LIMIT of 5)
BQ_CANDIDATES_PER_ROW = (
    4  # alias of the query list in batch mode (unlikely to clash with user columns)
)


class Dollar:
    """Placeholders ``$1, $2, ...`` for a generic plan (``EXPLAIN (GENERIC_PLAN)``, or
    ``PREPARE`` on servers before 16); ``names`` lists the parameters in ``$n`` order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, name: str) -> sql.Composable:
        if name not in self.names:
            self.names.append(name)
        return sql.SQL("$" + str(self.names.index(name) + 1))


def inner(
    target: Target,
    depth: int,
    qparam: sql.Composable,
    ph: Any = sql.Placeholder,
    cast: bool = True,
    candidates: int | None = None,
) -> tuple[sql.Composable, dict]:
    """``SELECT id::text COLLATE "C" AS chunk_id, dist FROM t WHERE ... ORDER BY <bare operator>
    LIMIT k`` (chunk ids in byte order for every tie-break above, whatever the table's collation).
    A search of a quantized copy (``search_type`` bit): :func:`binary_quantized`."""
    if target.searched.quantized:
        return binary_quantized(
            target, depth, qparam, ph, cast, candidates or BQ_CANDIDATES_PER_ROW * depth
        )
    dist = target.distance_expr(qparam, cast=cast)
    where, params = target.where_named(ph=ph)
    # a kind that searches a cast (hnsw-halfvec) also returns each row's full-precision
    # distance: the one exact search and index recall compare (the order stays the cast one)
    full: sql.Composable = (
        sql.SQL(", {} AS full_dist").format(target.native().distance_expr(qparam, cast=cast))
        if target.search_type
        else sql.SQL("")
    )
    stmt = sql.SQL(
        "SELECT {id} AS chunk_id, {dist} AS dist{full} FROM {table}{where} "
        "ORDER BY {dist} LIMIT {k}"
    ).format(
        id=as_text(sql.Identifier(target.id_column)),
        dist=dist,
        full=full,
        table=target.table_sql(),
        where=where,
        k=sql.Literal(int(depth)),
    )
    return stmt, params


def binary_quantized(
    target: Target, depth: int, qparam: sql.Composable, ph: Any, cast: bool, candidates: int
) -> tuple[sql.Composable, dict]:
    """pgvector's README, "Binary Quantization": the ``candidates`` nearest by Hamming distance
    of ``binary_quantize(col)::bit(N)`` (an index on that expression serves it), re-ranked by the
    full vector's distance, cut at ``depth``: columns chunk_id, dist (full precision)."""
    where, params = target.where_named(ph=ph)
    stmt = sql.SQL(
        "SELECT s.chunk_id, s.dist FROM (SELECT {id} AS chunk_id, {full} AS dist FROM "
        "{table}{where} ORDER BY {hamming} LIMIT {candidates}) s ORDER BY s.dist LIMIT {k}"
    ).format(
        id=as_text(sql.Identifier(target.id_column)),
        full=target.native().distance_expr(qparam, cast=cast),
        table=target.table_sql(),
        where=where,
        hamming=target.distance_expr(qparam),  # binary_quantize(col)::bit(N) <~> ... of $1
        candidates=sql.Literal(int(candidates)),
        k=sql.Literal(int(depth)),
    )
    return stmt, params


def _ranked(
    target: Any,
    depth: int,
    qparam: Any,
    ph: Any,
    cast: bool,
    exact: bool,
    overfetch: float,
    with_n: bool,
    fetch: int | None = None,
) -> tuple[sql.Composable, dict, bool]:
    """The ranked list of one query: columns chunk_id, dist[, n]; returns (sql, params, has_n).

    - unique chunk ids: the index scan's top ``depth`` rows, re-sorted;
    - several rows per chunk, ANN: the scan's top ``fetch`` rows (default
      :func:`evaluator.stages.refetch.fetch_limit`) collapsed to each chunk's best distance, cut
      at ``depth`` (``n`` = rows the scan returned: fewer than ``fetch``, the scan is exhausted);
    - several rows per chunk, exact: every row grouped by chunk, the best ``depth`` chunks (the
      true ceiling, whatever the duplication).
    """
    k = sql.Literal(int(depth))
    if target.unique_id:
        body, params = inner(target, depth, qparam, ph, cast)
        n: sql.Composable = sql.SQL(", (count(*) OVER ())::int AS n") if with_n else sql.SQL("")
        return (
            sql.SQL(
                "SELECT s.chunk_id, s.dist{} FROM ({}) s ORDER BY s.dist + 0, s.chunk_id"
            ).format(n, body),
            params,
            with_n,
        )
    if exact:
        dist = target.distance_expr(qparam, cast=cast)
        where, params = target.where_named(ph=ph)
        n = (
            sql.SQL(", (least(count(*) OVER (), {}))::int AS n").format(k)
            if with_n
            else sql.SQL("")
        )
        return (
            sql.SQL(
                "SELECT {id} AS chunk_id, min({dist}) AS dist{n} FROM {table}{where} "
                "GROUP BY 1 ORDER BY 2, 1 LIMIT {k}"
            ).format(
                id=as_text(sql.Identifier(target.id_column)),
                dist=dist,
                n=n,
                table=target.table_sql(),
                where=where,
                k=k,
            ),
            params,
            with_n,
        )
    body, params = inner(target, fetch or refetch.fetch_limit(depth, overfetch), qparam, ph, cast)
    return (
        sql.SQL(
            "SELECT s.chunk_id, min(s.dist) AS dist, (sum(count(*)) OVER ())::int AS n "
            "FROM ({}) s GROUP BY s.chunk_id ORDER BY 2, 1 LIMIT {}"
        ).format(body, k),
        params,
        True,
    )


def _past(stmt: sql.Composable, params: dict, ph: Any, threshold: float | None) -> Any:
    """The ranked list with a last column ``past``: the result lies past the threshold (the
    application drops it). Distances are sorted, so the results past it are the list's tail."""
    if threshold is None:
        return stmt, params
    return sql.SQL(
        "SELECT t.chunk_id, t.dist, t.n, t.dist > {}::float8 AS past FROM ({}) t "
        "ORDER BY t.dist + 0, t.chunk_id"
    ).format(ph("thr"), stmt), dict(params, thr=float(threshold))


def per_query(
    target: Any,
    depth: int,
    ph: Any = sql.Placeholder,
    *,
    exact: bool = False,
    overfetch: float = 1.0,
    threshold: float | None = None,
    fetch: int | None = None,
) -> tuple[sql.Composable, dict, bool]:
    """One query's ranked list (parameter ``q``): columns chunk_id, dist[, n = rows the scan
    returned]; the third value says whether ``n`` is there (else n = rows fetched). With a
    ``threshold`` (a bound on the distance: :meth:`Target.max_distance`), ``n`` is always there
    and a fourth column ``past`` says the result lies past it (parameter ``thr``). ``fetch``:
    the LIMIT of the index scan when several rows share a chunk (:mod:`.refetch`). A target
    defined by the application's statement: that statement (columns by name, ranked after)."""
    if _own_statement(target):
        return _statement(target, ph)
    stmt, params, has_n = _ranked(
        target, depth, ph("q"), ph, True, exact, overfetch, threshold is not None, fetch
    )
    stmt, params = _past(stmt, params, ph, threshold)
    return stmt, params, has_n


def _own_statement(target: Any) -> bool:
    return getattr(target, "statement_template", None) is not None


def _statement(target: Any, ph: Any) -> tuple[sql.Composable, dict, bool]:
    """The application's statement (:mod:`.statement_sql`), as :func:`per_query` returns one."""
    from . import statement_sql

    stmt, params = statement_sql.application(target, ph, dollar=isinstance(ph, Dollar))
    return stmt, params, False


def application(
    target: Any, depth: int, ph: Any = sql.Placeholder, **kw: Any
) -> tuple[sql.Composable, dict, bool]:
    """The statement a stage times for one query, as :func:`per_query` returns it. With unique
    chunk ids it is the application's own, the bare index-ordered :func:`inner` (columns
    chunk_id, dist): its rows are ranked by (distance, chunk id), and the threshold applied,
    after the timing (:func:`ranked_rows`); a wrapper doing that in SQL measured 1.03-1.04x the
    bare statement's round trip (20,000 x 384 HNSW, top 100, interleaved). Several rows per
    chunk: :func:`per_query` (``kw``: its keywords), which collapses them in SQL. A target defined
    by the application's statement: that statement (:mod:`.statement_sql`)."""
    candidates = kw.pop("candidates", None)
    if _own_statement(target):  # target add --statement
        return _statement(target, ph)
    if target.unique_id:
        stmt, params = inner(target, depth, ph("q"), ph, True, candidates)
        return stmt, params, False
    return per_query(target, depth, ph, **kw)


def _rank_key(row: tuple) -> tuple:
    """PostgreSQL's ``ORDER BY dist + 0, chunk_id COLLATE "C"``: distances ascending, NaN after
    every number, NULL last; ties by chunk id in byte order (Python's str order is code-point
    order, which is UTF-8 byte order)."""
    d = row[1]
    if d is None:
        return (2, 0.0, row[0])
    if d != d:
        return (1, 0.0, row[0])
    return (0, d, row[0])


def ranked_rows(
    rows: list, threshold: float | None = None, limit: int | None = None
) -> tuple[list, int]:
    """(rows ranked by (distance, chunk id) and cut at the threshold, how many it dropped) of
    the bare statement's rows (chunk_id, dist), in the order the scan emitted them. A list whose
    distances strictly ascend, as an HNSW scan returns them, is already ranked (checked at C
    speed); ties, relaxed orders (DiskANN, iterative scans), NaN or NULL distances are sorted.

    ``limit``: the application's LIMIT, for a scan that may emit rows out of order: its first
    ``limit`` rows are what ``LIMIT limit`` returns, ranked among themselves, then the rest
    (ranked), so that the list's first ``limit`` rows are the application's (a closer row the
    scan emits later is not among them)."""
    if limit is not None and 0 < limit < len(rows):
        rows = _in_rank_order(rows[:limit]) + _in_rank_order(rows[limit:])
    else:
        rows = _in_rank_order(rows)
    if threshold is None:
        return rows, 0
    # PostgreSQL: NaN > any number (past the threshold), NULL > x is NULL (kept)
    kept = [r for r in rows if r[1] is None or not (r[1] != r[1] or r[1] > threshold)]
    return kept, len(rows) - len(kept)


def _in_rank_order(rows: list) -> list:
    dists = [r[1] for r in rows]
    try:
        ranked = all(map(lt, dists, islice(dists, 1, None)))
    except TypeError:  # a NULL distance
        ranked = False
    return rows if ranked else sorted(rows, key=_rank_key)


def refetches(target: Any, exact: bool) -> bool:
    """Whether a query short of depth chunks may get more by a larger LIMIT: several rows per
    chunk under an index scan (exact search groups every row already)."""
    if _own_statement(target):  # the statement's own LIMIT
        return False
    return not target.unique_id and not exact


def batch(
    target: Any,
    depth: int,
    *,
    exact: bool = False,
    overfetch: float = 1.0,
    threshold: float | None = None,
    fetch: int | None = None,
) -> tuple[sql.Composable, dict]:
    """All queries at once: ``unnest(ids, vectors) CROSS JOIN LATERAL (per-query)``; columns
    query_id, chunk_id, dist, n, rk, past (false without a ``threshold``); parameters ``ids``
    (text[]) and ``vecs`` (vector[]: a list of numpy arrays, sent in binary once pgvector's
    adapters are registered)."""
    # the query vector is converted once per query (in the unnest), never once per scanned row
    lateral, params, _ = _ranked(
        target,
        depth,
        sql.SQL("{}.emb").format(sql.Identifier(Q)),
        sql.Placeholder,
        False,
        exact,
        overfetch,
        True,
        fetch,
    )
    past = (
        sql.SQL("g.dist > {}::float8").format(sql.Placeholder("thr"))
        if threshold is not None
        else sql.SQL("false")
    )
    if threshold is not None:
        params = dict(params, thr=float(threshold))
    # ranks come from the window's ORDER BY (distance, chunk id) inside each query's lateral;
    # no statement-level sort, so that rows stream out query by query while the next queries
    # are still being searched (the nested loop emits them in query order)
    stmt = sql.SQL(
        "SELECT {q}.query_id, r.chunk_id, r.dist, r.n, r.rk, r.past "
        "FROM (SELECT u.query_id, {qexpr} AS emb, u.ord FROM unnest(%(ids)s::text[], "
        "%(vecs)s::vector[]) WITH ORDINALITY AS u(query_id, emb, ord) OFFSET 0) {q} "
        "CROSS JOIN LATERAL (SELECT g.chunk_id, g.dist, g.n, "
        "row_number() OVER (ORDER BY g.dist + 0, g.chunk_id) AS rk, {past} AS past "
        "FROM ({lateral}) g) r"
    ).format(
        q=sql.Identifier(Q), lateral=lateral, qexpr=target.query_expr(sql.SQL("u.emb")), past=past
    )
    return stmt, params
