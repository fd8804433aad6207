"""The SQL of the rerank stage, on the knowledge base: the candidates' texts, or their exact
full-precision distance to the query. Candidates are looked up by chunk id in the id column's own
type (so that its index serves the lookup), within the target's filters; several rows of one
chunk give its first text, or its best distance."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..core.errors import InputError, param
from ..core.ids import as_text

if TYPE_CHECKING:
    from ..targets.targets import Target


def columns(kb: Any, target: Target) -> dict[str, tuple[str, str, int]]:
    """name -> (type name, formatted type, typmod) of the target's table ({}: it is gone)."""
    from ..targets.catalog import column_types
    from .vector_common import relation_oid

    return column_types(kb, relation_oid(kb, target))


def _source(
    target: Target, id_type: str, vector: bool = True
) -> tuple[sql.Composable, sql.Composable, dict]:
    where, params = target.where_named(vector=vector)  # texts: no dimension predicate
    src = sql.SQL("(SELECT * FROM {}{}) AS kb").format(target.table_sql(), where)
    match = sql.SQL("kb.{} = ANY(%(ids)s::text[]::{}[])").format(
        sql.Identifier(target.id_column), sql.SQL(id_type)
    )
    return src, match, params


def texts(target: Target, text_column: str, id_type: str) -> tuple[sql.Composable, dict]:
    """``chunk_id, text`` of the chunk ids in parameter ``ids``."""
    src, match, params = _source(target, id_type, vector=False)
    stmt = sql.SQL(
        "SELECT DISTINCT ON (kb.{id}) kb.{id}::text, kb.{col} FROM {src} WHERE {match} "
        "ORDER BY kb.{id}"
    ).format(
        id=sql.Identifier(target.id_column), col=sql.Identifier(text_column), src=src, match=match
    )
    return stmt, params


def distances(target: Target, id_type: str) -> tuple[sql.Composable, dict]:
    """``chunk_id, distance`` (the target's operator, full precision) for parameters ``ids`` and
    ``q`` (the query vector)."""
    src, match, params = _source(target, id_type)
    stmt = sql.SQL("SELECT {id}, min({dist}) FROM {src} WHERE {match} GROUP BY 1").format(
        id=as_text(sql.Identifier("kb", target.id_column)),
        dist=target.distance_expr(sql.Placeholder("q"), "kb"),
        src=src,
        match=match,
    )
    return stmt, params


def exact_target(kb: Any, target: Target, column: str | None) -> Target:
    """The target re-scored on ``column`` (default: its vector column), typed from the catalog."""
    cols = columns(kb, target)
    col = column or target.vector_column
    if col not in cols:
        raise InputError(
            f"column '{col}' does not exist in {target.qualified()}", field=param("options")
        )
    typ = cols[col][0]
    if typ not in ("vector", "halfvec"):
        raise InputError(
            f"column '{col}' of {target.qualified()} is {cols[col][1]}, not a vector or halfvec",
            field=param("options"),
        )
    if col == target.vector_column:
        return target
    return replace(target, vector_column=col, vector_type=typ)
