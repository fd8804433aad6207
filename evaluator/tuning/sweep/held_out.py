"""Sampled rows measured against held-out queries (issue "What the application gets", item 8):
a row sampled as a query is a node of the index it queries, its own neighbours one hop away,
so its recall near the setting found is not the application's. After a ``--find`` on
``--sample-queries`` through the index the table has, the bias is measured, not guessed.

Two copies of ``rows`` rows of the target are made in one scratch schema: *in the graph* (the
sampled rows and others drawn in the order of ``md5`` of the chunk id) and *held out* (the same
others without the sampled rows). The table's index is built on each with its own options, and
both are measured at the value found, with the same query set, through one-point build sweeps
(so their ground truth is exact search over each copy, and a rerun finds them stored). The
difference, held out minus in the graph, is the bias at that size; the table's figure plus the
difference is what the application's queries may read, printed as a range with the table's.

By default the copies hold every row of the table (the bias grows with the rows: -0.008 on a
20,000-row copy, -0.075 on the 200,000-row table it was drawn from, issue 47); then the sampled
rows in the graph are the table's own figure, and only the held-out copy is built."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ...core.canonical import sha256_hex
from ...table.copied_rows import STEADY, over_copy
from .. import build_sweep
from .config import SweepConfig
from .result import SweepResult

if TYPE_CHECKING:
    from ...core.db import Database

KINDS = ("graph", "held")


@dataclass(frozen=True)
class Copies:
    graph: str  # the stored target over the copy with the sampled rows
    held: str  # the stored target over the copy without them
    rows: int  # rows of the copy in the graph


def applies(cfg: SweepConfig, res: SweepResult) -> str | None:
    """Why the check does not apply to this sweep (None: it does)."""
    if (res.queries or {}).get("source") != "sample":
        return "the queries are not sampled rows"
    if not cfg.find or cfg.build or cfg.group is not None:
        return "only a --find on the table's own index, ungrouped, is checked"
    if len(res.finds) != 1 or not res.finds[0].get("reached"):
        return "the find reached no value"
    return None


def check(database: Database, cfg: SweepConfig, res: SweepResult, rows: int | None) -> dict | None:
    """The bias of sampled rows at the value found (a dict for the result's ``held_out``), or
    None when the sweep is not one it applies to (:func:`applies`); ``rows`` None: copies of
    every row of the table (the bias grows with the rows: measured at the table's size)."""
    if (rows is not None and rows <= 0) or applies(cfg, res) is not None:
        return None
    from ...table.table_index import table_indexes, twin
    from . import run_sweep

    found = res.finds[0]
    setting, value = found["setting"], int(found["value"])
    measured = res.operating_points.at(setting, value)
    if measured is None or measured.recall is None:
        return None
    with database.connect(results=False) as kb:
        from ...targets import targets

        with database.connect() as conn:
            target = targets.load(conn, cfg.target)
        if target.statement is not None:  # (the copies are not what the statement searches)
            return {
                "skipped": "the target is searched by its own statement, which names its "
                "table: the sampled rows' bias is not measured on copies of it"
            }
        ix = next((i for i in table_indexes(kb, target) if i.name == measured.index), None)
        ours = ix is not None and twin(kb, target, cfg.stage, ix.options, [ix]) is not None
    if ix is None or not ours:
        return {
            "skipped": f"the index measured ({measured.index or 'none'}) is not one pgeval "
            f"builds as {cfg.stage}: the sampled rows' bias is not measured"
        }
    ids = _query_ids(database, res.testset)
    build = tuple(f"{k}={_option(v)}" for k, v in sorted(ix.options.items()))
    figures: dict[str, float | None] = {}
    with copies(database, cfg.target, ids, rows) as made:
        # at the table's size the sampled rows in the graph are the table's own figure: the
        # held-out copy alone is built
        both = (("graph", made.graph), ("held", made.held))
        for kind, name in both[1:] if rows is None else both:
            one = replace(
                cfg,
                target=name,
                testset=str(res.testset),
                queries=None,
                params=(f"{setting}={value}",),
                build=build,
                find=None,
                find_max=None,
                find_min=None,
                index=None,
                isolate_index=False,
                repeat=1,
                final_rounds=None,
                name=f"{res.name}~{kind}{made.rows}",
                fresh=False,
                held_out_rows=0,
            )
            got = run_sweep(database, one).operating_points.points
            figures[kind] = got[0].recall if got else None
    graph, held = figures.get("graph", measured.recall), figures["held"]
    if graph is None or held is None:
        return None
    bias = held - graph
    estimate = min(1.0, max(0.0, measured.recall + bias))
    return {
        "rows": made.rows,
        "every_row": rows is None,
        "queries": len(ids),
        "setting": setting,
        "value": value,
        "index": ix.name,
        "in_graph": graph,
        "held_out": held,
        "bias": bias,
        "table": measured.recall,
        "estimate": estimate,
        "range": sorted([measured.recall, estimate]),
        "target_recall": cfg.target_recall,
    }


def _option(value: str) -> str:
    """An option as compared (``16.0``) as a build names it (``16``)."""
    return value[:-2] if value.endswith(".0") and value[:-2].lstrip("-").isdigit() else value


def _query_ids(database: Database, testset: Any) -> list[str]:
    with database.connect() as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT q.query_id FROM pgeval.query q JOIN pgeval.testset t USING (testset_id) "
                "WHERE t.name = %s ORDER BY q.query_id",
                (testset,),
            )
        ]


@contextmanager
def copies(
    database: Database, target_name: str, ids: list[str], rows: int | None
) -> Iterator[Copies]:
    """The two copies of ``rows`` rows (None: every row) of the target and a stored target over
    each; their scratch schema is dropped on exit with them (also on Ctrl-C and on error)."""
    from ...targets import targets

    with database.connect() as conn:
        source = targets.load(conn, target_name)
    key = sha256_hex({"table": source.qualified(), "target": target_name, "rows": rows})[:10]
    schema = f"{build_sweep.SCRATCH_PREFIX}heldout_{key}"
    with build_sweep.own_schema(database, schema):
        with database.connect(results=False, autocommit=True) as c:
            made = _create(c, source, schema, ids, rows)
        names = {}
        with database.connect() as conn:
            for kind in KINDS:
                names[kind] = f"{target_name}~{kind}{made}"
                copy = over_copy(source, names[kind], schema, kind, group_by=None)
                targets.save(conn, copy, replace=True)
            conn.commit()
        yield Copies(names["graph"], names["held"], made)


def _create(c: Any, source: Any, schema: str, ids: list[str], rows: int | None) -> int:
    """Create ``schema.graph`` (the sampled rows and the first others by ``md5`` of the id, to
    ``rows`` in all) and ``schema.held`` (those others alone); return the graph copy's rows.
    ``rows`` None: every other row, and ``graph`` a view (the table itself is measured as it)."""
    where, params = source.where()
    ident = sql.Identifier(source.id_column)
    c.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    picked = sql.SQL("{id}::text = ANY({ids})").format(id=ident, ids=sql.Literal(ids))
    others = sql.SQL("ALL") if rows is None else sql.Literal(max(0, rows - len(ids)))
    rows_of = {  # the table's rows, with the sampled rows' condition (picked)
        "held": sql.Identifier(schema, "held"),
        "id": ident,
        "vec": source.vector_expr(),
        "vcol": sql.Identifier(source.vector_column),
        "src": source.table_sql(),
        "where": where,
        "conj": sql.SQL(" AND" if where.as_string(c).strip() else " WHERE"),
        "picked": picked,
    }
    c.execute(
        sql.SQL(
            "CREATE TABLE {held}{steady} AS SELECT {id} AS {id}, {vec} AS {vcol} FROM {src}{where}"
            "{conj} NOT ({picked}) ORDER BY md5({id}::text), {id}::text LIMIT {n}"
        ).format(steady=sql.SQL(STEADY), n=others, **rows_of),
        params,
    )
    c.execute(
        sql.SQL(
            "CREATE {relation} {graph}{steady} AS SELECT * FROM {held} UNION ALL "
            "SELECT {id} AS {id}, {vec} AS {vcol} FROM {src}{where}{conj} {picked}"
        ).format(
            relation=sql.SQL("VIEW" if rows is None else "TABLE"),
            graph=sql.Identifier(schema, "graph"),
            steady=sql.SQL("" if rows is None else STEADY),
            **rows_of,
        ),
        params,
    )
    for kind in KINDS if rows is not None else ("held",):
        c.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, kind)))
    return int(
        c.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "graph"))
        ).fetchone()[0]
    )
