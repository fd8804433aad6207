"""Writing a stage's output to schema pgeval: the run row (``running`` -> ``complete`` /
``failed``), results by COPY, per-query timings. Every stage uses these; none writes SQL of its own
to pgeval.run/result_list/query_timing.

Typical use inside ``Stage.run``::

    with store.run_scope(ctx, run_name, params=..., order_rule=ORDER_DISTANCE,
                         timing_boundary=BOUNDARY_ROUND_TRIP) as out:
        for q in ctx.queries:
            rows = ...                               # [(chunk_id, score), ...] in rank order
            out.add(q.query_id, rows, latency_ms=..., rows_returned=...)
    return out.run_id

The run row is committed first (status ``running``) so that progress is visible from another
session; results are flushed by COPY every ``FLUSH_SECONDS`` (or ``flush_every`` queries, or
``FLUSH_ITEMS`` list elements, whichever comes first), one pgeval.result_list row per query's
ranked list with the judged grades joined by the writer; on leaving the block the run
is marked ``complete`` (with ``finished_at``), or ``failed`` when an exception escapes (the
exception is re-raised).

Resumable (issue 5): each flush also writes one ``pgeval.run_progress`` row per query it holds,
in the same transaction as the query's results and timing, and refreshes ``run.heartbeat_at``;
the run row names the writing process (``pid``, ``host``). A run becomes ``complete`` only when
every query of its test set has its progress row. ``ctx.reopen`` (given by resume) makes
:func:`run_scope` continue that run (``ctx.queries`` = the missing queries) instead of creating
one — see :mod:`evaluator.run.resume`.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import accumulate, chain, islice
from typing import TYPE_CHECKING, Any

from ..core.db import client_name
from ..core.errors import Conflict, IncompleteRun, InputError

if TYPE_CHECKING:
    from .base import StageContext

# a run's buffered answers are written when any of these is reached (and at the end): a killed
# run loses at most about FLUSH_SECONDS of answered queries, which `pgeval run resume` runs again.
# Each write costs a fixed few round trips and commit: on 1,000 HNSW queries (about 1 s), ten
# writes of 100 queries took 0.17 s and one of 1,000 took 0.06 s (bench/runner_overhead.py)
FLUSH_SECONDS = 2.0
FLUSH_EVERY = 10_000  # queries
FLUSH_ITEMS = 200_000  # list elements (about 20 MB of Python objects)


def create_run(
    conn: Any,
    *,
    name: str,
    testset_id: int,
    stage: str,
    experiment_id: int | None = None,
    repetition: int = 1,
    params: dict | None = None,
    order_rule: str,
    depth: int | None = None,
    timing_boundary: str | None = None,
    config_hash: str | None = None,
    fingerprint: dict | None = None,
    replace: bool = False,
) -> int:
    """Insert a ``running`` run and commit; Conflict when the name is taken (unless replace)."""
    with conn.transaction():
        row = conn.execute("SELECT run_id FROM pgeval.run WHERE name = %s", (name,)).fetchone()
        if row is not None:
            if not replace:
                raise Conflict(
                    f"a run named '{name}' exists (choose another experiment name or "
                    "delete it with `pgeval run delete`)"
                )
            conn.execute("DELETE FROM pgeval.run WHERE run_id = %s", row)
        run_id = conn.execute(
            "INSERT INTO pgeval.run (name, testset_id, experiment_id, stage, repetition, params, "
            "order_rule, depth, timing_boundary, status, config_hash, fingerprint, pid, host, "
            "heartbeat_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'running', %s, %s, %s, "
            "%s, now()) RETURNING run_id",
            (
                name,
                testset_id,
                experiment_id,
                stage,
                repetition,
                json.dumps(params or {}),
                order_rule,
                depth,
                timing_boundary,
                config_hash,
                None if fingerprint is None else json.dumps(fingerprint),
                os.getpid(),
                socket.gethostname(),
            ),
        ).fetchone()[0]
    _commit(conn)
    return run_id


def create_stage_run(
    ctx: Any,
    run_name: str,
    *,
    params: dict,
    order_rule: str,
    depth: int | None,
    timing_boundary: str | None,
    config_hash: str | None = None,
    replace: bool = False,
) -> int:
    """:func:`create_run` for a stage of an experiment: test set, stage, experiment, repetition,
    config hash and fingerprint come from ``ctx`` (a :class:`StageContext`)."""
    return create_run(
        ctx.results,
        name=run_name,
        testset_id=ctx.testset_id,
        stage=ctx.stage,
        experiment_id=ctx.experiment_id,
        repetition=ctx.repetition,
        params=params,
        order_rule=order_rule,
        depth=depth,
        timing_boundary=timing_boundary,
        config_hash=config_hash or ctx.extra.get("config_hash"),
        fingerprint=ctx.extra.get("fingerprint"),
        replace=replace,
    )


def _commit(conn: Any) -> None:
    if not conn.autocommit:
        conn.commit()


# the arrays of a list already in binary format (.list_arrays): bytea sends the bytes as built
LIST_COLUMNS = (
    ("run_id", "int8"),
    ("query_id", "text"),
    ("grades", "bytea"),
    ("scores", "bytea"),
    ("chunk_ids", "bytea"),
)
TIMING_COLUMNS = (
    ("run_id", "int8"),
    ("query_id", "text"),
    ("latency_ms", "float8"),
    ("server_ms", "float8"),
    ("rows_returned", "int4"),
)
PROGRESS_COLUMNS = (("run_id", "int8"), ("query_id", "text"))
FAILURE_COLUMNS = (
    ("run_id", "int8"),
    ("query_id", "text"),
    ("status", "int4"),
    ("message", "text"),
    ("attempts", "int4"),
)


def copy_rows(
    conn: Any, table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence]
) -> int:
    """Binary COPY of ``rows`` into pgeval.``table``; ``columns`` are (name, type) pairs (fixed
    names from this package only). psycopg's C dumpers format the rows."""
    from psycopg import sql

    stmt = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier("pgeval", table), sql.SQL(", ").join(sql.Identifier(c) for c, _ in columns)
    )
    n = 0
    with conn.cursor().copy(stmt) as copy:
        copy.set_types([t for _, t in columns])
        for r in rows:
            copy.write_row(r)
            n += 1
    return n


def judged_grades(conn: Any, run_id: int, query_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """{query_id: {chunk_id: grade}}: the judgements of ``query_ids`` in the run's test set, read
    in the writer's transaction (ids compare exactly, as the "C" collation does)."""
    grades: dict[str, dict[str, int]] = {}
    for qid, chunk, grade in conn.execute(
        "SELECT j.query_id, j.chunk_id, j.grade FROM pgeval.qrel j JOIN pgeval.run r "
        "ON r.testset_id = j.testset_id WHERE r.run_id = %s AND j.query_id = ANY(%s)",
        (run_id, list(query_ids)),
    ):
        grades.setdefault(qid, {})[chunk] = grade
    return grades


def copy_encoded(conn: Any, rows: Iterable[tuple[int, str, bytes, bytes, bytes]]) -> int:
    """Binary COPY of (run_id, query_id, grades, scores, chunk ids) rows into
    pgeval.result_list, the arrays already in binary format: COPY sends them as they are."""
    return copy_rows(conn, "result_list", LIST_COLUMNS, rows)


def write_lists(
    conn: Any,
    run_id: int,
    lists: Iterable[tuple[str, list[str], list]],
    grades: dict[str, dict[str, int]],
) -> int:
    """COPY (query_id, chunk ids, scores) ranked lists of ``run_id`` into pgeval.result_list, each
    with the judged grade of every chunk (``grades``: :func:`judged_grades`). Empty lists are not
    stored (a query without results has no list). Returns the lists written."""
    return copy_columns(conn, run_id, ranked_columns([r for r in lists if r[1]]), grades)


def ranked_columns(
    results: Sequence[tuple[str, Sequence, Sequence]],
) -> tuple[list[str], list[str], list[float | None], list[int]]:
    """(query ids, chunk ids, scores, cuts) of a batch of (query id, chunk ids, scores) ranked
    lists, as whole-batch columns: list ``i`` is rows ``cuts[i]:cuts[i + 1]``. Ids become text
    (when they are not) and scores floats at C speed; a list naming a chunk twice is refused (a
    stage bug, not a user mistake)."""
    qids = [q for q, _, _ in results]
    cuts = [0, *accumulate(len(c) for _, c, _ in results)]
    chunks = list(chain.from_iterable(c for _, c, _ in results))
    try:
        "".join(chunks)  # every id text already (stages select ids as text): nothing to convert
    except TypeError:
        chunks = list(map(str, chunks))
    values = list(chain.from_iterable(v for _, _, v in results))
    scores: list[float | None]
    try:
        scores = list(map(float, values))
    except TypeError:  # a score of None (a stage without scores for some results)
        scores = [None if v is None else float(v) for v in values]
    for q, a, b in zip(qids, cuts, islice(cuts, 1, None)):
        if len(set(chunks[a:b])) != b - a:
            seen: set = set()
            # seen.add() is None (falsy): the idiom records the id and goes on
            dup = next(c for c in chunks[a:b] if c in seen or seen.add(c))  # type: ignore[func-returns-value]
            raise InputError(f"stage returned chunk '{dup}' twice for query '{q}'")
    return qids, chunks, scores, cuts


def copy_columns(
    conn: Any,
    run_id: int,
    columns: tuple[list[str], list[str], list[float | None], list[int]],
    grades: dict[str, dict[str, int]],
) -> int:
    """COPY the ranked lists of :func:`ranked_columns` into pgeval.result_list, each with the
    judged grade of every chunk (``grades``: {query: {chunk: grade}}). The arrays are built in
    binary format by :mod:`.list_arrays`, a few thousand elements at a time (psycopg's array
    dumper would make a Python step per element), each batch as the COPY reaches it."""
    from .list_arrays import encode_flat, grade_array

    qids, chunks, scores, cuts = columns
    return copy_encoded(
        conn,
        (
            (run_id, q, grade_array(grades.get(q), chunks, a, b), f, t)
            for q, a, b, (t, f) in zip(
                qids, cuts, islice(cuts, 1, None), encode_flat(chunks, scores, cuts)
            )
        ),
    )


def touch_run(conn: Any, run_id: int) -> None:
    """Refresh the run's heartbeat, locking its row until the transaction ends: the run's rows
    written in that transaction can never outlive it (they have no foreign key to pgeval.run; a
    concurrent ``DELETE`` of the run waits, and its trigger then deletes them). Conflict when
    another session deleted the run (its experiment's test set replaced or deleted)."""
    if (
        conn.execute(
            "UPDATE pgeval.run SET heartbeat_at = now() WHERE run_id = %s RETURNING run_id",
            (run_id,),
        ).fetchone()
        is None
    ):
        raise Conflict(f"run {run_id} was deleted by another session while it was written")


def finish_run(
    conn: Any, run_id: int, status: str = "complete", params: dict | None = None
) -> None:
    """Mark a run complete/failed; ``params`` are merged into run.params (jsonb ||), which
    loses an earlier ``stopped`` (a run interrupted by Ctrl-C, then resumed)."""
    conn.execute(
        "UPDATE pgeval.run SET status = %s, finished_at = now(), "
        "params = (params - 'stopped') || %s::jsonb WHERE run_id = %s",
        (status, json.dumps(params or {}), run_id),
    )
    _commit(conn)


class RunWriter:
    """Buffers one run's results and timings and flushes them by COPY every ``flush_seconds``
    (or ``flush_every`` queries, or :data:`FLUSH_ITEMS` list elements, whichever comes first),
    between two queries: never while a query is timed. (A writer thread overlapping
    the two was measured, 1,000 HNSW queries, seven rounds: p99 latency 2.8-6.7 ms against
    1.6-2.7 ms for a bare loop, as the thread held the interpreter and the server's CPU while a
    query's answer waited; writing in line kept p99 at 1.6-2.5 ms, at about the same wall
    time. See docs/TIMING.md.)"""

    def __init__(
        self,
        conn: Any,
        run_id: int,
        depth: int | None = None,
        flush_every: int = FLUSH_EVERY,
        exclude_own: bool = False,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        self.conn, self.run_id, self.depth = conn, run_id, depth
        self.exclude_own = exclude_own  # sampled queries: a query's own chunk is never a result
        self.flush_every = flush_every
        self.flush_seconds = flush_seconds
        self._due = time.monotonic() + flush_seconds
        self._items = 0
        self.params: dict = {}  # merged into run.params when the run completes
        self._results: list[tuple] = []
        self._timings: list[tuple] = []
        self._done: list[str] = []  # queries wholly added: their pgeval.run_progress rows
        self._failures: list[tuple] = []  # pgeval.query_failure rows (service stages)
        self.failures = 0
        self._pending = 0
        self.queries = 0
        self.rows = 0

    def add(
        self,
        query_id: str,
        ranked: Sequence[tuple[str, float | None]],
        *,
        latency_ms: float | None = None,
        server_ms: float | None = None,
        rows_returned: int | None = None,
    ) -> None:
        """``ranked``: [(chunk_id, score)] in rank order (already deduplicated, best first).
        A timing row is written when ``latency_ms`` is given."""
        if self.exclude_own:
            ranked = [r for r in ranked if str(r[0]) != query_id]
        if self.depth is not None and len(ranked) > self.depth:
            ranked = ranked[: self.depth]
        if ranked:  # two columns (C speed); converted, checked and encoded by the batch
            self._results.append((query_id, *zip(*ranked)))
        if latency_ms is not None:
            self._timings.append(
                (
                    query_id,
                    float(latency_ms),
                    server_ms,
                    len(ranked) if rows_returned is None else int(rows_returned),
                )
            )
        self.rows += len(ranked)
        # last: a query interrupted half-way has no progress row
        self._answered(query_id, len(ranked))

    def _answered(self, query_id: str, items: int) -> None:
        """``query_id`` wholly added (its progress row), then a flush when one is due."""
        self._done.append(query_id)
        self.queries += 1
        self._pending += 1
        self._items += items
        if (
            self._pending >= self.flush_every
            or self._items >= FLUSH_ITEMS
            or time.monotonic() >= self._due
        ):
            self.flush()

    def fail(self, query_id: str, status: int | None, message: str, attempts: int = 1) -> None:
        """Record that ``query_id`` got no answer (a service stage): no results, one
        pgeval.query_failure row with the last HTTP status and the message (masked), written
        with its progress row — the query counts as answered-with-nothing, never silently."""
        from ..core.masking import mask

        self._failures.append((query_id, status, mask(message) or "", int(attempts)))
        self.failures += 1
        self._answered(query_id, 0)

    def _write(self, results: list, timings: list, done: list, failures: Sequence = ()) -> None:
        lists = ranked_columns(results)  # a stage's duplicate refused before anything is written
        with self.conn.transaction():
            # a batch and its progress rows commit together; a server crash that loses the
            # last few commits loses both, and resume runs those queries again: no WAL flush
            # wait per batch (it would be timed in the stage's wall time on a real disk)
            # and the transaction names its client, so that `run resume` finds it should this
            # process die while it waits (evaluator.run.experiment_scope); both SET LOCAL
            self.conn.execute(
                "SELECT set_config('synchronous_commit', 'off', true), "
                "set_config('application_name', %s, true)",
                (client_name(),),
            )
            touch_run(self.conn, self.run_id)
            if results:
                grades = judged_grades(self.conn, self.run_id, lists[0])
                copy_columns(self.conn, self.run_id, lists, grades)
            # (query_id, latency_ms, server_ms, rows_returned) timings; progress: query ids
            for table, columns, rows in (
                ("query_failure", FAILURE_COLUMNS, failures),
                ("query_timing", TIMING_COLUMNS, timings),
                ("run_progress", PROGRESS_COLUMNS, [(q,) for q in done]),
            ):
                if rows:
                    copy_rows(self.conn, table, columns, ((self.run_id, *r) for r in rows))
        _commit(self.conn)

    def flush(self) -> None:
        """Write what is buffered."""
        if self._results or self._timings or self._done:
            batch = (self._results, self._timings, self._done, self._failures)
            self._results, self._timings, self._done, self._failures = [], [], [], []
            self._write(*batch)
        self._pending = self._items = 0
        self._due = time.monotonic() + self.flush_seconds

    def close(self) -> None:
        """Write what is left."""
        self.flush()


@contextmanager
def run_scope(
    ctx: StageContext,
    run_name: str,
    *,
    params: dict,
    order_rule: str,
    timing_boundary: str | None,
    config_hash: str | None = None,
    replace: bool = False,
    flush_every: int = FLUSH_EVERY,
) -> Iterator[RunWriter]:
    """Create the run (``running``), yield a :class:`RunWriter`, then mark it ``complete``
    (params merged with ``writer.params``) or ``failed`` when an exception escapes.
    ``ctx.extra["exclude_own"]`` (sampled queries): the stage fetched
    ``ctx.depth`` rows, one more than the run keeps, and each query's own chunk is dropped."""
    exclude = bool(ctx.extra.get("exclude_own"))
    depth = ctx.depth - 1 if exclude and ctx.depth and ctx.depth > 1 else ctx.depth
    if ctx.reopen is not None:  # `pgeval run resume`: the missing queries
        run_id = ctx.reopen(ctx.results, params)
    else:
        run_id = create_stage_run(
            ctx,
            run_name,
            params=params,
            order_rule=order_rule,
            depth=depth,
            timing_boundary=timing_boundary,
            config_hash=config_hash,
            replace=replace,
        )
    writer = RunWriter(
        ctx.results,
        run_id,
        depth,
        flush_every=flush_every,
        exclude_own=exclude,
    )
    try:
        yield writer
        writer.close()
    except BaseException as exc:
        try:
            writer.close()  # keep the queries answered so far: resume starts after them
        except BaseException:
            pass
        try:
            if ctx.results.info.transaction_status != 0:  # not idle: drop the failed txn first
                ctx.results.rollback()
            stopped = {"stopped": "interrupted"} if isinstance(exc, KeyboardInterrupt) else {}
            finish_run(ctx.results, run_id, "failed", {**writer.params, **stopped})
        except Exception:  # the connection itself is gone: the run stays 'running'
            pass
        raise
    missing = missing_queries(ctx.results, run_id)
    if missing:  # never a complete run with a query short: a stage that skipped one is a bug
        finish_run(ctx.results, run_id, "failed", writer.params)
        raise IncompleteRun(
            f"stage {ctx.stage} wrote {writer.queries} queries but {missing} "
            f"queries of test set '{ctx.testset}' have no results in run "
            f"'{run_name}' (marked failed)"
        )
    finish_run(ctx.results, run_id, "complete", writer.params)


def missing_queries(conn: Any, run_id: int) -> int:
    """Queries of the run's test set without a pgeval.run_progress row (0: the run is whole)."""
    n = conn.execute(
        "SELECT count(*) FROM pgeval.query q JOIN pgeval.run r USING (testset_id) "
        "WHERE r.run_id = %s AND NOT EXISTS (SELECT 1 FROM pgeval.run_progress p "
        "WHERE p.run_id = r.run_id AND p.query_id = q.query_id)",
        (run_id,),
    ).fetchone()[0]
    _commit(conn)
    return int(n)
