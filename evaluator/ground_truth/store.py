"""Exact ground truth computed once and stored (pgeval.ground_truth, migration 0004_owntable).

The exact top-``depth`` chunks of a query set on a target are computed by one streamed read of
the table (:mod:`.exact_scan`), checked against the server's exact statement on a few queries,
and stored under a *slot*: the target's table and columns, distance, filters and the query set's
content hash. Every sweep point, repetition, later sweep and pipeline on the same slot reuses them
as long as the data fingerprint (rows and content checksum of the filtered table) is unchanged
and the stored lists are deep enough; otherwise they are computed again and the reason is said,
or, given :func:`ensure`'s ``refresh`` (:mod:`.refresh`), brought up to
date from the row versions that changed.

An exact run is then *materialised*: a run of stage ``exact`` whose results are copied from the
stored lists on the server (``params.ground_truth`` says computed or reused), so that
pgeval.index_recall reads it like any exact run. It has no per-query timings: nothing was timed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.canonical import sha256_hex
from ..core.errors import DatabaseError

# computations in this process (tests count them; the stored computed_at / uses say the same)
COMPUTED = {"count": 0}
VERIFY_QUERIES = 3
LOCK = 1885824374


@dataclass
class GroundTruth:
    gt_id: int
    status: str  # computed | reused
    reason: str | None  # why it was computed again (None: nothing was stored)
    depth: int
    method: str
    compute_ms: float | None
    computed_at: str
    # incremental (ensure's refresh): rows changed since, queries computed in full
    changed_rows: int | None = None
    queries_recomputed: int | None = None

    def as_json(self) -> dict:
        out = {
            "status": self.status,
            "reason": self.reason,
            "depth": self.depth,
            "method": self.method,
            "compute_ms": self.compute_ms,
            "computed_at": self.computed_at,
        }
        if self.changed_rows is not None:
            out.update(changed_rows=self.changed_rows, queries_recomputed=self.queries_recomputed)
        return out


def slot_spec(
    target: Any, testset_hash: str, own_chunk_removed: bool, embedder: str | None = None
) -> dict:
    return {
        "schema": target.schema,
        "table": target.table,
        "id_column": target.id_column,
        "vector_column": target.vector_column,
        "vector_type": target.vector_type,
        "dimension": target.dimension,
        "dimension_column": target.dimension_column,
        "unique_id": target.unique_id,
        "distance": target.distance,
        "filters": target.filter_literals(),
        "queries": testset_hash,
        "own_chunk_removed": own_chunk_removed,
        "embedder": embedder,
        # (absent without one: the slots of earlier ground truths stay)
        **({"statement": target.statement} if getattr(target, "statement", None) else {}),
    }


def _slot(spec: dict) -> str:
    return sha256_hex(spec, ascii=True)  # the spelling stored ground truths were keyed with


def _why(old: dict, new: dict, old_depth: int, depth: int) -> str:
    if old != new:
        return (
            f"the target's data changed since the ground truth was computed (rows "
            f"{old.get('rows')} -> {new.get('rows')}, checksum {old.get('checksum')} -> "
            f"{new.get('checksum')}): computing it again"
        )
    return f"deeper lists needed (stored {old_depth}, asked {depth}): computing it again"


@dataclass
class Slot:
    """What one :func:`ensure` asks for: the connections, the target, the slot's ``spec`` (from
    :func:`slot_spec`), the queries, the depth, the data fingerprint and the exact settings."""

    results: Any
    kb: Any
    target: Any
    spec: dict
    queries: Any
    depth: int
    data: dict
    own: bool
    settings: dict

    def save(
        self,
        depth: int,
        lists: list,
        method: str,
        ms: float,
        after: Callable[[Any, int], None] | None = None,
    ) -> tuple[int, str]:
        """Store ``lists`` as the slot's ground truth (replacing the one stored), in one
        transaction (``after(results, gt_id)`` runs in it last); returns (gt_id, computed_at)."""
        from ..stages import store

        results, slot = self.results, _slot(self.spec)
        with results.transaction():
            results.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK, slot))
            results.execute("DELETE FROM pgeval.ground_truth WHERE slot = %s", (slot,))
            gt_id, at = results.execute(
                "INSERT INTO pgeval.ground_truth (slot, target, spec, data, depth, queries, "
                "method, compute_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "RETURNING gt_id, computed_at::text",
                (
                    slot,
                    self.target.name,
                    json.dumps(self.spec),
                    json.dumps(self.data),
                    depth,
                    len(self.queries),
                    method,
                    ms,
                ),
            ).fetchone()
            store.copy_rows(
                results,
                "ground_truth_result",
                (
                    ("gt_id", "int8"),
                    ("query_id", "text"),
                    ("rank", "int4"),
                    ("chunk_id", "text"),
                    ("dist", "float8"),
                ),
                (
                    (gt_id, q.query_id, r, c, d)
                    for q, ranked in zip(self.queries, lists)
                    for r, (c, d) in enumerate(ranked, 1)
                ),
            )
            if after is not None:
                after(results, gt_id)
        if not results.autocommit:
            results.commit()
        return gt_id, at


@dataclass
class Full:
    """How the lists are computed in full, and why (``reason``: None when nothing was stored):
    ``extra`` ranks deeper than asked; ``versions`` (an SQL term, a list) as :func:`compute`'s;
    ``after(results, gt_id, method)`` runs last in the transaction that saves them."""

    reason: str | None
    extra: int = 0
    versions: tuple[Any, list] | None = None
    after: Callable[[Any, int, str], None] | None = None


# (the slot, why its stored ground truth is not current) -> the ground truth brought up to date
# and saved, or how to compute it in full
Refresh = Callable[[Slot, str | None], GroundTruth | Full]


def ensure(
    results: Any,
    kb: Any,
    target: Any,
    *,
    testset_hash: str,
    queries: Any,
    depth: int,
    data: dict,
    own_chunk_removed: bool,
    settings: dict,
    embedder: str | None = None,
    on_progress: Callable[..., Any] | None = None,
    on_warning: Callable[..., Any] | None = None,
    refresh: Refresh | None = None,
) -> GroundTruth:
    """The stored ground truth of this slot: reused while its data fingerprint is unchanged and
    its lists deep enough; else, with ``refresh`` (the incremental one, for `pgeval watch` and
    ``incremental_ground_truth``: :func:`.refresh.refresh`), brought up
    to date from the row versions that changed, when it can be; else computed in full, saying
    why through ``on_warning``."""
    spec = slot_spec(target, testset_hash, own_chunk_removed, embedder)
    found, reason = stored(results, spec, data, depth)
    if found is not None:
        return found
    slot = Slot(results, kb, target, spec, queries, depth, data, own_chunk_removed, settings)
    how = Full(reason) if refresh is None else refresh(slot, reason)
    if isinstance(how, GroundTruth):
        return how
    if how.reason and on_warning:
        on_warning(f"ground truth of target '{target.name}': {how.reason}")
    return _full(slot, how, on_progress=on_progress, on_warning=on_warning)


def _full(slot: Slot, how: Full, **hooks: Any) -> GroundTruth:
    """The slot's lists computed in full as ``how`` says, and saved."""
    depth = slot.depth + how.extra
    t0 = time.perf_counter()
    lists, method = compute(
        slot.kb,
        slot.target,
        slot.queries,
        depth,
        slot.own,
        slot.settings,
        total_rows=slot.data.get("rows"),
        versions=how.versions,
        **hooks,
    )
    ms = (time.perf_counter() - t0) * 1000.0
    COMPUTED["count"] += 1
    after = how.after

    def last(results: Any, gt_id: int) -> None:
        if after is not None:
            after(results, gt_id, method)

    gt_id, at = slot.save(depth, lists, method, ms, after=last if after is not None else None)
    return GroundTruth(gt_id, "computed", how.reason, depth, method, ms, at)


def stored(
    results: Any, spec: dict, data: dict, depth: int
) -> tuple[GroundTruth | None, str | None]:
    """(the slot's ground truth when it is current and deep enough, else None; why it is not:
    None when nothing is stored)."""
    row = results.execute(
        "SELECT gt_id, data, depth, method, compute_ms, computed_at::text "
        "FROM pgeval.ground_truth WHERE slot = %s",
        (_slot(spec),),
    ).fetchone()
    results.rollback()
    if row is None:
        return None, None
    if row[1] == data and row[2] >= depth:
        return GroundTruth(row[0], "reused", None, row[2], row[3], row[4], row[5]), None
    return None, _why(row[1], data, row[2], depth)


def compute(
    kb: Any,
    target: Any,
    queries: Any,
    depth: int,
    own: bool,
    settings: dict,
    *,
    total_rows: Any = None,
    on_progress: Callable[..., Any] | None = None,
    on_warning: Callable[..., Any] | None = None,
    versions: tuple[Any, list] | None = None,
) -> tuple[list[list[tuple[str, float]]], str]:
    """Per query its exact ranked list (own chunk removed when ``own``), and the method used;
    ``versions`` (an SQL term, a list): (chunk id, term) of every row read, appended to the
    list, when the method is the client-side scan (:func:`.exact_scan.scan`); a target defined
    by the application's statement: its exact twin's (:mod:`.statement_twin`)."""
    need = depth + (1 if own else 0)
    vectors = [q.embedding for q in queries]
    if on_progress:
        on_progress(0, total_rows)
    if getattr(target, "statement", None) is not None:  # the statement's exact twin
        from . import statement_twin

        ids = [q.query_id for q in queries]
        lists = statement_twin.lists(kb, target, vectors, settings, ids)
        method = statement_twin.METHOD
    else:
        lists, method = _scanned(
            kb, target, vectors, need, settings, total_rows, on_progress, on_warning, versions
        )
    out = []
    for q, ranked in zip(queries, lists):
        if own:
            ranked = [(c, d) for c, d in ranked if c != q.query_id]
        out.append(ranked[:depth])
    return out, method


def _scanned(
    kb: Any,
    target: Any,
    vectors: list,
    need: int,
    settings: dict,
    total_rows: Any,
    on_progress: Callable[..., Any] | None,
    on_warning: Callable[..., Any] | None,
    versions: tuple[Any, list] | None,
) -> tuple[list[list[tuple[str, float]]], str]:
    """The lists of the client-side scan, checked against the server's exact statement on a
    few queries; the server's for every query when they disagree (or chunks fell short)."""
    from . import exact_scan

    try:
        lists = exact_scan.scan(
            kb,
            target,
            vectors,
            need,
            on_rows=(lambda n: on_progress(n, total_rows)) if on_progress else None,
            versions=versions,
        )
        method = "client-scan"
        sample = list(range(min(VERIFY_QUERIES, len(vectors))))
        server = exact_scan.server_lists(kb, target, [vectors[i] for i in sample], need, settings)
        if not all(exact_scan.agree(lists[i], server[j], need) for j, i in enumerate(sample)):
            if on_warning:
                on_warning(
                    "ground truth: the client-side scan disagrees with the server's exact "
                    "order on a checked query: computing every query on the server"
                )
            raise exact_scan.Incomplete(-1)
    except exact_scan.Incomplete:
        kb.rollback()
        lists = exact_scan.server_lists(kb, target, vectors, need, settings)
        method = "server"
    except Exception as exc:
        kb.rollback()
        if isinstance(exc, DatabaseError) or type(exc).__module__.startswith("evaluator"):
            raise
        from ..core.errors import first_line

        raise DatabaseError(f"ground truth of target '{target.name}': {first_line(exc)}") from None
    return lists, method


def materialize(ctx: Any, gt: GroundTruth, run_name: str) -> int:
    """A complete exact run of ``ctx`` (experiment, repetition, test set) whose results are the
    stored ground truth's first ``ctx.depth`` ranks; returns its run id."""
    from ..stages import store
    from ..stages.base import ORDER_DISTANCE, SCORE_DISTANCE

    results = ctx.results
    params = {
        "kind": "exact",
        "score": SCORE_DISTANCE,
        "metric": ctx.target.distance,
        "index": None,
        "method": None,
        "target": ctx.target.name,
        "embedder": ctx.embedder,
        "ground_truth": gt.as_json(),
        # the exact stage's settings (its server check and fallback run under them)
        "settings": {"enable_indexscan": "off", **ctx.settings, "enable_seqscan": "on"},
    }
    if getattr(ctx.target, "statement", None) is not None:  # its exact twin's
        from ..targets.statement import TWIN_SETTINGS

        params["settings"].update(TWIN_SETTINGS)
    run_id = store.create_stage_run(
        ctx,
        run_name,
        params=params,
        order_rule=ORDER_DISTANCE,
        depth=ctx.depth,
        timing_boundary=None,
    )
    with results.transaction():
        store.touch_run(results, run_id)
        # one ranked list per query; the trigger joins the judged grades
        results.execute(
            "INSERT INTO pgeval.result_list (run_id, query_id, chunk_ids, scores) "
            "SELECT %s, g.query_id, array_agg(g.chunk_id ORDER BY g.rank), "
            "array_agg(g.dist ORDER BY g.rank) FROM pgeval.ground_truth_result g "
            "JOIN pgeval.query q ON q.testset_id = %s AND q.query_id = g.query_id "
            "WHERE g.gt_id = %s AND g.rank <= %s GROUP BY g.query_id",
            (run_id, ctx.testset_id, gt.gt_id, ctx.depth),
        )
        results.execute(
            "INSERT INTO pgeval.run_progress (run_id, query_id) "
            "SELECT %s, query_id FROM pgeval.query WHERE testset_id = %s",
            (run_id, ctx.testset_id),
        )
        results.execute(
            "UPDATE pgeval.ground_truth SET uses = uses + 1, last_used_at = now() WHERE gt_id = %s",
            (gt.gt_id,),
        )
    store.finish_run(results, run_id, "complete")
    return run_id
