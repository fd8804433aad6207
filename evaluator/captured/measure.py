"""A captured set measured as the application sent it: each shape's own statement, LIMIT and
values through SQL's ``pgeval.evaluate_captured`` (sql/260_captured.sql), which calls
``pgeval.evaluate_recall`` once per shape (its exact twin the ground truth, the planner's own
plan, each query's values put in as literals: a custom plan)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, NotFound, first_line

if TYPE_CHECKING:
    from ..core.db import Database

COLUMNS = (
    "shape", "share", "sweep", "point", "label", "at_k", "recall", "margin95", "p95_ms",
    "n_queries", "index_type", "weighted_recall",
)  # fmt: skip


def measure(
    database: Database,
    name: str,
    settings: dict[str, Any],
    *,
    sweep: str | None = None,
    replace: bool = False,
    target_recall: float = 0.95,
) -> list[dict]:
    """One row per shape and point of the grid (``settings``: a value or a list per setting)."""
    import psycopg

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
                (name, json.dumps(settings), sweep, replace, target_recall),
            ).fetchall()
        except psycopg.Error as exc:
            raise InputError(first_line(exc)) from None
        conn.commit()
    return [dict(zip(COLUMNS, r, strict=True)) for r in rows]
