"""How the stages that run one statement per query time it: the prepared statement executed and
fetched on the client (:data:`~evaluator.stages.base.BOUNDARY_ROUND_TRIP`), and with
``--server-timing`` the server's execution time from a second execution under
``EXPLAIN (ANALYZE, TIMING OFF)`` (:data:`~evaluator.stages.base.BOUNDARY_SERVER`). Batch mode
(one set-based statement) has no per-query timing (:data:`~evaluator.stages.base.BOUNDARY_BATCH`).

Typical use inside a stage's per-query loop::

    timed = TimedStatement(ctx.kb, stmt, ctx.server_timing)
    for q in ctx.queries:
        rows, latency_ms, server_ms = timed.execute(dict(params, q=...))
        out.add(q.query_id, ..., latency_ms=latency_ms, server_ms=server_ms, ...)
"""

from __future__ import annotations

import time
from typing import Any

from psycopg import sql

from .base import BOUNDARY_BATCH, BOUNDARY_ROUND_TRIP, BOUNDARY_SERVER


def boundary(ctx: Any, timed: str | None = None) -> str:
    """The ``run.timing_boundary`` of a stage run under ``ctx`` (batch, round trip, + server);
    ``timed``: what the timed statement is, when the stage says it."""
    what = f"; timed: {timed}" if timed else ""
    if ctx.batch:
        return BOUNDARY_BATCH + what
    return (
        BOUNDARY_ROUND_TRIP
        + what
        + ("; server_ms: " + BOUNDARY_SERVER if ctx.server_timing else "")
    )


class TimedStatement:
    """One statement executed per query on ``kb``: prepared (psycopg ``prepare=True``), timed from
    execute to the last row fetched; ``server_timing`` adds the EXPLAIN ANALYZE execution time."""

    def __init__(self, kb: Any, stmt: sql.Composable, server_timing: bool = False):
        self.text = stmt.as_string(kb)
        self.explain = (
            (sql.SQL("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ") + stmt).as_string(kb)
            if server_timing
            else None
        )
        self.cur = kb.cursor()

    def execute(self, params: dict) -> tuple[list, float, float | None]:
        """(rows, client latency in ms, server execution time in ms or None)."""
        t0 = time.perf_counter()
        self.cur.execute(self.text, params, prepare=True)
        rows = self.cur.fetchall()
        latency_ms = (time.perf_counter() - t0) * 1000.0
        server_ms = None
        if self.explain:
            plan = self.cur.execute(self.explain, params).fetchone()[0]
            server_ms = float(plan[0]["Execution Time"])
        return rows, latency_ms, server_ms
