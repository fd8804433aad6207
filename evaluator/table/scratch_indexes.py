"""The indexes a scratch copy (:mod:`.build_sweep`) carries besides the one built on it: those
the planner could use for the application's group filter (``WHERE tenant = $2``: the tenant's
btree), so that a design measured on the copy is served per group as the table would serve it
(issue "What the application gets": the small tenants served exactly through their btree).

An index of the table is copied when it is valid, not an ANN index, not partial, and every key is
a plain column the copy has (the group column; the id column alongside it). A partial index or
one on an expression is not (its predicate or expression may name columns the copy does not
have): it is named in the copy's notes, so that a plan the copy cannot reproduce is said.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from ..targets import introspect
from ..targets.targets import ANN_METHODS


def copy(conn: Any, source: Any, schema: str, table: str, column: str) -> tuple[list, list]:
    """(the indexes copied, as ``name (method: keys)``; those not copied, and why) of the
    ``source`` target's table onto ``schema.table``, whose columns are the id, the vector and
    the group ``column``."""
    oid = conn.execute(
        "SELECT to_regclass(%s)::oid", (source.table_sql().as_string(conn),)
    ).fetchone()[0]
    if oid is None:
        return [], []
    plain = {column, source.id_column}
    copied, skipped = [], []
    for row in introspect.all_index_rows(conn, oid):
        name, method, _, valid, predicate, _, keys, *_, partition, _ = row
        if method in ANN_METHODS or not valid or column not in [_bare(k) for k in keys]:
            continue
        if partition is not None:  # a partition's: the copy's own, built on its parent, has it
            continue
        if predicate is not None or any(_bare(k) not in plain for k in keys):
            skipped.append(f"{name} ({'partial' if predicate else 'keys ' + ', '.join(keys)})")
            continue
        conn.execute(
            sql.SQL("CREATE INDEX ON {} USING {} ({})").format(
                sql.Identifier(schema, table),
                sql.Identifier(method),
                sql.SQL(", ").join(sql.Identifier(_bare(k)) for k in keys),
            )
        )
        copied.append(f"{name} ({method}: {', '.join(keys)})")
    return copied, skipped


def _bare(key: str) -> str:
    """A key definition's column name (``"Tenant"`` -> ``Tenant``); an expression is itself."""
    if len(key) > 1 and key[0] == key[-1] == '"':
        return key[1:-1].replace('""', '"')
    return key
