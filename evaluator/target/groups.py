"""The groups of a target (a tenant column: WeKnora's knowledge_base_id): which values the
column takes among the target's rows, how many rows and chunks each has, and which of them a
measurement takes (all up to a maximum, else the largest and the smallest). Sweeps, pipelines
and probes measure each group as the application scopes it (``Target.scoped``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from ..core.errors import InputError, param
from ..core.ids import as_text


@dataclass(frozen=True)
class Group:
    value: str
    rows: int
    chunks: int


def list_groups(kb: Any, target: Any, column: str) -> tuple[list[Group], int]:
    """Every group of ``column`` among the target's rows, largest first (ties: value in byte
    order), and the number of rows where it is NULL."""
    from . import catalog

    if column not in catalog.columns(kb, target):
        raise InputError(
            f"column '{column}' does not exist in {target.qualified()}", field=param("group_by")
        )
    where, params = target.where()
    col = sql.Identifier(column)
    stmt = sql.SQL(
        "SELECT {val}, count(*), count(DISTINCT {cid}) FROM {table}{where} GROUP BY 1 "
        "ORDER BY 2 DESC, 1"
    ).format(
        val=as_text(col),
        cid=sql.Identifier(target.id_column),
        table=target.table_sql(),
        where=where,
    )
    rows = kb.execute(stmt, params).fetchall()
    kb.rollback()
    groups = [Group(v, int(n), int(c)) for v, n, c in rows if v is not None]
    nulls = sum(int(n) for v, n, _ in rows if v is None)
    return groups, nulls


def choose(groups: list[Group], max_groups: int) -> tuple[list[Group], str]:
    """All groups up to ``max_groups``; else the largest and the smallest (half each)."""
    if len(groups) <= max_groups:
        return list(groups), f"all {len(groups)} groups"
    large = (max_groups + 1) // 2
    small = max_groups - large
    picked = groups[:large] + (groups[-small:] if small else [])
    return picked, (
        f"{max_groups} of {len(groups)} groups: the {large} largest and the {small} smallest"
    )


def column_for(database: Any, target_name: str, group_by: str | None) -> str | None:
    """The column a measurement groups by: ``--group-by``, else the target's own (``target add
    --group-by``), else None (the whole table). Asked before the measurement's own checks: a
    target that cannot be read here (none of that name, a schema to upgrade) groups by nothing,
    and the measurement then says what is wrong in its own words."""
    if group_by:
        return group_by
    import psycopg

    from ..core.errors import PgevalError
    from . import targets

    try:
        with database.connect() as conn:
            return targets.load(conn, target_name).group_by
    except (PgevalError, psycopg.Error):
        return None
