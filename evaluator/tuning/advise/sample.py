"""The copies advise builds on (docs/advise.md, "A large table"): a *sample* of N rows of the
target, every design screened on it, and the *held-out copy*, every row, that a design chosen
by the screening is built on in full.

A sample is N of the target's rows (its filters applied; the group column too when grouping,
with the indexes the table serves that column with), drawn in the order of ``md5`` of the chunk
id: the same rows on every run, so that a rerun finds its screening sweeps stored. Either copy
leaves out the ``held_out`` rows (the chunk ids of sampled queries: :func:`held_out_ids`), so
that the sampled query rows are true held-out queries there: not nodes of the index built on
the copy, and not in its exact answer (its ground truth is the copy's own). A copy lives in a
scratch schema whose name is derived from the target, N and the rows held out (dropped when
the advise ends, also on Ctrl-C and on error) and is searched through a stored target
``<target>~sample<N>`` (``<target>~heldout`` for every row), the one its sweeps name, removed
with it (never listed by `pgeval target list`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from ...core.canonical import sha256_hex
from ...core.errors import InputError, param
from ...core.ids import as_text
from ...table import partitions
from ...table.copied_rows import over_copy
from ...table.target_table import row_count
from .. import build_sweep


@dataclass(frozen=True)
class Sample:
    target: str  # the stored target over the copy
    rows: int  # rows in the copy
    of: int  # rows of the target
    held_out: int = 0  # rows of the target left out (sampled query rows)
    seconds: float = 0.0  # the copy's time (0: none made)


def name_for(target: str, rows: int | None) -> str:
    return f"{target}~heldout" if rows is None else f"{target}~sample{rows}"


def _schema(target: Any, rows: int | None, held_out: tuple[str, ...]) -> str:
    what = {
        "table": target.qualified(),
        "target": target.name,
        "rows": rows,
        **({"held_out": sha256_hex(sorted(held_out))} if held_out else {}),
    }
    key = sha256_hex(what)[:10]
    return f"{build_sweep.SCRATCH_PREFIX}{'sample' if rows else 'heldout'}_{key}"


def held_out_ids(database: Any, testset: str, qinfo: dict | None) -> tuple[str, ...]:
    """The chunk ids a copy leaves out: those of a query set of sampled rows (its query ids are
    the chunk ids), none for other queries (a file's, --queries-sql's, a test set's)."""
    if not qinfo or not qinfo.get("own_chunk_removed"):
        return ()
    with database.connect() as conn:
        ids = conn.execute(
            "SELECT q.query_id FROM pgeval.query q JOIN pgeval.testset t USING (testset_id) "
            "WHERE t.name = %s ORDER BY q.position",
            (testset,),
        ).fetchall()
        conn.rollback()
    return tuple(str(r[0]) for r in ids)


@contextmanager
def copy(
    database: Any,
    target_name: str,
    rows: int | None,
    column: str | None,
    held_out: tuple[str, ...] = (),
) -> Iterator[Sample]:
    """The copy of ``rows`` rows (None: every row) of target ``target_name``, without the
    ``held_out`` chunk ids, and a stored target over it."""
    from ...targets import targets
    from .. import spent

    if rows is not None and rows < 1:
        raise InputError(
            f"{param('sample_rows')} must be >= 1, got {rows}", field=param("sample_rows")
        )
    with database.connect() as conn:
        source = targets.load(conn, target_name)
    schema = _schema(source, rows, held_out)
    with build_sweep.own_schema(database, schema):
        t0 = time.perf_counter()
        with database.connect(results=False, autocommit=True) as c, spent.charge("copies"):
            total, made = _create(c, source, schema, rows, column, held_out)
            held = _held(c, source, held_out)
        seconds = time.perf_counter() - t0
        sampled = over_copy(source, name_for(target_name, rows), schema, group_by=column)
        with database.connect() as conn:
            targets.save(conn, sampled, replace=True)
            conn.commit()
        yield Sample(sampled.name, made, total, held, seconds)


def _create(
    c: Any,
    source: Any,
    schema: str,
    rows: int | None,
    column: str | None,
    held_out: tuple[str, ...],
) -> tuple[int, int]:
    """Create the copy; return (the target's row count, the copy's)."""
    where, params = source.where()
    if held_out:
        keep = sql.SQL("{} <> ALL(%s)").format(as_text(sql.Identifier(source.id_column)))
        glue = sql.SQL(" AND ") if where.as_string(c) else sql.SQL(" WHERE ")
        where, params = sql.SQL("{}{}{}").format(where, glue, keep), [*params, list(held_out)]
    c.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    order: sql.Composable = sql.SQL("")
    if rows is not None:
        order = sql.SQL(" ORDER BY md5({id}::text), {id}::text LIMIT {n}").format(
            id=sql.Identifier(source.id_column), n=sql.Literal(int(rows))
        )
    shape, _ = partitions.of_source(c, source)  # (why not: build_sweep's copy says it)
    select = partitions.select_rows(source, column, shape)
    partitions.fill(
        c,
        schema,
        build_sweep.SCRATCH_TABLE,
        shape,
        sql.SQL("{}{}{}").format(select, where, order),
        params,
    )
    if column:  # the group filter served as the table serves it (its btree)
        from ...table import scratch_indexes

        scratch_indexes.copy(c, source, schema, build_sweep.SCRATCH_TABLE, column)
    c.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, build_sweep.SCRATCH_TABLE)))
    made = c.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, build_sweep.SCRATCH_TABLE))
    ).fetchone()[0]
    return row_count(c, source), int(made)


def _held(c: Any, source: Any, held_out: tuple[str, ...]) -> int:
    """How many of the target's rows are among ``held_out``."""
    if not held_out:
        return 0
    where, params = source.where()
    glue = sql.SQL(" AND ") if where.as_string(c) else sql.SQL(" WHERE ")
    found = c.execute(
        sql.SQL("SELECT count(*) FROM {}{}{}{} = ANY(%s)").format(
            source.table_sql(), where, glue, as_text(sql.Identifier(source.id_column))
        ),
        [*params, list(held_out)],
    ).fetchone()[0]
    return int(found)
