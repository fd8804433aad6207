"""Throughput under load (`pgeval sweep --concurrency N`): N client connections run the stage's own
statement (vector_sql.application, the stage's settings by SET LOCAL in a READ ONLY transaction)
over the whole query list each, starting together; queries per second = all queries / wall time
from the common start to the last client's end. The stage run itself (results, per-query latency)
stays single-client, so its ranked lists and latencies are comparable across concurrency levels.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...core.db import Database

import numpy as np


def throughput(database: Database, stage: Any, ctx: Any, clients: int) -> float:
    """Queries per second of ``clients`` concurrent connections running ``ctx.queries``."""
    from dataclasses import replace

    from ...stages import gucs, vector_sql

    if hasattr(stage, "search_target"):  # the kind's own statement (hnsw-halfvec, hnsw-bq)
        ctx = replace(ctx, target=stage.search_target(ctx.target))
    kw = stage.sql_kw(ctx) if hasattr(stage, "sql_kw") else {}
    stmt, params, _ = vector_sql.application(ctx.target, ctx.depth, **kw)
    vectors = [np.asarray(q.embedding, dtype=np.float32) for q in ctx.queries]
    conns = [database.connect(results=False, read_only=True) for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    errors: list[BaseException] = []
    ends: list[float] = []
    lock = threading.Lock()

    def client(i: int, conn: Any) -> None:
        try:
            # the stage's own transaction: READ ONLY, its settings by SET LOCAL
            stage.begin(replace(ctx, kb=conn, warnings=[], extra=dict(ctx.extra)))
            if ctx.extra.get(f"{ctx.stage}.force_custom"):
                gucs.apply_local(conn, {"plan_cache_mode": "force_custom_plan"})
            text = stmt.as_string(conn)
            cur = conn.cursor()
            order = vectors[i % len(vectors) :] + vectors[: i % len(vectors)]
            cur.execute(text, dict(params, q=order[0]), prepare=True)  # plan once, untimed
            cur.fetchall()
            start.wait()
            for v in order:
                cur.execute(text, dict(params, q=v), prepare=True)
                cur.fetchall()
            with lock:
                ends.append(time.perf_counter())
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
            try:
                start.abort()
            except Exception:
                pass
        finally:
            conn.rollback()

    threads = [
        threading.Thread(target=client, args=(i, c), daemon=True) for i, c in enumerate(conns)
    ]
    try:
        for t in threads:
            t.start()
        try:
            start.wait()
        except threading.BrokenBarrierError:
            pass
        t0 = time.perf_counter()
        for t in threads:
            t.join()
    finally:
        for c in conns:
            c.close()
    if errors:
        raise errors[0]
    wall = max(ends) - t0
    return clients * len(vectors) / wall if wall > 0 else float("nan")
