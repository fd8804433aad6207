"""How far each design's recall may move with another sample of as many queries: the half-width
of its 95 % interval (SQL's pgeval.sweep_point_recall_margin over the point's per-query index
recall), beside the recall in every row, and a warning when the recommendation's interval is
wider than ``WIDE``: a rebuild or another sample may then land on the other side of the target
(docs/advise.md measures both)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from .outcome import Margin, Outcome, PointRef

WIDE = 0.01  # the "within 0.01": an interval wider than this says how to narrow it


def attach(database: Any, rows: list[Outcome], k: int) -> list[Outcome]:
    """Every row with its :class:`.outcome.Margin`: ``recall_margin`` (the 95 % half-width) and
    ``recall_queries`` (the queries it is over) at its point (grouped: the worst group's
    sweep, the row's ``sweep``)."""
    import psycopg

    from ...core.errors import DatabaseError

    out = []
    with database.connect() as conn:
        for row in rows:
            found = None
            if row.measurement.at is not None:
                try:
                    found = _margin(conn, row.measurement.at, k)
                except psycopg.errors.UndefinedFunction:
                    raise DatabaseError(
                        "the SQL API of schema pgeval is older than this pgeval (no "
                        "pgeval.sweep_point_recall_margin): run `pgeval init`"
                    ) from None
            queries = int(found[0]) if found and found[0] else None
            out.append(replace(row, margin=Margin(queries, found[1] if found else None)))
        conn.rollback()
    return out


def _margin(conn: Any, at: PointRef, k: int) -> Any:
    """The 95 % half-width at a design's point, addressed by its sweep and number."""
    return conn.execute(
        "SELECT m.queries, m.margin95 FROM pgeval.sweep_point_recall_margin(%s, %s, %s) m",
        (at.sweep_id, at.point, k),
    ).fetchone()


def queries_for(margin: float, queries: int, width: float = WIDE) -> int:
    """Queries for a half-width of ``width``: the margin shrinks as 1 / sqrt(queries)."""
    return int(math.ceil(queries * (margin / width) ** 2))


def warning(rec_row: dict[str, Any], k: int, target_recall: float) -> str | None:
    """Said when the recommended design's 95 % interval is wider than ``WIDE`` (``rec_row``: the
    recommendation, with the design's recall, margin and queries)."""
    margin, n = rec_row.get("recall_margin"), rec_row.get("recall_queries")
    if margin is None or not n or margin <= WIDE:
        return None
    low = rec_row["recall"] - margin
    risk = f", below the target {target_recall:g} at its low end" if low < target_recall else ""
    return (
        f"recall@{k} {rec_row['recall']:.3f} of the recommended {rec_row['design']} is "
        f"±{margin:.3f} (95 % interval over {n} queries){risk}: another sample of as many "
        f"queries, or a rebuild, may land that far off; about {queries_for(margin, n)} queries "
        f"narrow it to ±{WIDE:g}"
    )
