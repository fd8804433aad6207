"""A captured shape as a target (``pgeval sweep --captured SET``, tuning/sweep/shapes.py): the
sweep's target searched by the shape's own statement, as ``target add --statement`` keeps one
(``statement``, ``statement_template``), the distance its operator computes, and per query id
the values of ``$2, $3 ...`` it was sent with (``bound``, from pgeval.captured_query: a captured
query's id is a digest of what it sent, so it keeps its values). Derived in memory, never
stored; refused when the set was captured on another table or column than the target's."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, NotFound, param

if TYPE_CHECKING:
    from .targets import Target


@dataclass(frozen=True)
class Shape:
    """One shape of a captured set, as pgeval.captured_shapes reads it."""

    shape: int
    statement: str
    operator: str
    k: int | None
    queries: int
    sent: int
    share: float


def shapes_of(conn: Any, name: str) -> list[Shape]:
    rows = conn.execute(
        "SELECT shape, statement, operator, k, queries, sent, coalesce(share, 0) "
        "FROM pgeval.captured_shapes(%s)",
        (name,),
    ).fetchall()
    conn.rollback()
    if not rows:
        raise NotFound(f"no captured set '{name}' (`pgeval queries list` lists them)")
    return [Shape(int(r[0]), r[1], r[2], r[3], int(r[4]), int(r[5]), float(r[6])) for r in rows]


def _check_table(conn: Any, target: Target, name: str) -> None:
    """The set was captured on the table and column the target searches."""
    from . import targets

    row = conn.execute("SELECT target FROM pgeval.captured_set WHERE name = %s", (name,)).fetchone()
    conn.rollback()
    if row is None:
        raise NotFound(f"no captured set '{name}' (`pgeval queries list` lists them)")
    if row[0] == target.name:
        return
    try:
        source = targets.load(conn, row[0])
    except NotFound:  # (its target deleted since: the statements still say the table)
        return
    finally:
        conn.rollback()
    if (source.qualified(), source.vector_column) != (target.qualified(), target.vector_column):
        raise InputError(
            f"captured set '{name}' holds searches of {source.qualified()}.{source.vector_column} "
            f"(target '{source.name}'), not of {target.qualified()}.{target.vector_column} "
            f"(target '{target.name}'): measure it with {param('target')} {source.name}",
            field=param("captured"),
        )


def shape_target(conn: Any, target: Target, name: str | None, number: int) -> Target:
    """``target`` searched by shape ``number`` of captured set ``name`` (see the module)."""
    from ..core.search_types import DISTANCES
    from . import statement

    if name is None:
        raise InputError(f"a shape's sweep takes its queries from {param('captured')} SET")
    _check_table(conn, target, name)
    shape = next((s for s in shapes_of(conn, name) if s.shape == number), None)
    if shape is None:
        raise InputError(f"captured set '{name}' has no shape {number}", field=param("captured"))
    read = statement.read(conn, shape.statement)
    bound = {
        str(qid): tuple(params or ())
        for qid, params in conn.execute(
            "SELECT q.query_id, q.params FROM pgeval.captured_query q JOIN pgeval.captured_set c "
            "USING (set_id) WHERE c.name = %s AND q.shape = %s",
            (name, number),
        ).fetchall()
    }
    conn.rollback()
    by_operator = {op: d for d, op in DISTANCES.items()}
    return replace(
        target,
        statement=shape.statement,
        statement_template=read.template,
        distance=by_operator.get(shape.operator, target.distance),
        bound=bound,
        group_by=None,
        scope=None,
    )
