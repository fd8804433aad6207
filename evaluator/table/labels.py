"""pgvectorscale's label filtering (its README, "Filtered Vector Search"): a ``smallint[]`` column
in a DiskANN index on ``(vector, labels)``, searched with ``labels && ARRAY[$n]::smallint[]``.
The design ``diskann-labels`` derives that column from the group column (a tenant): its id where
it is an integer within smallint, else a label per group numbered 1, 2, ... in byte order of the
group's value (:class:`Labels`, printed with the recommendation, since the application then sends
the label, not the id). The column is a generated one: what a scratch copy is given is what the
DDL printed for the table adds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from ..core.errors import InputError, param
from ..core.ids import as_text

COLUMN = "labels"  # the label column a copy carries and the DDL adds (unless the table has one)
SMALLINT = (-32768, 32767)
INTEGERS = ("smallint", "integer", "bigint")
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Labels:
    """The labels of the groups of ``group``: ``ids`` (the group's value as text, its label) in
    byte order of the value; ``identity``: the label is the id itself (an integer column whose
    values fit a smallint); ``column``: the label column's name."""

    group: str
    ids: tuple[tuple[str, int], ...]
    identity: bool
    column: str = COLUMN

    def label(self, value: str) -> int:
        """The label the application sends for group ``value``."""
        found = dict(self.ids).get(value)
        if found is None:
            raise InputError(
                f"{self.group} = {value!r} has no label (the labels are read from the table's "
                "groups: measure again)",
                field=param("group_by"),
            )
        return found

    def expression(self) -> sql.Composable:
        """The label column's value, from the group column: ``ARRAY[tenant]::smallint[]`` (an id
        outside smallint gets no label: the row is found through no label, never an error on
        insert), else ``ARRAY[CASE tenant WHEN 'acme' THEN 1 ... END]::smallint[]`` (a group added
        later gets none until its WHEN is added)."""
        col = sql.Identifier(self.group)
        if self.identity:
            low, high = SMALLINT
            label: sql.Composable = sql.SQL(
                "CASE WHEN {c} BETWEEN {low} AND {high} THEN {c} END"
            ).format(c=col, low=sql.Literal(low), high=sql.Literal(high))
        else:
            label = sql.SQL("CASE {} {} END").format(
                col,
                sql.SQL(" ").join(
                    sql.SQL("WHEN {} THEN {}").format(sql.Literal(v), sql.Literal(n))
                    for v, n in self.ids
                ),
            )
        return sql.SQL("ARRAY[{}]::smallint[]").format(label)

    def add_column(self, table: sql.Composable) -> sql.Composable:
        """The DDL that adds the label column to ``table``, generated from the group column."""
        return sql.SQL(
            "ALTER TABLE {} ADD COLUMN {} smallint[] GENERATED ALWAYS AS ({}) STORED"
        ).format(table, sql.Identifier(self.column), self.expression())

    def drop_column(self, table: sql.Composable) -> sql.Composable:
        return sql.SQL("ALTER TABLE {} DROP COLUMN {}").format(table, sql.Identifier(self.column))

    def words(self, most: int = 12) -> str:
        """``tenant's own ids (an integer within smallint)`` or ``tenant 'acme' -> 1, ...``."""
        if self.identity:
            return f"the label of a group is its {self.group} itself (an integer within smallint)"
        shown = ", ".join(f"{v!r} -> {n}" for v, n in self.ids[:most])
        more = f", ... ({len(self.ids)} groups)" if len(self.ids) > most else ""
        return (
            f"{self.group} does not fit a smallint: the application sends the label of its "
            f"group: {shown}{more}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "group_by": self.group,
            "column": self.column,
            "identity": self.identity,
            "labels": {v: n for v, n in self.ids},
        }


def read(conn: Any, target: Any, group: str) -> Labels:
    """The labels of ``group``'s values among ``target``'s rows (its filters applied; NULL is
    no group), the label column named ``labels`` unless the table has a column of that name."""
    from ..targets import catalog

    columns = catalog.columns(conn, target)
    if group not in columns:
        raise InputError(
            f"column '{group}' does not exist in {target.qualified()}", field=param("group_by")
        )
    where, params = target.where()
    col = sql.Identifier(group)
    stmt = sql.SQL("SELECT DISTINCT {v} FROM {t}{w} ORDER BY 1").format(
        v=as_text(col), t=target.table_sql(), w=where
    )
    values = [r[0] for r in conn.execute(stmt, params).fetchall() if r[0] is not None]
    type_name = str(columns[group][0])
    identity = type_name in {"int2", "int4", "int8", *INTEGERS} and all(
        _INT.fullmatch(v) and SMALLINT[0] <= int(v) <= SMALLINT[1] for v in values
    )
    if not identity and len(values) > SMALLINT[1]:
        raise InputError(
            f"{group} has {len(values):,} groups: a smallint label holds {SMALLINT[1]:,} at most",
            field=param("group_by"),
        )
    ids = tuple((v, int(v) if identity else n) for n, v in enumerate(values, 1))
    name = COLUMN if COLUMN not in columns else f"{group}_{COLUMN}"
    return Labels(group, ids, identity, name)


def wanted(target: Any, stage: str | None) -> bool:
    """Whether a copy for stage kind ``stage`` carries labels: a label-filtered kind's, which
    searches one group at a time (refused without one)."""
    from ..kinds.registry import kind
    from .copied_rows import group_column

    described = kind(stage) if stage else None
    if described is None or not described.labels:
        return False
    if group_column(target) is None:
        raise InputError(
            f"{stage} searches one group at a time by its label: measure it per group "
            f"(advise {param('group_by')} COLUMN)",
            field=param("group_by"),
        )
    return True
