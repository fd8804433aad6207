"""What applies a recommendation on the user's own table: the index DDL (``CREATE INDEX
CONCURRENTLY``, the expression and operator class the design searches, its build options), the
settings as ``ALTER DATABASE ... SET`` (``--role``: ``ALTER ROLE ... IN DATABASE ... SET``, for the
application's role only) and the statement the application runs (``$1`` the query vector, then
the target's filters and, grouped, ``$n`` the group), all runnable as printed."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from psycopg import sql

from ...kinds import registry
from ...stages import gucs, vector_sql
from ...table import labels, partitions
from ..build_sweep import index_body
from .plan import fixed_settings

# what a DBA must know before signing, per access method: the index built on the table is not
# the one measured; {find} is the design's own work setting (hnsw-bq: bq.candidates)
REBUILT = {
    "ivfflat": "IVFFlat's lists are k-means centres of a random sample of the rows, so the index "
    "you build is not the one measured: measure it once built (pgeval sweep --find "
    "{find} on your index)",
    "hnsw": "HNSW draws each row's level at random, so the graph you build is not the one "
    "measured and near the target its recall can differ by a few hundredths (bench/advise.py): "
    "measure it once built (pgeval sweep --find {find} on your index)",
}


def rebuilt_note(design: str, build: dict[str, str]) -> str | None:
    """What :data:`REBUILT` says of a design's access method, naming the setting its find
    searches for that build (the registry's ``Kind.find_setting``) and the settings that find
    runs under (hnsw-bq: its iterative scan), else None."""
    kind = registry.KINDS[design]
    note = REBUILT.get(kind.index_method or "")
    if note is None:
        return None
    find = kind.find_setting(build)
    fixed = "".join(f" --set {n}={v}" for n, v in fixed_settings(kind, find).items())
    return note.format(find=find + fixed)


def build_sets(method: str, mwm: str | None) -> list[str]:
    """The ``SET`` statements a build of ``method`` runs under (printed before its DDL)."""
    from ..build_sweep import SERIAL_BUILDS

    out = [] if mwm is None else [f"SET maintenance_work_mem = '{mwm}'"]
    if method in SERIAL_BUILDS:
        out.append("SET max_parallel_maintenance_workers = 0")
    return out


def index_name(target: Any, row: dict[str, Any]) -> str:
    parts = [target.table, row["design"], *(f"{k}{v}" for k, v in row["build"].items()), "idx"]
    return re.sub(r"[^a-z0-9_]+", "_", "_".join(parts).lower())[:63]


def statements(
    kb: Any,
    target: Any,
    row: dict[str, Any],
    k: int,
    *,
    role: str | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    kind = registry.KINDS[row["design"]]
    method = kind.index_method or ""
    labelled = None if group is None or not kind.labels else labels.read(kb, target, group)
    label = None if labelled is None else labelled.column
    body = index_body(target, method, row["design"], row["build"], label)
    # CONCURRENTLY; on a partitioned table, one index per partition, attached (partitions.py)
    # per group (a partial index per tenant, as the table has it): one per group's WHERE
    wheres = tuple(partitions.group_wheres(kb, target, group, kind))
    ddl = partitions.index_ddl(kb, target, index_name(target, row), body, wheres)
    server = {n: v for n, v in row["setting"].items() if n not in gucs.OWN}
    database = kb.execute("SELECT current_database()").fetchone()[0]
    scope = (
        sql.SQL("DATABASE {}").format(sql.Identifier(database))
        if role is None
        else sql.SQL("ROLE {} IN DATABASE {}").format(
            sql.Identifier(role), sql.Identifier(database)
        )
    )
    settings = [
        sql.SQL("ALTER {} SET {} = {}").format(
            scope,
            sql.SQL(n),
            sql.Literal(str(v)),  # names: the registry's
        )
        for n, v in server.items()
    ]
    resets = [sql.SQL("ALTER {} RESET {}").format(scope, sql.SQL(n)) for n in server]
    searched = replace(target, search_type=kind.cast_type) if kind.cast_type else target
    by = group if labelled is None else labelled.column
    if labelled is not None:  # the search of one group by its label: labels && ARRAY[$n]
        searched = replace(searched, label_columns=[labelled.column])
    if by is not None:  # the application's search of one group: WHERE group = $n
        searched = searched.scoped(by, "")
    grouped = None if by is None else f"f{list(searched.filters).index(by)}"
    value = f"<a value of {group}>" if labelled is None else f"<the label of a {group}>"
    own = {n: v for n, v in row["setting"].items() if n in gucs.OWN}
    dollar = vector_sql.Dollar()
    query, bound = vector_sql.inner(
        searched,
        k,
        dollar("query"),  # $1, before any filter's
        dollar,
        True,
        int(own[kind.rerank_candidates]) if kind.rerank_candidates in own else None,
    )
    return {
        "ddl": ";\n".join(d.as_string(kb) for d in ddl),
        # the indexes it builds (one per group's WHERE: partitions.per_group), for the rollback
        "ddl_indexes": partitions.group_names(index_name(target, row), len(wheres)),
        "settings_sql": [s.as_string(kb) for s in settings],
        # what undoes the settings (a new index's rollback adds its DROP INDEX: inplace.advice)
        "reset_sql": [s.as_string(kb) for s in resets],
        "query_sql": query.as_string(kb),
        # what $1, $2, ... are: the query vector, the filters' values, the group's
        "query_params": [
            "<the query vector>",
            *(value if n == grouped else str(bound[n]) for n in dollar.names[1:]),
        ],
        "statement_change": None if labelled is None else changed(kb, target, labelled),
    }


def changed(kb: Any, target: Any, labelled: labels.Labels) -> dict[str, Any]:
    """What a label-filtered design changes besides the index: the label column added to the
    table (generated from the group column, before the index), the label the application sends
    for each group, and what drops the column again (after the index, in the rollback)."""
    table = target.table_sql()
    return {
        "why": (
            f"this design changes the statement your application sends: it filters by the "
            f"label column {labelled.column} (WHERE {labelled.column} && ARRAY[$n]::smallint[]) "
            f"instead of {labelled.group} = $n; {labelled.words()}"
        ),
        "column_sql": labelled.add_column(table).as_string(kb),
        "drop_sql": labelled.drop_column(table).as_string(kb),
        **labelled.as_dict(),
    }


def check_role(kb: Any, role: str | None) -> None:
    """``--role`` names a role of this server."""
    from ...core.errors import InputError, param

    if role is None:
        return
    if not role.strip():
        raise InputError(f"{param('role')} is empty", field=param("role"))
    found = kb.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    kb.rollback()
    if found is None:
        raise InputError(f"role '{role}' does not exist on this server", field=param("role"))
