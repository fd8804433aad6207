"""Sections a report carries only when the run belongs to something larger, read through the
modules that own them (imported lazily; a section is absent when its module is not installed):

- ``stage_report``: for an experiment, :func:`evaluator.measure.stage_report.build` as a dict (the stages
  side by side and the loss attribution that the HTML page draws as a waterfall);
- ``sweep``: for a run of a sweep, its recall-vs-latency points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..measure.metrics import RunInfo


def stage_report(conn: Any, experiment: str, k: int, rel: int, allow_partial: bool) -> dict | None:
    try:
        from ..measure import stage_report as sr
    except ImportError:
        return None
    return sr.build(conn, experiment, k=k, rel=rel, allow_partial=allow_partial).as_dict()


def sweep_curve(conn: Any, run_id: int) -> dict | None:
    """Recall and p95 latency of every point of the sweep the run belongs to, its operating
    points (pgeval.sweep_summary); None when it belongs to none."""
    try:
        from ..measure.operating_points import stored_points
        from ..measure.recall_distribution import text as recall_tail_text
    except ImportError:
        return None
    if conn.execute("SELECT to_regclass('pgeval.sweep_point') IS NULL").fetchone()[0]:
        return None
    row = conn.execute(
        "SELECT p.sweep_id, p.point, s.name, s.k, s.target_recall, s.grid "
        "FROM pgeval.sweep_point p JOIN pgeval.sweep s USING (sweep_id) "
        "WHERE p.run_id = %s ORDER BY p.sweep_id DESC LIMIT 1",
        (run_id,),
    ).fetchone()
    if row is None:
        return None
    sweep_id, current, name, k, target, grid = row
    ops = stored_points(conn, sweep_id, target)
    use_index = any(p.recall is not None for p in ops.points)
    metric = f"index recall@{k}" if use_index else f"recall@{k}"
    params = list((grid or {}).get("params") or {}) + list((grid or {}).get("build") or {})
    return {
        "name": name,
        "param": ", ".join(params) or name,
        "metric": metric,
        "k": k,
        "target_recall": target,
        "points": [
            {
                "label": p.label,
                "current": p.point == current,
                "recall": p.recall if use_index else p.metrics.get(f"recall@{k}"),
                # "9 queries at 0.0: …": the per-query tail of the point's index recall
                "recall tail": recall_tail_text(p.row.get("recall_tail")) if use_index else None,
                "latency_p95_ms": p.p95_ms,
                "qps": p.qps,
                # the spread over repetitions and the index size (a build sweep): the hover
                "recall_sd": p.recall_sd if use_index else None,
                "index_bytes": p.index_bytes,
                "pareto": p.pareto,
                "repetitions": p.repetitions,
            }
            for p in ops.points
        ],
    }


def attach(
    conn: Any, report: dict, run: RunInfo, exp: dict | None, allow_partial: bool = False
) -> None:
    recall_k = max(report["k"].get("recall", [10]))
    if exp is not None:
        section = stage_report(conn, exp["name"], recall_k, report["rel"], allow_partial)
        if section:
            report["stage_report"] = section
    curve = sweep_curve(conn, run.run_id)
    if curve:
        report["sweep"] = curve
