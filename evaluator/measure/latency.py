"""Latency percentiles of a run, nearest rank (METRICS.md), read from ``pgeval.run_latency``.

Two sources: ``retrieval`` (pgeval.query_timing, measured at the run's timing boundary; for a
merge without timings of its own, the sum of its inputs' per query: ``pgeval.query_latency``) and
``answer`` (the end-to-end ``latency_ms`` imported with the answers)."""

from __future__ import annotations

from typing import Any

PERCENTILES = (0.5, 0.95, 0.99)
KEYS = {"retrieval": "latency", "answer": "answer_latency"}


def percentiles(
    conn: Any, run_id: int, source: str = "retrieval", fractions: tuple[float, ...] = PERCENTILES
) -> dict:
    """``{"n": 40, "p50_ms": ..., "p95_ms": ..., "p99_ms": ...}``; values None without timings."""
    rows = conn.execute(
        "SELECT percentile, latency_ms, n FROM pgeval.run_latency(%s, %s, %s)",
        (run_id, list(fractions), source),
    ).fetchall()
    out: dict = {"n": rows[0][2] if rows else 0}
    for frac, value, _ in rows:
        out[f"p{percent(frac).replace('.', '_')}_ms"] = value
    if source == "retrieval" and out["n"]:
        summed = end_to_end(conn, run_id)
        if summed:
            out["end_to_end_of"] = summed
    return out


def end_to_end(conn: Any, run_id: int) -> list[str]:
    """The stages whose latencies a merge's adds up per query (none: the run timed itself)."""
    row = conn.execute(
        "SELECT r.params->'inputs' FROM pgeval.run r WHERE r.run_id = %s AND NOT EXISTS "
        "(SELECT 1 FROM pgeval.query_timing t WHERE t.run_id = r.run_id) "
        "AND jsonb_typeof(r.params->'input_runs') = 'array'",
        (run_id,),
    ).fetchone()
    return list(row[0] or []) if row else []


def summary_keys(source: str, values: dict) -> dict:
    """The summary entries of a report: ``latency_p95_ms`` etc.; nothing when there are no
    timings (the metric does not exist for the run)."""
    if not values.get("n"):
        return {}
    prefix = KEYS[source]
    return {f"{prefix}_{k}": v for k, v in values.items() if k.endswith("_ms")}


def percent(frac: float) -> str:
    """A fraction as the percent a key names: 0.95 -> '95', 0.999 -> '99.9'."""
    pct = round(frac * 100, 6)
    return str(int(pct)) if pct == int(pct) else str(pct)
