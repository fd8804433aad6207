"""Writing a stage's output to schema pgeval: the run row (``running`` -> ``complete`` /
``failed``), results by COPY, per-query timings. Every stage uses these; none writes SQL of its own
to pgeval.run/result/query_timing.

Typical use inside ``Stage.run``::

    with store.run_scope(ctx, run_name, params=..., order_rule=ORDER_DISTANCE,
                         timing_boundary=BOUNDARY_ROUND_TRIP) as out:
        for q in ctx.queries:
            rows = ...                               # [(chunk_id, score), ...] in rank order
            out.add(q.query_id, rows, latency_ms=..., rows_returned=...)
    return out.run_id

The run row is committed first (status ``running``) so that progress is visible from another
session; results are flushed by COPY every ``flush_every`` queries; on leaving the block the run
is marked ``complete`` (with ``finished_at``), or ``failed`` when an exception escapes (the
exception is re-raised).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterable, Sequence

from ..errors import Conflict, InputError

FLUSH_EVERY = 500


def create_run(conn, *, name: str, testset_id: int, stage: str, experiment_id: int | None = None,
               repetition: int = 1, params: dict | None = None, order_rule: str,
               depth: int | None = None, timing_boundary: str | None = None,
               config_hash: str | None = None, fingerprint: dict | None = None,
               replace: bool = False) -> int:
    """Insert a ``running`` run and commit; Conflict when the name is taken (unless replace)."""
    with conn.transaction():
        row = conn.execute("SELECT run_id FROM pgeval.run WHERE name = %s", (name,)).fetchone()
        if row is not None:
            if not replace:
                raise Conflict(f"a run named '{name}' exists (choose another experiment name or "
                               "delete it with `pgeval run delete`)")
            conn.execute("DELETE FROM pgeval.run WHERE run_id = %s", row)
        run_id = conn.execute(
            "INSERT INTO pgeval.run (name, testset_id, experiment_id, stage, repetition, params, "
            "order_rule, depth, timing_boundary, status, config_hash, fingerprint) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'running', %s, %s) RETURNING run_id",
            (name, testset_id, experiment_id, stage, repetition, json.dumps(params or {}),
             order_rule, depth, timing_boundary, config_hash,
             None if fingerprint is None else json.dumps(fingerprint))).fetchone()[0]
    _commit(conn)
    return run_id


def _commit(conn) -> None:
    if not conn.autocommit:
        conn.commit()


def _copy_text(value) -> str:
    if value is None:
        return "\\N"
    s = str(value)
    if any(c in s for c in "\\\t\n\r"):
        s = s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return s


def copy_rows(conn, table: str, columns: Sequence[str], rows: Iterable[Sequence]) -> int:
    """COPY ``rows`` into pgeval.``table`` (fixed table/column names from this package only)."""
    from psycopg import sql

    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier("pgeval", table), sql.SQL(", ").join(map(sql.Identifier, columns)))
    n = 0
    with conn.cursor().copy(stmt) as copy:
        buf = []
        for r in rows:
            buf.append("\t".join(_copy_text(v) for v in r) + "\n")
            n += 1
            if len(buf) >= 8192:
                copy.write("".join(buf))
                buf.clear()
        if buf:
            copy.write("".join(buf))
    return n


def write_results(conn, run_id: int, rows: Iterable[tuple[str, int, str, float | None]]) -> int:
    """COPY (query_id, rank, chunk_id, score) rows of ``run_id``."""
    return copy_rows(conn, "result", ("run_id", "query_id", "rank", "chunk_id", "score"),
                     ((run_id, q, r, c, s) for q, r, c, s in rows))


def write_timings(conn, run_id: int,
                  rows: Iterable[tuple[str, float, float | None, int]]) -> int:
    """COPY (query_id, latency_ms, server_ms, rows_returned) rows of ``run_id``."""
    return copy_rows(conn, "query_timing",
                     ("run_id", "query_id", "latency_ms", "server_ms", "rows_returned"),
                     ((run_id, q, lat, srv, n) for q, lat, srv, n in rows))


def finish_run(conn, run_id: int, status: str = "complete", params: dict | None = None) -> None:
    """Mark a run complete/failed; ``params`` are merged into run.params (jsonb ||)."""
    conn.execute("UPDATE pgeval.run SET status = %s, finished_at = now(), "
                 "params = params || %s::jsonb WHERE run_id = %s",
                 (status, json.dumps(params or {}), run_id))
    _commit(conn)


class RunWriter:
    """Buffers one run's results and timings and flushes them by COPY."""

    def __init__(self, conn, run_id: int, depth: int | None = None,
                 flush_every: int = FLUSH_EVERY):
        self.conn, self.run_id, self.depth = conn, run_id, depth
        self.flush_every = flush_every
        self.params: dict = {}          # merged into run.params when the run completes
        self._results: list[tuple] = []
        self._timings: list[tuple] = []
        self._pending = 0
        self.queries = 0
        self.rows = 0

    def add(self, query_id: str, ranked: Sequence[tuple[str, float | None]], *,
            latency_ms: float | None = None, server_ms: float | None = None,
            rows_returned: int | None = None) -> None:
        """``ranked``: [(chunk_id, score)] in rank order (already deduplicated, best first).
        A timing row is written when ``latency_ms`` is given."""
        if self.depth is not None and len(ranked) > self.depth:
            ranked = ranked[: self.depth]
        seen = set()
        for rank, (chunk, score) in enumerate(ranked, 1):
            if chunk in seen:  # a stage bug, not a user mistake: refuse to store it
                raise InputError(f"stage returned chunk '{chunk}' twice for query '{query_id}'")
            seen.add(chunk)
            self._results.append((query_id, rank, str(chunk),
                                  None if score is None else float(score)))
        if latency_ms is not None:
            self._timings.append((query_id, float(latency_ms), server_ms,
                                  len(ranked) if rows_returned is None else int(rows_returned)))
        self.queries += 1
        self.rows += len(ranked)
        self._pending += 1
        if self._pending >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if not self._results and not self._timings:
            self._pending = 0
            return
        with self.conn.transaction():
            if self._results:
                write_results(self.conn, self.run_id, self._results)
            if self._timings:
                write_timings(self.conn, self.run_id, self._timings)
        _commit(self.conn)
        self._results.clear()
        self._timings.clear()
        self._pending = 0


@contextmanager
def run_scope(ctx, run_name: str, *, params: dict, order_rule: str,
              timing_boundary: str | None, config_hash: str | None = None, replace: bool = False):
    """Create the run (``running``), yield a :class:`RunWriter`, then mark it ``complete``
    (params merged with ``writer.params``) or ``failed`` when an exception escapes."""
    run_id = create_run(ctx.results, name=run_name, testset_id=ctx.testset_id, stage=ctx.stage,
                        experiment_id=ctx.experiment_id, repetition=ctx.repetition, params=params,
                        order_rule=order_rule, depth=ctx.depth, timing_boundary=timing_boundary,
                        config_hash=config_hash or ctx.extra.get("config_hash"),
                        fingerprint=ctx.extra.get("fingerprint"), replace=replace)
    writer = RunWriter(ctx.results, run_id, ctx.depth)
    try:
        yield writer
        writer.flush()
    except BaseException:
        try:
            if ctx.results.info.transaction_status != 0:  # not idle: drop the failed txn first
                ctx.results.rollback()
            finish_run(ctx.results, run_id, "failed", writer.params)
        except Exception:  # the connection itself is gone: the run stays 'running'
            pass
        raise
    finish_run(ctx.results, run_id, "complete", writer.params)
