"""Throughput under load (`pgeval sweep --concurrency N`): N client connections run the stage's own
statement (vector_sql.application, the stage's settings by SET LOCAL in a READ ONLY transaction)
over the whole query list each, starting together; queries per second = all queries / wall time
from the common start to the last client's end. The stage run itself (results, per-query latency)
stays single-client, so its ranked lists and latencies are comparable across concurrency levels.

Behind a transaction pooler each client's transaction holds a server connection, and so does the
sweep's exported snapshot (:mod:`.snapshot`) for the whole sweep: N new clients would need N + 1,
and in a pool of N the last one would wait for the pooler's ``query_wait_timeout``. The snapshot's
connection (``held``) therefore serves as the first client, inside a savepoint of its own
transaction (its settings by SET LOCAL, rolled back to the savepoint after): N clients, N server
connections.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...core.db import Database

import numpy as np


def throughput(database: Database, stage: Any, ctx: Any, clients: int, held: Any = None) -> float:
    """Queries per second of ``clients`` concurrent connections running ``ctx.queries``;
    ``held``, a connection in a READ ONLY transaction of its own (the sweep's snapshot), is the
    first of them (module docstring)."""
    from dataclasses import replace

    from ...core.vector_types import register_vector
    from ...stages import gucs, vector_sql

    if hasattr(stage, "search_target"):  # the kind's own statement (hnsw-halfvec, hnsw-bq)
        ctx = replace(ctx, target=stage.search_target(ctx.target))
    kw = stage.sql_kw(ctx) if hasattr(stage, "sql_kw") else {}
    stmt, params, _ = vector_sql.application(ctx.target, ctx.depth, **kw)
    vectors = [np.asarray(q.embedding, dtype=np.float32) for q in ctx.queries]
    own = [database.connect(results=False, read_only=True) for _ in range(clients - bool(held))]
    conns = ([held] if held is not None else []) + own
    start = threading.Barrier(clients + 1)
    errors: list[BaseException] = []
    ends: list[float] = []
    lock = threading.Lock()

    def client(i: int, conn: Any) -> None:
        try:
            if conn is held:  # its own transaction goes on: a savepoint, the settings in it
                conn.execute("SAVEPOINT pgeval_load")
                register_vector(conn)
                gucs.load_libraries(conn)
                gucs.apply_local(conn, stage.stage_settings(ctx))
            else:  # the stage's own transaction: READ ONLY, its settings by SET LOCAL
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
            if conn is held:  # its settings undone; the snapshot's transaction goes on
                try:
                    conn.execute("ROLLBACK TO SAVEPOINT pgeval_load")
                    conn.execute("RELEASE SAVEPOINT pgeval_load")
                except Exception as exc:  # noqa: BLE001 - the snapshot's session is gone
                    errors.append(exc)
            else:
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
        for c in own:
            c.close()
    if errors:
        raise errors[0]
    wall = max(ends) - t0
    return clients * len(vectors) / wall if wall > 0 else float("nan")
