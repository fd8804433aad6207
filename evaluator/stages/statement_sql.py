"""The statement a vector stage runs for a target defined by the application's statement
(``target add --statement``, target/statement.py): that statement as written, its ``$1`` bound
to the query vector and ``$2`` to the group's value (a captured shape's: each query's own
values, :func:`bound`); its rows read by column name (the target's id column, ``distance``, or
for a captured shape without one the distance read after the timing, :func:`with_distances`)
and ranked by (distance, chunk id) after the timing, each chunk once (its best distance), as
the stages rank every list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from ..core.errors import InputError, param
from ..targets import statement as stmt

if TYPE_CHECKING:
    from psycopg import sql

    from ..targets.targets import Target

# the id column's type per connection (its lifetime) and (table, column): _id_type
_ID_TYPES: WeakKeyDictionary[Any, dict[tuple[str, str], str]] = WeakKeyDictionary()

TIMED = (
    "the target's statement (target add --statement), exactly as the application runs it; "
    "pgeval ranks its rows by (distance, chunk id), each chunk once, after the timing"
)


def application(target: Target, ph: Any, *, dollar: bool) -> tuple[sql.Composable, dict]:
    """The statement with ``ph(name)`` placeholders (``q`` the vector, ``p2`` the group's value)
    and the values of the parameters besides the vector. ``dollar``: ``ph`` numbers its
    parameters ``$1, $2`` in order of first use (vector_sql.Dollar), so they are asked for in
    the statement's order first, and ``%`` stays single (the statement runs as written)."""
    assert target.statement_template is not None
    if dollar:
        for n in range(1, stmt.parameters(target.statement_template) + 1):
            ph(stmt.param_name(n))
    return stmt.composed(target.statement_template, ph, escape=not dollar), stmt.values(target)


def refuse_unsupported(target: Target, stage: str, kind: str, batch: bool) -> None:
    """A statement target is searched by its statement: no kind that casts the column
    (hnsw-halfvec, hnsw-bq), no set-based --batch statement."""
    if target.search_type:
        raise InputError(
            f"stage {stage} ({kind}) searches the column cast to {target.search_type}, and "
            f"target '{target.name}' is searched by its own statement: measure it with the "
            "stage kind of the index the statement uses",
            field=param("stages"),
        )
    if batch:
        raise InputError(
            f"target '{target.name}' is searched by its own statement, one query at a time: "
            f"not with {param('batch', True)}",
            field=param("batch"),
        )


def projected(
    description: Any, rows: list, target: Target, kb: Any = None, vector: Any = None
) -> list[tuple[str, float | None]]:
    """The statement's rows (``description``: its cursor's) as (chunk id, distance), in the
    order it returned them (ranked by vector_sql.ranked_rows after the timing). A captured
    shape's statement without a ``distance`` column: each id's distance read after it from
    the target's table (``kb``, the query ``vector``): :func:`with_distances`."""
    at = stmt.columns_of([d.name for d in description or []], target)
    got = stmt.ranked(rows, at)
    return got if at[1] is not None or not got else with_distances(kb, target, vector, got)


def with_distances(kb: Any, target: Target, vector: Any, rows: list) -> list:
    """``rows`` (chunk id, None) with each chunk's distance to ``vector`` under the target's
    distance, read from its table by id, untimed (the least of a chunk's rows), so that
    pgeval ranks them and applies its tie rule as for any list; an id the table no longer
    holds keeps None (ranked last)."""
    from psycopg import sql

    found = kb.execute(
        sql.SQL(
            "SELECT {i}::text, min({d}) FROM {t} WHERE {i} = ANY(%(ids)s::text[]::{typ}[]) "
            "GROUP BY 1"
        ).format(
            i=sql.Identifier(target.id_column),
            d=target.distance_expr(sql.Placeholder("q")),
            t=target.table_sql(),
            typ=sql.SQL(_id_type(kb, target)),
        ),
        {"q": vector, "ids": [c for c, _ in rows]},
    ).fetchall()
    dist = {c: float(d) for c, d in found if d is not None}
    return [(c, dist.get(c)) for c, _ in rows]


def _id_type(kb: Any, target: Target) -> str:
    """The type of the target's id column (the ids cast to it: its index finds them), read
    once per connection and column, not once per search."""
    table = target.table_sql().as_string(kb)
    known = _ID_TYPES.setdefault(kb, {})
    if (table, target.id_column) not in known:
        known[(table, target.id_column)] = kb.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = %s",
            (table, target.id_column),
        ).fetchone()[0]
    return known[(table, target.id_column)]


def bound(target: Target, query_id: str) -> dict:
    """The values besides the vector a captured shape's query is sent with (none else)."""
    return stmt.query_values(target, query_id) if target.bound else {}


def first_per_chunk(ranked: list) -> list:
    """Each chunk once, at its first (best) rank."""
    seen: set[str] = set()
    out = []
    for row in ranked:
        if row[0] not in seen:
            seen.add(row[0])
            out.append(row)
    return out
