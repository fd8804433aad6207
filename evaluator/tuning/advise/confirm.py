"""``advise --confirm-on-table``: the one design the screening chose built ``CONCURRENTLY`` on
the user's table, with the ``SET`` the printed DDL carries, and measured there in place, as the
index the table would have (instead of on a held-out scratch copy). The index stays when it is
recommended ("keep NAME"); otherwise advise drops it again (``DROP INDEX CONCURRENTLY``) and
says so (:func:`drop_unless_chosen`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from psycopg import sql

from ...core.errors import DatabaseError, InputError, first_line, param
from ...table import partitions
from .. import spent
from . import inplace
from .outcome import Outcome
from .plan import AdviseConfig, Design


def on_table(
    database: Any, cfg: AdviseConfig, design: Design, measured: Any, estimate: float | None
) -> Outcome:
    """Build ``design`` on the table (CONCURRENTLY), then measure it there in place."""
    from ...kinds import registry
    from ...targets import targets
    from . import apply
    from .recommend import server_context

    with database.connect() as conn:
        target = targets.load(conn, cfg.target)
    row = {"design": design.kind, "build": design.build}
    name = apply.index_name(target, row)
    kind = registry.KINDS[design.kind]
    with database.connect(results=False, autocommit=True) as kb:
        stmts = apply.statements(kb, target, {**row, "setting": {}}, cfg.k)
        if _exists(kb, target, name):
            raise InputError(
                f"{param('confirm_on_table')} would build {name}, but your table has an index of that "
                "name already that is not this design: drop or rename it first",
                field=param("confirm_on_table"),
            )
        context = server_context(kb, target, cfg)
        from ..build_sweep import sized_memory

        mwm = cfg.maintenance_work_mem or sized_memory(
            context["rows"], context["dimension"], context["vector_type"], design.build
        )
        sets = apply.build_sets(kind.index_method or "", mwm)
        if measured.on_design:
            measured.on_design(
                measured.done + 1, max(measured.total, measured.done + 1), design, estimate
            )
        t0 = time.perf_counter()
        try:
            with spent.charge("builds"):
                for s in sets:
                    kb.execute(s)
                for ddl in stmts["ddl"].split(";\n"):  # a partitioned table's: several
                    kb.execute(ddl)
        except Exception as exc:
            for made in stmts["ddl_indexes"]:
                kb.execute(partitions.drop_index(kb, target, made, if_exists=True))
            raise DatabaseError(
                f"{param('confirm_on_table')}: building {name} on your table failed: "
                f"{first_line(exc)}"
            ) from None
        build_s = time.perf_counter() - t0
        kb.execute(sql.SQL("ANALYZE {}").format(target.table_sql()))
        placed = inplace.match(kb, target, [replace(design, in_place=None)])[0]
    if placed.in_place is None:
        raise DatabaseError(
            f"{param('confirm_on_table')}: {name} was built but is not valid on your table"
        )
    got = measured.one(placed, cfg.target)
    built = {"name": name, "build_s": round(build_s, 3), "ddl": stmts["ddl"], "sets": sets}
    figures = replace(got.figures, build_ms=build_s * 1000.0)
    measurement = replace(got.measurement, figures=figures)
    return replace(got, measurement=measurement, built_on_table=built)


def _exists(kb: Any, target: Any, name: str) -> bool:
    found = kb.execute("SELECT to_regclass(%s)", (_ident(target, name).as_string(kb),)).fetchone()
    return found[0] is not None


def _ident(target: Any, name: str) -> sql.Composable:
    return sql.Identifier(target.schema, name) if target.schema else sql.Identifier(name)


def drop_unless_chosen(
    database: Any, cfg: AdviseConfig, rows: Sequence[Outcome], chosen: dict[str, Any] | None
) -> str | None:
    """The index ``--confirm-on-table`` built, dropped when it is not the recommendation; what
    was done, in words (None: nothing built)."""
    from ...targets import targets

    built = next((r["built_on_table"] for r in rows if r.get("built_on_table")), None)
    if built is None:
        return None
    if chosen is not None and chosen.get("in_place") == built["name"]:
        return (
            f"{built['name']} was built on your table by --confirm-on-table "
            f"({built['build_s']:.0f} s) and measured there: it is the recommendation, keep it"
        )
    with database.connect() as conn:
        target = targets.load(conn, cfg.target)
    with database.connect(results=False, autocommit=True) as kb:
        kb.execute(partitions.drop_index(kb, target, built["name"], if_exists=True))
    return (
        f"{built['name']}, built on your table by --confirm-on-table and measured there, is not "
        "the recommendation: advise dropped it again (DROP INDEX CONCURRENTLY)"
    )
