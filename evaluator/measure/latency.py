"""Latency percentiles of a run, nearest rank (METRICS.md), read from ``pgeval.run_latency``.

Two sources: ``retrieval`` (pgeval.query_timing, measured at the run's timing boundary) and
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
        out[f"p{_label(frac)}_ms"] = value
    return out


def summary_keys(source: str, values: dict) -> dict:
    """The summary entries of a report: ``latency_p95_ms`` etc.; nothing when there are no
    timings (the metric does not exist for the run)."""
    if not values.get("n"):
        return {}
    prefix = KEYS[source]
    return {f"{prefix}_{k}": v for k, v in values.items() if k != "n"}


def _label(frac: float) -> str:
    pct = round(frac * 100, 6)
    return str(int(pct)) if pct == int(pct) else str(pct).replace(".", "_")
