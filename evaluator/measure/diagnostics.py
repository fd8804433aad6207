"""Query plans of flagged queries (METRICS.md "Diagnostics"): for every low-recall and
poor-ranking query of a run (pgeval.flagged), the ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` of
the vector stage that served it, stored in pgeval.query_plan and shown by `pgeval plans RUN`.

The statement is re-run through the stage framework: the stage's own transaction
(:meth:`VectorStage.begin`: READ ONLY, the run's recorded settings by SET LOCAL, the same index
isolation) and its own SQL (``vector_sql.per_query`` with the run's depth and overfetch), with
the query's stored embedding. When the run is not a vector stage (merge, rerank, bm25, import),
the plans are those of the vector stages of the same experiment and repetition — the retrieval
paths that fed it. Plans describe the database *now*; the capture time is stored with them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg import sql

from ..kinds.registry import vector_kinds
from .run_lookup import no_such_run

if TYPE_CHECKING:
    from ..core.db import Database
    from ..stages.base import StageContext

VECTOR_KINDS = vector_kinds()  # exact search and the ANN kinds (kinds.registry)


@dataclass
class RunRef:
    run_id: int
    name: str
    stage: str
    kind: str
    testset_id: int
    experiment_id: int | None
    repetition: int
    depth: int | None
    params: dict


# a RunRef's columns of pgeval.run
_RUN = (
    "SELECT run_id, name, stage, coalesce(params->>'kind', stage), testset_id, experiment_id, "
    "repetition, depth, params FROM pgeval.run"
)


def _run(conn: Any, name: str) -> RunRef:
    row = conn.execute(_RUN + " WHERE name = %s", (name,)).fetchone()
    if row is None:
        raise no_such_run(conn, name)
    return RunRef(*row)


def serving_runs(conn: Any, run: RunRef) -> list[RunRef]:
    """The vector runs whose plans explain ``run``'s results."""
    if run.kind in VECTOR_KINDS:
        return [run]
    if run.experiment_id is None:
        return []
    rows = conn.execute(
        _RUN + " WHERE experiment_id = %s AND repetition = %s "
        "AND coalesce(params->>'kind', stage) = ANY(%s) ORDER BY run_id",
        (run.experiment_id, run.repetition, list(VECTOR_KINDS)),
    ).fetchall()
    return [RunRef(*r) for r in rows]


def flagged(conn: Any, run: RunRef, measures: list[str] | None = None) -> list[dict]:
    from . import metrics

    return metrics.flagged(conn, run.run_id, measures or metrics.measures_for())


def stored(conn: Any, run_ids: list[int]) -> dict[tuple[int, str], dict]:
    return {
        (r, q): p
        for r, q, p in conn.execute(
            "SELECT run_id, query_id, plan FROM pgeval.query_plan WHERE run_id = ANY(%s)",
            (run_ids,),
        ).fetchall()
    }


def _embeddings(conn: Any, testset_id: int, label: str | None, query_ids: list[str]) -> dict:
    rows = conn.execute(
        "SELECT query_id, embedding::text FROM pgeval.query_embedding WHERE testset_id = %s "
        "AND embedder = %s AND query_id = ANY(%s)",
        (testset_id, label, query_ids),
    ).fetchall()
    return {q: np.array(v.strip("[]").split(","), dtype=np.float32) for q, v in rows}


def capture(
    database: Database, run_name: str, *, refresh: bool = False, measures: list[str] | None = None
) -> dict:
    """Capture (or keep) the plans of ``run_name``'s flagged queries; returns counts."""
    from ..kinds import registry
    from ..stages.base import StageContext
    from ..targets import targets

    with database.connect() as res:
        run = _run(res, run_name)
        flags = flagged(res, run, measures)
        qids = sorted({f["query_id"] for f in flags})
        runs = serving_runs(res, run)
        have = stored(res, [r.run_id for r in runs])
        res.commit()
        out: dict[str, Any] = {
            "flagged_queries": len(qids),
            "captured": 0,
            "kept": 0,
            "no_embedding": 0,
            "runs": [r.name for r in runs],
        }
        if not qids or not runs:
            return out
        isolated = any((r.params or {}).get("isolated_from") for r in runs)
        with database.connect(results=False, read_only=not isolated) as kb:
            for r in runs:
                todo = [q for q in qids if refresh or (r.run_id, q) not in have]
                out["kept"] += len(qids) - len(todo)
                if not todo:
                    continue
                p = r.params or {}
                target = targets.load(res, p.get("target"))  # type: ignore[arg-type]  # a vector run names its target
                vecs = _embeddings(res, r.testset_id, p.get("embedder"), todo)
                out["no_embedding"] += len([q for q in todo if q not in vecs])
                stage = registry.get(r.kind)
                ctx = StageContext(
                    kb=kb,
                    results=res,
                    target=target,
                    testset="",
                    testset_id=r.testset_id,
                    experiment=None,
                    experiment_id=r.experiment_id,
                    repetition=r.repetition,
                    stage=r.stage,
                    depth=r.depth or 100,
                    settings={k: str(v) for k, v in (p.get("settings") or {}).items()},
                    options={"overfetch": str(p.get("overfetch") or 1.0)},
                    isolate_index=bool(p.get("isolated_from")),
                )
                plans = _explain(stage, ctx, [(q, vecs[q]) for q in todo if q in vecs])
                with res.transaction():
                    for q, plan in plans:
                        res.execute(
                            "INSERT INTO pgeval.query_plan (run_id, query_id, plan) "
                            "VALUES (%s, %s, %s) ON CONFLICT (run_id, query_id) DO "
                            "UPDATE SET plan = EXCLUDED.plan",
                            (r.run_id, q, json.dumps(plan)),
                        )
                res.commit()
                out["captured"] += len(plans)
    return out


def _explain(stage: Any, ctx: StageContext, queries: Any) -> list[tuple[str, dict]]:
    """EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of each query inside the stage's transaction."""
    assert ctx.target is not None  # a stage with a table has a target
    from datetime import datetime, timezone

    from ..stages import vector_sql

    if not queries:
        return []
    tx = stage.begin(ctx)
    try:
        stmt, params, _ = vector_sql.per_query(ctx.target, ctx.depth, **stage.sql_kw(ctx))
        explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + stmt
        forced = {
            k: v
            for k, v in tx["settings"].items()
            if k.startswith("enable_") and str(v).lower() in ("off", "false", "0")
        }
        out = []
        for qid, vec in queries:
            doc = ctx.kb.execute(explain, dict(params, q=vec)).fetchone()[0]  # type: ignore[index]  # EXPLAIN: one row
            if isinstance(doc, str):
                doc = json.loads(doc)
            plan = {
                "explain": doc[0],
                "settings": tx["settings"],
                "captured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
            if forced:  # the run forced the planner: what it chooses by itself, next to it
                plan["chosen"] = _unforced(ctx.kb, stmt, dict(params, q=vec), forced)
            out.append((qid, plan))
        return out
    finally:
        ctx.kb.rollback()


def _unforced(kb: Any, stmt: Any, params: dict, forced: dict) -> dict:
    """The plan (EXPLAIN, not run) without the run's ``enable_* = off`` settings (each back to
    the session's value), in a savepoint of the stage's transaction, rolled back."""
    from ..stages.plan_check import explain

    with kb.transaction(force_rollback=True):
        for name in forced:
            kb.execute(
                "SELECT set_config(name, reset_val, true) FROM pg_settings WHERE name = %s", (name,)
            )
        plan = explain(kb, stmt, params)
    return {"plan": plan, "without": sorted(forced)}


def summarize(plan: dict) -> dict:
    """What a person reads first: access path (and, for a forced run, the planner's own
    choice), rows, time, buffers."""
    from ..stages.plan_check import access_path

    top = plan["explain"]["Plan"]
    chosen = plan.get("chosen")
    return {
        "access": access_path(top),
        "chosen_access": access_path(chosen["plan"]) if chosen else None,
        "forced_by": ", ".join(f"{k}=off" for k in chosen["without"]) if chosen else None,
        "rows": top.get("Actual Rows"),
        "execution_ms": plan["explain"].get("Execution Time"),
        "planning_ms": plan["explain"].get("Planning Time"),
        "shared_hit": top.get("Shared Hit Blocks"),
        "shared_read": top.get("Shared Read Blocks"),
        "captured_at": plan.get("captured_at"),
    }


def show(database: Database, run_name: str, measures: list[str] | None = None) -> list[dict]:
    """One row per flagged query and serving run, with the plan summary (None when missing)."""
    from ..core.db import snapshot

    with snapshot(database) as res:
        return show_in(res, run_name, measures)


def show_in(res: Any, run_name: str, measures: list[str] | None = None) -> list[dict]:
    """:func:`show` on an open connection (the caller's snapshot)."""
    run = _run(res, run_name)
    flags = flagged(res, run, measures)
    runs = serving_runs(res, run)
    plans = stored(res, [r.run_id for r in runs])
    rows = []
    for f in flags:
        for r in runs:
            plan = plans.get((r.run_id, f["query_id"]))
            summary = summarize(plan) if plan else {"access": None}
            # the flag's query_id, flag, measure and value, then the stage run's plan
            rows.append({**f, "stage_run": r.name, **summary, "plan": plan})
    return rows
