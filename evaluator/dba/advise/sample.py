"""``advise --sample-rows N``: screen every design on N rows of the target, then confirm the best
(and the runner-up when its build is cheap) on the whole table.

The sample is a copy of N of the target's rows (its filters applied; the group column too when
grouping), drawn in the order of ``md5`` of the chunk id: the same rows on every run, so that a
rerun finds its screening sweeps stored. It lives in a scratch schema whose name is derived from
the target and N (dropped when the advise ends, also on Ctrl-C and on error) and is searched
through a stored target ``<target>~sample<N>``, the one the screening sweeps name: exact search,
ground truth and every build of the screening are on the sample."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from psycopg import sql

from ...core.canonical import sha256_hex
from ...core.errors import InputError, param
from .. import build_sweep

# the runner-up is confirmed too when its build on the sample took at most this many times the
# best's: confirming it costs about as much again, and the recommendation then has a runner-up
# measured on the table
CHEAP_RUNNER_UP = 2.0


@dataclass(frozen=True)
class Sample:
    target: str  # the stored target over the sample
    rows: int  # rows in the sample
    of: int  # rows of the target


def name_for(target: str, rows: int) -> str:
    return f"{target}~sample{rows}"


def _schema(target: Any, rows: int) -> str:
    key = sha256_hex({"table": target.qualified(), "target": target.name, "rows": rows})[:10]
    return f"{build_sweep.SCRATCH_PREFIX}sample_{key}"


@contextmanager
def copy(database: Any, target_name: str, rows: int, column: str | None) -> Iterator[Sample]:
    """The sample of ``rows`` rows of target ``target_name`` and a stored target over it."""
    from ...target import targets

    if rows < 1:
        raise InputError(
            f"{param('sample_rows')} must be >= 1, got {rows}", field=param("sample_rows")
        )
    with database.connect() as conn:
        source = targets.load(conn, target_name)
    schema = _schema(source, rows)
    build_sweep.LIVE.add(schema)
    try:
        with database.connect(results=False, autocommit=True) as c:
            total = _create(c, source, schema, rows, column)
        sampled = replace(
            source,
            name=name_for(target_name, rows),
            schema=schema,
            table=build_sweep.SCRATCH_TABLE,
            text_column=None,
            filters={},
            null_true=[],
            dimension_column=None,
            group_by=column,
        )
        with database.connect() as conn:
            targets.save(conn, sampled, replace=True)
            conn.commit()
        yield Sample(sampled.name, min(rows, total), total)
    finally:
        try:
            with database.connect(results=False, autocommit=True) as c:
                c.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
        finally:
            build_sweep.LIVE.discard(schema)


def _create(c: Any, source: Any, schema: str, rows: int, column: str | None) -> int:
    """Create the sample table; return the target's row count."""
    where, params = source.where()
    c.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    extra: sql.Composable = sql.SQL("")
    if column and column not in (source.id_column, source.vector_column):
        extra = sql.SQL(", {}").format(sql.Identifier(column))
    c.execute(
        sql.SQL(
            "CREATE TABLE {dst} AS SELECT {id} AS {id}, {vec} AS {vcol}{extra} FROM {src}{where} "
            "ORDER BY md5({id}::text), {id}::text LIMIT {n}"
        ).format(
            dst=sql.Identifier(schema, build_sweep.SCRATCH_TABLE),
            id=sql.Identifier(source.id_column),
            vec=source.vector_expr(),
            vcol=sql.Identifier(source.vector_column),
            extra=extra,
            src=source.table_sql(),
            where=where,
            n=sql.Literal(int(rows)),
        ),
        params,
    )
    c.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, build_sweep.SCRATCH_TABLE)))
    return int(
        c.execute(
            sql.SQL("SELECT count(*) FROM {}{}").format(source.table_sql(), where), params
        ).fetchone()[0]
    )


def to_confirm(rows: list[dict[str, Any]], scale: float, budgets: dict[str, float]) -> list[int]:
    """Which screened designs to confirm on the table (indexes into ``rows``): the best of those
    reaching the target on the sample within the budgets (index size and build time scaled to
    the table by ``scale``, its rows over the sample's), by the recommendation's own rule, and
    the runner-up when its build is cheap; when none qualifies, the one of highest recall."""
    from .recommend import BUDGETS, pick

    def within(r: dict[str, Any]) -> bool:
        for opt, (key, _, figure) in BUDGETS.items():
            if opt not in budgets or r[key] is None:
                continue
            grows = key in ("index_bytes", "build_ms")
            if figure(r) * (scale if grows else 1.0) > budgets[opt]:
                return False
        return True

    ok = [r for r in rows if r["reached"] and r["p95_ms"] is not None and within(r)]
    if not ok:
        measured = [r for r in rows if r["recall"] is not None]
        if not measured:
            return []
        return [rows.index(max(measured, key=lambda r: r["recall"]))]
    best, _ = pick(ok)
    chosen = [rows.index(best)]
    others = sorted((r for r in ok if r is not best), key=lambda r: r["p95_ms"])
    if others and (others[0]["build_ms"] or 0) <= CHEAP_RUNNER_UP * (best["build_ms"] or 0):
        chosen.append(rows.index(others[0]))
    return chosen
