"""Exact top-K of many queries in one read of the table: the vectors stream out by binary
``COPY (SELECT id, vector ...) TO STDOUT`` (the target's filters applied, one pass whatever the
number of queries) and the client ranks them with BLAS.

Per block of rows: a float32 matrix product selects each query's best ``C`` rows (``C`` = the
rows needed plus a margin, times 4 when chunks have several rows), whose distances are then
computed again in float64 from the same vectors; the running best ``C`` per query are kept.
At the end each query's candidates are sorted by (distance, chunk id in byte order), collapsed to
one row per chunk (its best distance) and cut at the depth: the exact stage's order.
:func:`verify` checks the answer against the server's own exact statement on a few queries.

Distances are pgvector's: l2 ``<->`` (Euclidean), ip ``<#>`` (negative inner product), cosine
``<=>`` (1 - cosine similarity). A ``halfvec`` target's query vector is rounded to half precision
first, as the server's cast rounds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from psycopg import sql

from ..core.errors import InputError
from ..core.ids import as_text
from ..stages.statement_sql import first_per_chunk

BLOCK_ROWS = 32768
MARGIN = 16


class Incomplete(Exception):
    """A query's candidates held fewer distinct chunks than needed (several rows per chunk)."""


def query_matrix(target: Any, vectors: list[np.ndarray]) -> np.ndarray:
    """The queries as a float32 matrix (rounded to half precision first on a halfvec target)."""
    q = np.stack([np.asarray(v, dtype=np.float32) for v in vectors])
    if target.vector_type == "halfvec":
        q = q.astype(np.float16).astype(np.float32)
    return q


def distances(distance: str, x64: np.ndarray, q64: np.ndarray, qnorm: np.ndarray) -> np.ndarray:
    """Distances of candidate rows ``x64`` (g, c, d) to queries ``q64`` (g, d), float64."""
    if distance == "l2":
        return np.sqrt(((x64 - q64[:, None, :]) ** 2).sum(-1))
    dot = np.einsum("gcd,gd->gc", x64, q64)
    if distance == "ip":
        return -dot
    xn = np.sqrt((x64 * x64).sum(-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        sim = dot / (xn * qnorm[:, None])
    sim = np.clip(sim, -1.0, 1.0)
    return np.where(np.isfinite(sim), 1.0 - sim, np.inf)  # a zero vector: last (server: NaN)


def scan(
    kb: Any,
    target: Any,
    vectors: list[np.ndarray],
    need: int,
    *,
    on_rows: Any = None,
    versions: tuple[Any, list] | None = None,
) -> list[list[tuple[str, float]]]:
    """Per query, its candidates [(chunk id, distance)] sorted by (distance, chunk id).
    ``versions`` (an SQL term of a row, an int8; a list): (chunk id, term) of every row read (a
    row without a vector too), in the same read, appended to the list."""
    from ..core.vector_types import register_vector

    if target.distance not in ("l2", "ip", "cosine"):
        raise InputError(f"no client-side exact search for distance {target.distance}")
    register_vector(kb)
    q32 = query_matrix(target, vectors)
    nq, dim = q32.shape
    q64 = q32.astype(np.float64)
    qnorm = np.sqrt((q64 * q64).sum(1))
    if target.distance == "cosine" and np.any(qnorm == 0):
        bad = int(np.flatnonzero(qnorm == 0)[0])
        raise InputError(
            f"query number {bad + 1} is a zero vector: its cosine distance is undefined",
            field="queries",
        )
    qdir = (q32 / np.where(qnorm == 0, 1, qnorm)[:, None].astype(np.float32)).T.copy()
    qt = q32.T.copy()
    c = need + MARGIN if target.unique_id else 4 * need + MARGIN
    best_d = np.full((nq, 0), np.inf)
    best_id = np.empty((nq, 0), dtype=object)
    stmt, params = _copy_statement(target, versions[0] if versions else None)
    seen = versions[1] if versions else None
    width = 4 + 4 * dim

    def block(ids: list[str], bufs: list[bytes]) -> None:
        nonlocal best_d, best_id
        raw = b"".join(bufs)
        if len(raw) != len(bufs) * width:
            raise InputError(
                f"target '{target.name}': rows of another dimension than the "
                f"queries' {dim} (give the target a dimension filter)"
            )
        x = np.frombuffer(raw, dtype=np.uint8).reshape(len(bufs), width)[:, 4:]
        x = np.ascontiguousarray(x).view(">f4").astype(np.float32)
        key = _order_keys(target.distance, x, qt, qdir).T  # (nq, b)
        take = min(c, key.shape[1])
        idx = (
            np.argpartition(key, take - 1, axis=1)[:, :take]
            if take < key.shape[1]
            else np.broadcast_to(np.arange(key.shape[1]), key.shape)
        )
        ids_arr = np.array(ids, dtype=object)
        d = np.empty(idx.shape)
        for g in range(0, nq, 256):  # float64 distances of the candidates
            sl = slice(g, g + 256)
            d[sl] = distances(target.distance, x[idx[sl]].astype(np.float64), q64[sl], qnorm[sl])
        all_d = np.concatenate([best_d, d], axis=1)
        all_id = np.concatenate([best_id, ids_arr[idx]], axis=1)
        if all_d.shape[1] > c:
            keep = np.argpartition(all_d, c - 1, axis=1)[:, :c]
            all_d = np.take_along_axis(all_d, keep, axis=1)
            all_id = np.take_along_axis(all_id, keep, axis=1)
        best_d, best_id = all_d, all_id

    cur = kb.cursor()
    kb.execute("SELECT set_config('statement_timeout', '0', true)")
    ids: list[str] = []
    bufs: list[bytes] = []
    done = 0
    with cur.copy(stmt, params) as copy:
        copy.set_types(["text", "bytea"] + (["int8"] if seen is not None else []))
        for chunk, vec, *version in copy.rows():
            if seen is not None:
                seen.append((chunk, version[0]))
            if vec is None:
                continue
            ids.append(chunk)
            bufs.append(vec)
            if len(ids) >= BLOCK_ROWS:
                block(ids, bufs)
                done += len(ids)
                ids, bufs = [], []
                if on_rows:
                    on_rows(done)
    if ids:
        block(ids, bufs)
        done += len(ids)
        if on_rows:
            on_rows(done)
    kb.rollback()
    return _ranked(best_d, best_id, full=best_d.shape[1] >= c, need=need, unique=target.unique_id)


def _copy_statement(target: Any, term: Any) -> tuple[sql.Composable, list]:
    """The binary COPY of (chunk id, vector[, ``term``]) of the target's rows, its filters
    applied, and its parameters."""
    where, params = target.where()
    stmt = sql.SQL(
        "COPY (SELECT {cid}, ({vec})::vector{term} FROM {table}{where}) TO STDOUT (FORMAT BINARY)"
    ).format(
        cid=as_text(sql.Identifier(target.id_column)),
        vec=target.vector_expr(),
        term=sql.SQL(", {}").format(term) if term is not None else sql.SQL(""),
        table=target.table_sql(),
        where=where,
    )
    return stmt, params


def _order_keys(distance: str, x: np.ndarray, qt: np.ndarray, qdir: np.ndarray) -> np.ndarray:
    """A key per (row, query) in the order of the distance (float32, to pick candidates):
    rows ``x`` (b, d), queries ``qt`` (d, nq), their directions ``qdir`` (d, nq)."""
    if distance == "l2":
        return (x * x).sum(1)[:, None] - 2.0 * (x @ qt)
    if distance == "ip":
        return -(x @ qt)
    xn = np.sqrt((x * x).sum(1))
    with np.errstate(divide="ignore", invalid="ignore"):
        key = -(x @ qdir) / xn[:, None]
    key[~np.isfinite(key)] = np.inf
    return key


def _ranked(
    best_d: np.ndarray, best_id: np.ndarray, *, full: bool, need: int, unique: bool
) -> list[list[tuple[str, float]]]:
    """Per query, its candidates sorted by (distance, chunk id in byte order), each chunk once
    (its best distance); Incomplete when a full candidate list holds fewer than ``need`` chunks."""
    out = []
    for i in range(best_d.shape[0]):
        pairs = sorted(
            ((float(dd), str(cc)) for dd, cc in zip(best_d[i], best_id[i]) if np.isfinite(dd)),
            key=lambda p: (p[0], p[1].encode()),
        )
        ranked = first_per_chunk([(cc, dd) for dd, cc in pairs])
        if full and not unique and len(ranked) < need:
            raise Incomplete(i)
        out.append(ranked)
    return out


def server_lists(
    kb: Any, target: Any, vectors: Any, depth: int, settings: dict
) -> list[list[tuple[str, float]]]:
    """The exact stage's own statement, one query at a time (the check, and the fallback)."""
    from ..core.vector_types import register_vector
    from ..stages import gucs, vector_sql

    register_vector(kb)
    stmt, params, _ = vector_sql.per_query(target, depth, exact=True)
    out = []
    if kb.info.transaction_status != 0:
        kb.rollback()
    kb.execute("SET TRANSACTION READ ONLY")
    gucs.apply_local(kb, {**settings, "enable_indexscan": "off", "enable_seqscan": "on"})
    cur = kb.cursor()
    for v in query_matrix(target, vectors):
        rows = cur.execute(stmt, dict(params, q=v), prepare=True).fetchall()
        out.append([(r[0], float(r[1])) for r in rows])
    kb.rollback()
    return out


def agree(client: list[tuple[str, float]], server: list[tuple[str, float]], depth: int) -> bool:
    """The same chunks in the same order up to ``depth``, but for ties (distances within
    1e-5 relative), and the same distances."""
    a, b = client[:depth], server[:depth]
    if len(a) != len(b):
        return False
    for (_ca, da), (_cb, db) in zip(a, b):
        if abs(da - db) > 1e-5 * max(1.0, abs(db)):
            return False
    return {c for c, _ in a} == {c for c, _ in b} or all(
        ca == cb or abs(da - db) <= 1e-5 * max(1.0, abs(db)) for (ca, da), (cb, db) in zip(a, b)
    )
