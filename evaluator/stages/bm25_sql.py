"""The SQL of the keyword stage: pg_textsearch BM25, or PostgreSQL full-text search.

pg_textsearch: ``SELECT id ... ORDER BY col <@> to_bm25query(q, 'index') LIMIT k`` — the bare
operator, so the BM25 index can serve the ORDER BY, and only the id (:func:`textsearch`, the timed
statement); the scores of the returned chunks come from a second, untimed statement
(:func:`textsearch_scores`). Scores are negative (lower is better). A sequential-scan plan (small
tables, or filters the planner prefers) returns the non-matching rows too, with score 0: they are
dropped, which keeps every match because the matches sort first. Several rows of one chunk
collapse to its best score.

Full-text fallback: ``ts_rank_cd(tsv, query)`` over ``to_tsvector(config, col)`` (or a stored
tsvector column), where the query is the OR of the query's lexemes (``plainto_tsquery`` ANDs
them, which finds almost nothing for natural-language questions). This is not BM25 (no IDF, no
length saturation): the run says so in ``run.params``. Its WHERE clause is
``to_tsvector('config'::regconfig, col) @@ query``: a GIN index on that expression (same
configuration) serves it; without one every query scans and parses the whole table, and the stage
says which CREATE INDEX to run (:func:`fts_index_sql`).

The full-text statement returns ``chunk_id, score, n`` (n = matching rows the statement returned, before
collapsing; chunk_id the id as text COLLATE "C", so that ties break in byte order whatever the
table's collation) ordered best first; per query the text is the parameter ``q``; in batch mode the
parameters are ``ids`` and ``texts`` (text[]) and the columns are ``query_id, chunk_id, score,
n``. Names are :class:`psycopg.sql.Identifier`, the text configuration a checked literal, filters
and query text bound parameters.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..core.ids import as_text
from ..targets import introspect

if TYPE_CHECKING:
    from ..targets.targets import Target

Q = "pgeval_q"


def bm25_indexes(kb: Any, relation_oid: int, column: str) -> list[dict]:
    """pg_textsearch (access method ``bm25``) indexes on ``column``: [{name, ref, text_config}],
    ``ref`` the (quoted, qualified when needed) name that to_bm25query accepts."""
    out = []
    for name, ref, reloptions in introspect.bm25_index_rows(kb, relation_oid, column):
        opts = dict(o.split("=", 1) for o in (reloptions or []) if "=" in o)
        out.append({"name": name, "ref": ref, "text_config": opts.get("text_config")})
    return out


_TSV_EXPR = re.compile(r"^to_tsvector\('((?:[^']|'')+)'::regconfig, (.+)\)$")


def fts_indexes(
    kb: Any, relation_oid: int, column: str | None, tsvector_column: str | None = None
) -> list[dict]:
    """GIN indexes (not partial) that can serve the full-text fallback: on
    ``to_tsvector('config', column)`` ([{name, text_config}], config as the server names it), or
    on the stored ``tsvector_column`` (text_config None)."""
    rows = introspect.gin_index_rows(kb, relation_oid)
    out = []
    quoted = kb.execute("SELECT quote_ident(%s)", (column,)).fetchone()[0] if column else None
    for name, expr, attname in rows:
        if tsvector_column:
            if attname == tsvector_column:
                out.append({"name": name, "text_config": None})
            continue
        m = _TSV_EXPR.match(expr or "")
        if m and m.group(2) == quoted:
            config = kb.execute(
                "SELECT %s::regconfig::text", (m.group(1).replace("''", "'"),)
            ).fetchone()[0]
            out.append({"name": name, "text_config": config})
    return out


def fts_index_sql(
    target: Target, column: str | None, tsvector_column: str | None, config: str, kb: Any
) -> str:
    """The CREATE INDEX that lets the full-text fallback use an index (its WHERE clause is
    ``to_tsvector('config'::regconfig, column) @@ query``, the index's expression)."""
    table = target.table_sql().as_string(kb)
    if tsvector_column:
        expr = sql.Identifier(tsvector_column).as_string(kb)
    else:
        assert column is not None  # no tsvector column: the text column is given
        expr = (
            sql.SQL("to_tsvector({}::regconfig, {})")
            .format(sql.Literal(config), sql.Identifier(column))
            .as_string(kb)
        )
    return f"CREATE INDEX ON {table} USING gin ({expr});"


def _source(target: Target, where_ph: Any) -> tuple[sql.Composable, dict]:
    """``(SELECT * FROM table WHERE filters) AS kb`` — the target's rows (flattened by the
    planner, so indexes stay usable). The keyword path has no dimension predicate: a chunk's
    text matches whatever the dimension of its vectors (as WeKnora's keyword retriever)."""
    where, params = target.where_named(ph=where_ph, vector=False)
    return sql.SQL("(SELECT * FROM {}{}) AS kb").format(target.table_sql(), where), params


def textsearch(
    target: Any, column: str, limit: int, qexpr: sql.Composable, where_ph: Any = sql.Placeholder
) -> tuple[sql.Composable, dict]:
    """pg_textsearch for one query text ``qexpr``, the statement an application runs and the
    one pgeval times: the ids in index order, ``SELECT id FROM t ORDER BY col <@>
    to_bm25query(q, idx) LIMIT k``; the index is the parameter ``idx``. It does not project the
    score: pg_textsearch serves the ORDER BY's score from its index scan, but a projected score
    is computed again by its standalone scorer, row by row (tens of times the cost of the scan);
    :func:`textsearch_scores` computes them apart, for the returned chunks only."""
    src, params = _source(target, where_ph)
    score = sql.SQL("{} <@> to_bm25query({}, {})").format(
        sql.Identifier("kb", column), qexpr, sql.Placeholder("idx")
    )
    return sql.SQL("SELECT {id} AS chunk_id FROM {src} ORDER BY {score} LIMIT {k}").format(
        id=as_text(sql.Identifier("kb", target.id_column)),
        score=score,
        src=src,
        k=sql.Literal(int(limit)),
    ), params


def textsearch_scores(
    target: Any, column: str, id_type: str, where_ph: Any = sql.Placeholder
) -> tuple[sql.Composable, dict]:
    """The BM25 score of the chunks ``%(chunks)s`` (text[]) for query text ``%(q)s``: each
    chunk's best (lowest) score over its rows under the target's filters, ``chunk_id, score``
    ordered best first, ties by chunk id. Non-matching rows score 0 (kept: the caller drops
    them). ``id_type`` is the id column's type as ``format_type`` spells it (already quoted by
    the server): the ids are cast to it so that an index on the id column serves the look-up."""
    src, params = _source(target, where_ph)
    score = sql.SQL("{} <@> to_bm25query({}, {})").format(
        sql.Identifier("kb", column), sql.Placeholder("q"), sql.Placeholder("idx")
    )
    return sql.SQL(
        "SELECT {id} AS chunk_id, min({score}) AS score FROM {src} "
        "WHERE {col} = ANY({chunks}::text[]::{typ}[]) GROUP BY 1 ORDER BY 2, 1"
    ).format(
        id=as_text(sql.Identifier("kb", target.id_column)),
        score=score,
        src=src,
        col=sql.Identifier("kb", target.id_column),
        chunks=sql.Placeholder("chunks"),
        typ=sql.SQL(id_type),
    ), params


def _tsquery(config: str, qexpr: sql.Composable) -> sql.Composable:
    """The OR of the lexemes of the query text (quoted so that the cast does not re-parse)."""
    return sql.SQL(
        "(SELECT string_agg('''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''', "
        "' | ') FROM unnest(tsvector_to_array(to_tsvector({cfg}::regconfig, {q}))) AS l)::tsquery"
    ).format(cfg=sql.Literal(config), q=qexpr)


def fulltext(
    target: Any,
    column: str | None,
    tsvector_column: str | None,
    config: str,
    limit: int,
    qexpr: sql.Composable,
    normalization: int = 0,
    where_ph: Any = sql.Placeholder,
) -> tuple[sql.Composable, dict]:
    """PostgreSQL full-text search: ts_rank_cd over ``tsvector_column`` or
    ``to_tsvector(config, column)``."""
    src, params = _source(target, where_ph)
    tsv = (
        sql.Identifier("kb", tsvector_column)
        if tsvector_column
        else sql.SQL("to_tsvector({}::regconfig, {})").format(
            sql.Literal(config),
            sql.Identifier("kb", column),  # type: ignore[arg-type]  # column is given without a tsvector column
        )
    )
    inner = sql.SQL(
        "SELECT {id} AS chunk_id, ts_rank_cd({tsv}, tq.q, {norm})::float8 AS score "
        "FROM {src} CROSS JOIN (SELECT {tsq} AS q) AS tq WHERE {tsv} @@ tq.q "
        "ORDER BY 2 DESC, 1 LIMIT {k}"
    ).format(
        id=as_text(sql.Identifier("kb", target.id_column)),
        tsv=tsv,
        norm=sql.Literal(int(normalization)),
        src=src,
        tsq=_tsquery(config, qexpr),
        k=sql.Literal(int(limit)),
    )
    return sql.SQL(
        "SELECT s.chunk_id, max(s.score) AS score, (sum(count(*)) OVER ())::int AS n "
        "FROM ({}) s GROUP BY s.chunk_id"
    ).format(inner), params


def per_query(body: sql.Composable, method: str) -> sql.Composable:
    """One query's statement: pg_textsearch's ids as they are; full-text search ranked."""
    if method == "pg_textsearch":
        return body
    return sql.SQL("SELECT chunk_id, score, n FROM ({}) r ORDER BY score DESC, chunk_id").format(
        body
    )


def batch(body: sql.Composable, method: str) -> sql.Composable:
    """All queries in one statement: ``unnest(ids, texts) CROSS JOIN LATERAL (body)``; ``body``
    must use ``pgeval_q.qtext`` as its query text. Full-text search: columns query_id, chunk_id,
    score, n; pg_textsearch: query_id, chunk_id in index order (no score, as per query)."""
    if method == "pg_textsearch":
        return sql.SQL(
            "SELECT {q}.query_id, r.chunk_id "
            "FROM unnest(%(ids)s::text[], %(texts)s::text[]) WITH ORDINALITY AS "
            "{q}(query_id, qtext, ord) CROSS JOIN LATERAL ({body}) r"
        ).format(q=sql.Identifier(Q), body=body)
    return sql.SQL(
        "SELECT {q}.query_id, r.chunk_id, r.score, r.n "
        "FROM unnest(%(ids)s::text[], %(texts)s::text[]) WITH ORDINALITY AS {q}(query_id, qtext, ord) "
        "CROSS JOIN LATERAL ({body}) r ORDER BY {q}.ord, r.score DESC, r.chunk_id"
    ).format(q=sql.Identifier(Q), body=body)


def batch_text() -> sql.Composable:
    return sql.SQL("{}.qtext").format(sql.Identifier(Q))
