"""Sections a report carries only when the run belongs to something larger, read through the
modules that own them (imported lazily; a section is absent when its module is not installed):

- ``stage_report``: for an experiment, :func:`evaluator.stage_report.build` as a dict (the stages
  side by side and the loss attribution that the HTML page draws as a waterfall);
- ``sweep``: for a run of a sweep, its recall-vs-latency points.
"""

from __future__ import annotations


def stage_report(conn, experiment: str, k: int, rel: int, allow_partial: bool) -> dict | None:
    try:
        from .. import stage_report as sr
    except ImportError:
        return None
    return sr.build(conn, experiment, k=k, rel=rel, allow_partial=allow_partial).as_dict()


def sweep_curve(conn, run) -> dict | None:
    """Recall and p95 latency of every run of the sweep the run belongs to (when it does)."""
    return None


def attach(conn, report: dict, run, exp: dict | None, allow_partial: bool = False) -> None:
    recall_k = max(report["k"].get("recall", [10]))
    if exp is not None:
        section = stage_report(conn, exp["name"], recall_k, report["rel"], allow_partial)
        if section:
            report["stage_report"] = section
    curve = sweep_curve(conn, run)
    if curve:
        report["sweep"] = curve
