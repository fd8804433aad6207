"""The groups of a target (a tenant column: WeKnora's knowledge_base_id): which values the
column takes among the target's rows, how many rows and chunks each has, and which of them a
measurement takes (all up to a maximum, else the largest and the smallest). Sweeps, pipelines
and probes measure each group as the application scopes it (``Target.scoped``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import InputError, param

DEFAULT_MAX_GROUPS = 10  # groups measured when there are more: the largest and smallest half
# --group-by: the fewest sampled queries a group is measured with when --sample-queries N is
# spread over the groups (N itself when N is smaller)
MIN_GROUP_QUERIES = 30


@dataclass(frozen=True)
class Group:
    value: str
    rows: int
    chunks: int
    partition: str | None = None  # the one partition of a partitioned table holding the group


def list_groups(kb: Any, target: Any, column: str) -> tuple[list[Group], int]:
    """Every group of ``column`` among the target's rows, largest first (ties: value in byte
    order), and the number of rows where it is NULL. On a partitioned table, a group whose rows
    are all in one partition (``column`` is the partition key) names it."""
    from psycopg import sql

    from ..core.ids import as_text
    from . import catalog

    if column not in catalog.columns(kb, target):
        raise InputError(
            f"column '{column}' does not exist in {target.qualified()}", field=param("group_by")
        )
    where, params = target.where()
    col = sql.Identifier(column)
    stmt = sql.SQL(
        "SELECT {val}, count(*), count(DISTINCT {cid}), CASE WHEN count(DISTINCT tableoid) = 1 "
        "AND min(tableoid) <> to_regclass(%s) THEN min(tableoid)::regclass::text END "
        "FROM {table}{where} GROUP BY 1 ORDER BY 2 DESC, 1"
    ).format(
        val=as_text(col),
        cid=sql.Identifier(target.id_column),
        table=target.table_sql(),
        where=where,
    )
    rows = kb.execute(stmt, [target.table_sql().as_string(kb), *params]).fetchall()
    kb.rollback()
    groups = [Group(v, int(n), int(c), p) for v, n, c, p in rows if v is not None]
    nulls = sum(int(n) for v, n, *_ in rows if v is None)
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


@dataclass
class Chosen:
    """The groups a measurement takes: ``measured`` (two chunks or more), ``skipped`` (one
    chunk: nothing to find besides it), in words ``chosen``, of ``total``; ``nulls`` rows in
    no group; ``per_group``: the sampled queries each is measured with (:func:`spread`; None:
    captured queries, each group's own)."""

    column: str
    measured: list[Group]
    chosen: str
    total: int
    nulls: int = 0
    rows: int = 0  # the target's rows, every group's and the NULLs: what a share is of
    skipped: list[dict] = field(default_factory=list)
    per_group: int | None = None

    def queries_of(self, queries: Any, group: Group) -> Any:
        """The query source of one group: ``per_group`` of its rows, at most its chunks; or the
        captured queries whose filter on the column had the group's value."""
        if queries.kind == "captured":
            return replace(queries, where=(self.column, group.value))
        return replace(queries, count=min(self.per_group or 1, group.chunks))

    def sampled(self, queries: Any, given: int | None) -> dict[str, Any] | None:
        """How many sampled queries each group is measured with and why (``given``:
        ``--group-queries``), as the JSON output says it; None: captured queries."""
        if self.per_group is None:
            return None
        return {
            "per_group": self.per_group,
            "sample_queries": int(queries.count or 1),
            "groups": len(self.measured),
            "given": given is not None,
        }

    @property
    def null_warning(self) -> str | None:
        if not self.nulls:
            return None
        return (
            f"{self.nulls} rows have no {self.column} (NULL): they belong to no group and are "
            "not measured"
        )


def plan(
    database: Any,
    target_name: str,
    column: str,
    max_groups: int,
    queries: Any,
    what: str,
    group_queries: int | None = None,
) -> Chosen:
    """The groups of ``column`` a measurement (``what``: measure, probe) takes, after the
    checks every grouped measurement shares: queries sampled from the groups (``--sample-queries
    N`` spread over them, or ``group_queries`` each) or captured, ``max_groups`` >= 1, at least
    one group with two chunks or more."""
    from ..testset.query_source import QuerySource
    from . import targets

    if not isinstance(queries, QuerySource) or queries.kind not in ("sample", "captured"):
        raise InputError(
            f"{param('group_by')} draws its queries from each group: give "
            f"{param('sample_queries')} N (N queries spread over the groups) or "
            f"{param('captured')} SET (the queries the application sent with each group's value)",
            field=param("group_by"),
        )
    for opt, count in (("max_groups", max_groups), ("group_queries", group_queries)):
        if count is not None and count < 1:
            raise InputError(f"{param(opt)} must be >= 1, got {count}", field=param(opt))
    if group_queries is not None and queries.kind == "captured":
        raise InputError(
            f"{param('group_queries')} sets the sampled queries of each group: with "
            f"{param('captured')} each group is measured with the queries it was sent",
            field=param("group_queries"),
        )
    with database.connect() as conn:
        target = targets.load(conn, target_name)
    with database.connect(results=False, read_only=True) as kb:
        every, nulls = list_groups(kb, target, column)
    picked, chosen = choose(every, max_groups)
    out = Chosen(column, [g for g in picked if g.chunks >= 2], chosen, len(every), nulls)
    out.rows = sum(g.rows for g in every) + nulls
    out.skipped = [
        {"group": g.value, "rows": g.rows, "why": "one chunk: nothing to find besides it"}
        for g in picked
        if g.chunks < 2
    ]
    if not out.measured:
        raise InputError(
            f"no group of {column} has two chunks or more to {what}", field=param("group_by")
        )
    if queries.kind == "sample":
        out.per_group = spread(queries.count or 1, len(out.measured), group_queries)
    return out


def ungrouped(group_queries: int | None) -> None:
    """Refuse ``--group-queries`` for a measurement of the whole table."""
    if group_queries is not None:
        raise InputError(
            f"{param('group_queries')} applies with {param('group_by')} (or a target's own "
            "group column)",
            field=param("group_queries"),
        )


def spread(sample_queries: int, groups: int, given: int | None = None) -> int:
    """The sampled queries each group is measured with when ``sample_queries`` (N) is the whole
    sample of a grouped measurement: N spread evenly over ``groups``, at least
    ``MIN_GROUP_QUERIES`` (N when N is smaller); ``given`` (``--group-queries``): that many. A
    group with fewer chunks gets its chunks (:meth:`Chosen.queries_of`)."""
    if given is not None:
        return given
    even = -(-sample_queries // max(groups, 1))
    return max(even, min(sample_queries, MIN_GROUP_QUERIES))
