"""Index recall's distribution, not only its mean: per ANN stage (or sweep point) the per-query
recall's minimum, p5 and p10, the queries at 0, and per query the exact neighbours the index
missed. Read from SQL (pgeval.index_recall_distribution, pgeval.index_recall_misses in
sql/160_recall_distribution.sql); this module shapes the rows and computes nothing."""

from __future__ import annotations

from typing import Any

SHOWN_IDS = 10  # query ids named in a text line; JSON carries all of them
# the columns of a tail and of a query's misses, after its key (a label or a sweep point)
TAIL = "queries, recall_min, p5, p10, at_zero, zero_queries"
MISSES = "repetition, query_id, exact_rank, chunk_id, distance"


def distribution(
    conn: Any, experiment_id: int, k: int, repetition: int | None
) -> dict[str, dict[str, Any]]:
    """label -> {queries, min, p5, p10, at_zero, zero_queries, missed}; ``missed``: one entry per
    query with a neighbour missed, {query_id, repetition, neighbours: [{rank, chunk_id,
    distance}]} (exact rank in the exact stage's list, exact distance)."""
    return _read(
        conn,
        f"SELECT label, {TAIL} FROM pgeval.index_recall_distribution(%s, %s, %s)",
        f"SELECT label, {MISSES} FROM pgeval.index_recall_misses(%s, %s, %s)",
        (experiment_id, k, repetition),
    )


def _read(conn: Any, tails: str, misses: str, args: tuple) -> dict:
    """Key -> its tail (statement ``tails``), with the misses of statement ``misses`` added."""
    out = {row[0]: _tail(row[1:]) for row in conn.execute(tails, args).fetchall()}
    _add_misses(out, conn.execute(misses, args).fetchall())
    return out


def _tail(row: tuple) -> dict[str, Any]:
    queries, low, p5, p10, zeros, zero_ids = row
    return {
        "queries": queries,
        "min": low,
        "p5": p5,
        "p10": p10,
        "at_zero": zeros,
        "zero_queries": list(zero_ids),
        "missed": [],
    }


def _add_misses(out: dict, rows: list[tuple]) -> None:
    """Rows (key, repetition, query_id, rank, chunk_id, distance), ordered by key, repetition,
    query: one entry per query with its neighbours, under ``out[key]["missed"]``."""
    last: tuple | None = None
    for key, rep, qid, rank, chunk, dist in rows:
        if key not in out:
            continue
        if last != (key, rep, qid):
            out[key]["missed"].append({"query_id": qid, "repetition": rep, "neighbours": []})
            last = (key, rep, qid)
        out[key]["missed"][-1]["neighbours"].append(
            {"rank": rank, "chunk_id": chunk, "distance": dist}
        )


def text(dist: dict[str, Any] | None) -> str | None:
    """'p5 0.4000 · p10 0.5000 · min 0.0000 · 9 queries at 0.0: q1, q7, ...', or None."""
    if not dist or not dist.get("queries"):
        return None
    line = f"p5 {dist['p5']:.4f} · p10 {dist['p10']:.4f} · min {dist['min']:.4f}"
    ids = dist["zero_queries"]
    if ids:
        more = f", … {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
        n = dist["at_zero"]
        line += f" · {n} quer{'y' if n == 1 else 'ies'} at 0.0: {', '.join(ids[:SHOWN_IDS])}{more}"
    else:
        line += " · no query at 0.0"
    return line


def sweep_tails(conn: Any, sweep_id: int) -> dict[int, dict[str, Any]]:
    """point -> the same shape as :func:`distribution`'s values, for each measured point of a
    sweep (its repetitions pooled per query), at the sweep's K."""
    return _read(
        conn,
        f"SELECT point, {TAIL} FROM pgeval.sweep_recall_distribution(%s)",
        f"SELECT point, {MISSES} FROM pgeval.sweep_recall_misses(%s)",
        (sweep_id,),
    )
