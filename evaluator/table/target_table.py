"""The target's table as the catalog and the target define it: its oid, the vector column's type and
the WHERE clause of its rows. Read by the fingerprint, the data checksum, health and warm-up."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from ..core.errors import NotFound


def resolve_table(conn: Any, target: Any) -> int:
    """The oid of the target's table; NotFound names the table."""
    oid = conn.execute(
        "SELECT to_regclass(%s)::oid", (target.table_sql().as_string(conn),)
    ).fetchone()[0]
    if oid is None:
        raise NotFound(
            f"table '{target.qualified()}' of target '{target.name}' does not exist "
            "in the knowledge base"
        )
    return int(oid)


def row_count(conn: Any, target: Any) -> int:
    """The target's rows (its filters applied)."""
    where, params = target.where()
    stmt = sql.SQL("SELECT count(*) FROM {}{}").format(target.table_sql(), where)
    return int(conn.execute(stmt, params).fetchone()[0])


def and_where(target: Any, cond: sql.Composable | None = None) -> tuple[sql.Composable, list]:
    """The target's WHERE clause (filters, dimension predicate) with ``cond`` added."""
    where, params = target.where()
    if cond is None:
        return where, params
    if target.filters or target.dimension_column:
        return sql.SQL("{} AND ({})").format(where, cond), params
    return sql.SQL(" WHERE ({})").format(cond), params


def vector_column(conn: Any, table_oid: int, column: str) -> dict:
    row = conn.execute(
        "SELECT format_type(a.atttypid, a.atttypmod), t.typname, a.atttypmod, t.typsend::text "
        "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = %s AND a.attname = %s AND NOT a.attisdropped",
        (table_oid, column),
    ).fetchone()
    if row is None:
        raise NotFound(f"column '{column}' does not exist in the target's table")
    formatted, typname, typmod, send = row
    dim = typmod if typname in ("vector", "halfvec", "sparsevec") and typmod > 0 else None
    return {"type": formatted, "base_type": typname, "dimension": dim, "send": send}
