"""The stored exact ground truth kept up to date incrementally (a probe's: `pgeval watch`).

:func:`refresh` is :func:`.store.ensure`'s ``refresh`` (the ground truth
reused while the data is unchanged, else computed): a third way between the two: when the data
changed little since a ground truth of the same target, distance, filters and embedder was
computed, that one is brought up to date instead of computing every list again.

What changed: every row version of the target's table has a *version*, a 64-bit hash of its
(tableoid, ctid, xmin): the term of the data checksum's cheap version value
(:func:`evaluator.table.data_checksum.version_term`, whose docstring says why any committed INSERT,
UPDATE or DELETE changes the set of pairs). A full computation reads the versions of every row in
the same read as the vectors (one scan, one snapshot) and stores them beside the lists
(``pgeval.ground_truth_versions``, migration 0011), with the rows' chunk ids (a changed row
whose id was there was updated: the count of rows changed is inserted + updated + deleted, from
the rows written, the rows gone and those ids). A refresh then reads the table once more with
one statement that returns only the rows whose version is not in the stored set (inserted or
updated since, with their vectors) and the rows the stored lists name (still there unchanged or
not): the user's table is only read, nothing of pgeval's is created on it.

The lists: each stored list holds every row whose (distance, chunk id) key is at most its last
entry's, its *bound* (true of an exact top-N; lists are stored deeper than asked, ``EXTRA`` ranks
more, so that a few rows leaving a list leave it long enough). A row unchanged since is therefore
either in the list or beyond the bound; so the rows of the list still there unchanged, plus the
changed rows whose key (their exact distance, computed here in float64 as the full scan computes
it) is within the bound, are again every row within the bound, in order: an exact list. A list
that falls below the depth asked, and a query that is new or whose vector changed, is computed in
full on its own (the server's exact order selects candidates, ranked here in float64 as the scan
ranks them).

In full instead, saying why: no versions stored; a target whose chunk ids are not unique or a
distance the client does not compute; more than ``THRESHOLD`` of the rows changed (inserted or
updated, or deleted); more than a quarter of the queries to compute in full; a version set grown
past half again the table (versions of deleted rows are kept: they match no row).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from psycopg import sql

from ..core.ids import as_text
from ..table.data_checksum import version_term
from . import exact_scan
from . import store as gt

THRESHOLD = 0.10  # share of the rows changed above which the ground truth is computed in full
EXTRA = 10  # ranks stored beyond the depth asked
REFRESHED = {"count": 0}  # incremental refreshes in this process (tests count them)


def refresh(slot: gt.Slot, reason: str | None) -> gt.GroundTruth | gt.Full:
    """:func:`.store.ensure`'s incremental ``refresh``: the slot's ground
    truth brought up to date from the row versions changed since a base (saved); else how to
    compute it in full (``EXTRA`` ranks deeper, the row versions read in the same scan), with
    ``reason`` saying why not incrementally."""
    t0 = time.perf_counter()
    why_not = _unsuitable(slot.target)
    base = None if why_not else _base(slot.results, slot.target, slot.spec)
    if base is None and why_not is None and reason is not None:
        why_not = "no row versions stored with the earlier ground truth"
    if base is not None:
        done = _Refresh(slot, base)
        lists = done.run(slot.data)
        if lists is not None:
            return _refreshed(slot, done, lists, (time.perf_counter() - t0) * 1000.0)
        why_not = done.why_not
    if why_not and (reason or base is not None):
        reason = f"{reason} (in full: {why_not})" if reason else f"in full: {why_not}"
    return _in_full(slot, reason)


def _refreshed(slot: gt.Slot, done: _Refresh, lists: list, ms: float) -> gt.GroundTruth:
    """The refreshed ``lists`` saved with their row versions."""
    REFRESHED["count"] += 1
    depth = max(slot.depth, min((len(x) for x in lists), default=slot.depth))
    gt_id, at = slot.save(depth, lists, "client-scan", ms, after=done.store_versions(slot.data))
    say = f"{done.changed:,} rows changed since {done.base['computed_at']}: refreshed incrementally"
    return gt.GroundTruth(
        gt_id,
        "incremental",
        say,
        depth,
        "client-scan",
        ms,
        at,
        changed_rows=done.changed,
        queries_recomputed=len(done.recomputed),
    )


def _unsuitable(target: Any) -> str | None:
    if target.statement is not None:
        return "the target's statement is answered by its exact twin, query by query"
    if not target.unique_id:
        return "the target's chunk ids are not unique"
    if target.distance not in ("l2", "ip", "cosine"):
        return f"no client-side exact search for distance {target.distance}"
    return None


def _in_full(slot: gt.Slot, reason: str | None) -> gt.Full:
    """Computed in full, ``EXTRA`` ranks deeper, the row versions read in the same scan."""
    seen: list[tuple[str, int]] = []

    def keep(results: Any, gt_id: int, method: str) -> None:
        if method == "client-scan":  # (the server's lists: no versions read with them)
            versions = np.asarray([v for _, v in seen], dtype=np.int64)
            _store(results, gt_id, len(seen), versions, [c for c, _ in seen])

    return gt.Full(reason, extra=EXTRA, versions=(version_term(slot.kb), seen), after=keep)


def _store(results: Any, gt_id: int, rows: int, versions: np.ndarray, ids: Any) -> None:
    results.execute(
        "INSERT INTO pgeval.ground_truth_versions (gt_id, rows, versions, ids) "
        "VALUES (%s, %s, %s, %s)",
        (gt_id, rows, versions.astype(">i8").tobytes(), "\0".join(ids).encode()),
    )


def _base(results: Any, target: Any, spec: dict) -> dict | None:
    """The latest client-side ground truth of the same target, distance, filters and embedder
    (any query set) with its row versions."""
    import json

    rest = {k: v for k, v in spec.items() if k != "queries"}
    row = results.execute(
        "SELECT g.gt_id, g.spec ->> 'queries', g.computed_at::text, v.rows, v.versions, v.ids "
        "FROM pgeval.ground_truth g JOIN pgeval.ground_truth_versions v USING (gt_id) "
        "WHERE g.target = %s AND g.method = 'client-scan' AND g.spec - 'queries' = %s::jsonb "
        "ORDER BY g.computed_at DESC, g.gt_id DESC LIMIT 1",
        (target.name, json.dumps(rest)),
    ).fetchone()
    if row is None:
        results.rollback()
        return None
    gt_id, queries_hash, at, rows, versions, ids = row
    lists: dict[str, list[tuple[str, float]]] = {}
    for qid, chunk, dist in results.execute(
        "SELECT query_id, chunk_id, dist FROM pgeval.ground_truth_result WHERE gt_id = %s "
        "ORDER BY query_id, rank",
        (gt_id,),
    ).fetchall():
        lists.setdefault(qid, []).append((chunk, float(dist)))
    results.rollback()
    return {
        "gt_id": gt_id,
        "queries": queries_hash,
        "computed_at": at,
        "rows": int(rows),
        "versions": np.frombuffer(bytes(versions), dtype=">i8").astype(np.int64),
        "ids": bytes(ids).decode().split("\0") if ids else [],
        "lists": lists,
    }


def _old_vectors(results: Any, content_hash: str) -> dict[str, np.ndarray]:
    """The query vectors of the base's query set (empty when it is gone)."""
    from ..providers.embedders import storage

    row = results.execute(
        "SELECT testset_id FROM pgeval.testset WHERE content_hash = %s ORDER BY testset_id LIMIT 1",
        (content_hash,),
    ).fetchone()
    out = {}
    if row is not None:
        for q in storage.testset_queries(results, row[0], with_embedding=True):
            if q.embedding is not None:
                out[q.query_id] = np.asarray(q.embedding, dtype=np.float32)
    results.rollback()
    return out


def _key(d: float, chunk: str) -> tuple[float, bytes]:
    """The exact stage's order: distance, then chunk id in byte order."""
    return (d, chunk.encode())


class _Refresh:
    """One incremental refresh of the base's lists for ``queries`` (module docstring)."""

    def __init__(self, slot: gt.Slot, base: dict) -> None:
        self.results, self.kb, self.target = slot.results, slot.kb, slot.target
        self.queries, self.depth, self.own = slot.queries, slot.depth, slot.own
        self.settings = slot.settings
        self.base = base
        self.store_depth = self.depth + EXTRA
        self.changed = 0
        self.recomputed: list[int] = []
        self.new_versions: list[int] = []
        self.written: list[str] = []
        self.why_not: str | None = None
        self.q32 = np.empty((0, 0), dtype=np.float32)
        self.approx = np.empty((0, 0))

    def run(self, data: dict) -> list[list[tuple[str, float]]] | None:
        """The refreshed lists, else None (``why_not`` says why)."""
        base, rows = self.base, int(data.get("rows") or 0)
        limit = max(1, int(THRESHOLD * max(base["rows"], rows)))
        if len(base["versions"]) > 1.5 * max(base["rows"], rows) + 1000:
            self.why_not = "its stored row versions outgrew the table"
            return None
        reusable = self._reusable()
        listed = sorted({c for i in reusable for c, _ in base["lists"][self._qid(i)]})
        cap = limit + len(listed) + 1  # (more rows written than the limit: not all read)
        unchanged, written = self._changes(listed, cap)
        gone = max(0, base["rows"] + len(written) - rows)  # deleted or updated
        known = set(base["ids"])
        updated = sum(1 for c, _ in written if c in known)
        self.written = [c for c, _ in written]
        self.changed = len(written) + gone - updated  # inserted, updated, deleted
        if self.changed > limit or len(unchanged) + len(written) >= cap:
            self.why_not = (
                f"{'more than ' if len(written) > limit else ''}{self.changed:,} of "
                f"{max(base['rows'], rows):,} rows changed, more than {THRESHOLD:.0%}"
            )
            return None
        ids = [c for c, v in written if v is not None]
        x64 = (
            np.stack([_as_array(v) for _, v in written if v is not None]).astype(np.float64)
            if ids
            else np.empty((0, 0))
        )
        self.q32 = exact_scan.query_matrix(self.target, [q.embedding for q in self.queries])
        self.approx = self._approx(x64)
        lists: list[list[tuple[str, float]] | None] = []
        for i in range(len(self.queries)):
            if i not in reusable:
                lists.append(None)
                continue
            merged = self._merge(i, unchanged, ids, x64)
            lists.append(merged if len(merged) >= self.depth else None)
        self.recomputed = [i for i, x in enumerate(lists) if x is None]
        if len(self.recomputed) > max(1, len(self.queries) // 4):
            self.why_not = (
                f"{len(self.recomputed)} of {len(self.queries)} queries to compute in full"
            )
            return None
        for i, ranked in zip(self.recomputed, self._each(self.recomputed)):
            lists[i] = ranked
        return [x or [] for x in lists]

    def _qid(self, i: int) -> str:
        return self.queries[i].query_id

    def _reusable(self) -> set[int]:
        """The queries whose stored list was computed for the same vector."""
        lists = self.base["lists"]
        old = None
        out = set()
        for i, q in enumerate(self.queries):
            if q.query_id not in lists:
                continue
            if old is None:
                old = _old_vectors(self.results, self.base["queries"])
            v = old.get(q.query_id)
            if v is not None and np.array_equal(v, np.asarray(q.embedding, dtype=np.float32)):
                out.add(i)
        return out

    def _changes(self, listed: list[str], limit: int) -> tuple[set[str], list[tuple[str, Any]]]:
        """(listed chunks still there unchanged, [(chunk, vector or None)] of the rows whose
        version is not in the stored set); their versions are kept in ``new_versions``."""
        from ..core.vector_types import register_vector

        t = self.target
        register_vector(self.kb)
        where, params = t.where()
        term = version_term(self.kb)
        stmt = sql.SQL(
            "SELECT id, known, CASE WHEN NOT known THEN vec END, vh FROM ("
            "SELECT {cid} AS id, ({vec})::vector AS vec, {term} AS vh, "
            "{term} = ANY(%b::int8[]) AS known FROM {table}{where} OFFSET 0) r "
            "WHERE NOT known OR id = ANY(%s::text[]) LIMIT %s"
        ).format(
            cid=as_text(sql.Identifier(t.id_column)),
            vec=t.vector_expr(),
            term=term,
            table=t.table_sql(),
            where=where,
        )
        if self.kb.info.transaction_status != 0:
            self.kb.rollback()
        # (no parallel workers: each would receive and hash the whole version set again)
        self.kb.execute(
            "SELECT set_config('statement_timeout', '0', true), "
            "set_config('max_parallel_workers_per_gather', '0', true)"
        )
        rows = self.kb.execute(
            stmt, [self.base["versions"].tolist(), *params, listed, limit]
        ).fetchall()
        self.kb.rollback()
        unchanged = {r[0] for r in rows if r[1]}
        written = [(r[0], r[2]) for r in rows if not r[1]]
        self.new_versions = [int(r[3]) for r in rows if not r[1]]
        return unchanged, written

    def _merge(self, i: int, unchanged: set[str], ids: list[str], x64: np.ndarray) -> list:
        """Query ``i``'s stored list without the rows gone or changed, with the changed rows
        ``ids`` (vectors ``x64``) whose exact key is within the list's bound, in order."""
        qid = self._qid(i)
        old = self.base["lists"][qid]
        if not old:
            return []
        bound = _key(old[-1][1], old[-1][0])
        kept = [(c, d) for c, d in old if c in unchanged]
        added: list[tuple[str, float]] = []
        if ids:
            # float64 distances of the rows near the bound only (a matrix product picks them;
            # 1e-6 covers its rounding), computed as the full scan computes them
            near = np.flatnonzero(self.approx[i] <= bound[0] + 1e-6 * (1.0 + abs(bound[0])))
            if near.size:
                exact = _float64(self.target.distance, x64[near], self.q32[i : i + 1])[0]
                added = [
                    (ids[j], float(d))
                    for j, d in zip(near, exact)
                    if np.isfinite(d)
                    and not (self.own and ids[j] == qid)
                    and _key(float(d), ids[j]) <= bound
                ]
        merged = sorted(kept + added, key=lambda p: _key(p[1], p[0]))
        return merged[: self.store_depth]

    def _approx(self, x64: np.ndarray) -> np.ndarray:
        """(queries x rows) distances by one matrix product: to pick the rows near a bound."""
        q64 = self.q32.astype(np.float64)
        if not len(x64):
            return np.empty((len(q64), 0))
        dot = q64 @ x64.T
        if self.target.distance == "ip":
            return -dot
        xx, qq = (x64 * x64).sum(1), (q64 * q64).sum(1)
        if self.target.distance == "l2":
            return np.sqrt(np.maximum(qq[:, None] + xx[None, :] - 2 * dot, 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            sim = dot / np.sqrt(qq[:, None] * xx[None, :])
        return np.where(np.isfinite(sim), 1.0 - np.clip(sim, -1, 1), np.inf)

    def _each(self, which: list[int]) -> list[list[tuple[str, float]]]:
        """Lists computed in full for the queries ``which``: the server's exact order picks the
        candidates (``MARGIN`` more), ranked here in float64 like the scan's."""
        if not which:
            return []
        need = self.store_depth + (1 if self.own else 0)
        vectors = [self.queries[i].embedding for i in which]
        server = exact_scan.server_lists(
            self.kb, self.target, vectors, need + exact_scan.MARGIN, self.settings
        )
        found = _fetch(self.kb, self.target, sorted({c for x in server for c, _ in x}))
        q32 = exact_scan.query_matrix(self.target, vectors)
        out = []
        for j, i in enumerate(which):
            ids = [c for c, _ in server[j] if c in found]
            x64 = np.stack([found[c] for c in ids]).astype(np.float64) if ids else None
            dist = _float64(self.target.distance, x64, q32[j : j + 1])[0] if ids else []
            qid = self._qid(i)
            ranked = sorted(
                ((c, float(d)) for c, d in zip(ids, dist) if not (self.own and c == qid)),
                key=lambda p: _key(p[1], p[0]),
            )
            out.append(ranked[: self.store_depth])
        return out

    def store_versions(self, data: dict) -> Callable[[Any, int], None]:
        """The hook that stores the base's versions and the new ones with the refreshed lists."""

        def keep(results: Any, gt_id: int) -> None:
            both = np.concatenate(
                [self.base["versions"], np.asarray(self.new_versions, dtype=np.int64)]
            )
            _store(
                results,
                gt_id,
                int(data.get("rows") or 0),
                both,
                list(dict.fromkeys([*self.base["ids"], *self.written])),
            )

        return keep


def _as_array(v: Any) -> np.ndarray:
    if hasattr(v, "to_numpy"):
        v = v.to_numpy()
    return np.asarray(v, dtype=np.float32)


def _float64(distance: str, x64: Any, q32: np.ndarray) -> np.ndarray:
    """(queries x rows) distances in float64, by :func:`.exact_scan.distances` in groups."""
    q64 = q32.astype(np.float64)
    qnorm = np.sqrt((q64 * q64).sum(1))
    n, dim = x64.shape
    step = max(1, (1 << 22) // max(1, n * dim))
    out = np.empty((len(q64), n))
    for g in range(0, len(q64), step):
        sl = slice(g, g + step)
        x = np.ascontiguousarray(np.broadcast_to(x64, (len(q64[sl]), n, dim)))
        out[sl] = exact_scan.distances(distance, x, q64[sl], qnorm[sl])
    return out


def _fetch(kb: Any, target: Any, ids: list[str]) -> dict[str, np.ndarray]:
    """The vectors of the chunks ``ids`` (the target's filters applied)."""
    from ..core.vector_types import register_vector

    if not ids:
        return {}
    register_vector(kb)
    where, params = target.where()
    cid = as_text(sql.Identifier(target.id_column))
    glue = sql.SQL(" AND ") if where.as_string(kb) else sql.SQL(" WHERE ")
    stmt = sql.SQL("SELECT {cid}, ({vec})::vector FROM {table}{where}{glue}{cid} = ANY(%s)").format(
        cid=cid, vec=target.vector_expr(), table=target.table_sql(), where=where, glue=glue
    )
    rows = kb.execute(stmt, [*params, ids]).fetchall()
    kb.rollback()
    return {c: _as_array(v) for c, v in rows if v is not None}
