"""A captured set measured as the application sent it: each shape's own statement, LIMIT and
values through SQL's ``pgeval.evaluate_captured`` (sql/260_captured.sql), which calls
``pgeval.evaluate_recall`` once per shape (its exact twin the ground truth, the planner's own
plan, each query's values put in as literals: a custom plan)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, NotFound, first_line
from .sweep.shapes import verdict

if TYPE_CHECKING:
    from ..core.db import Database

COLUMNS = (
    "shape", "share", "sweep", "point", "label", "at_k", "recall", "margin95", "p95_ms",
    "n_queries", "index_type", "weighted_recall",
)  # fmt: skip


def measure(
    database: Database,
    name: str,
    settings: Any,
    *,
    sweep: str | None = None,
    replace: bool = False,
    target_recall: float = 0.95,
) -> dict:
    """One row per shape and point of the grid (``settings``: ``{"hnsw.ef_search": [20, 40]}``
    or the command line's ``["hnsw.ef_search=20,40"]``, read as a sweep reads ``--param``) and
    the :func:`verdict`: ``{"rows": [...], "verdict": {...}}``."""
    import psycopg

    from ..core.errors import param
    from .sweep.configure import grid_items
    from .sweep.grid import parse_axes

    axes = parse_axes(grid_items(settings), "hnsw.ef_search=20,40,80", param("param"))
    grid = {k: v if len(v) > 1 else v[0] for k, v in axes}

    from ..core.install import ensure_installed

    with database.connect(autocommit=False) as conn:
        ensure_installed(conn)
        if not conn.execute(
            "SELECT 1 FROM pgeval.captured_set WHERE name = %s", (name,)
        ).fetchone():
            raise NotFound(f"no captured set '{name}' (`pgeval queries list` lists them)")
        try:
            rows = conn.execute(
                "SELECT * FROM pgeval.evaluate_captured(%s, %s::jsonb, %s, %s, %s)",
                (name, json.dumps(grid), sweep, replace, target_recall),
            ).fetchall()
        except psycopg.Error as exc:
            raise InputError(first_line(exc)) from None
        conn.commit()
    out = [dict(zip(COLUMNS, r, strict=True)) for r in rows]
    return {"rows": out, "verdict": verdict(out, target_recall)}
