"""Every configuration's per-query figures, in SQL: the stage's lists under that configuration
(:meth:`StageLists.source`) cut at the largest cut-off, their judged grades
(``pgeval.list_grades``), the measures (``pgeval.list_measures``: the gains and divisors that
``pgeval.per_query`` reads for a stored list, judged@K with them, last). Nothing is
written. Configurations are spread over ``jobs`` connections (one statement each at a time)."""

from __future__ import annotations

import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .stage_lists import StageLists

if TYPE_CHECKING:
    import numpy as np

    from ...core.db import Database

STATEMENT = """
WITH l AS MATERIALIZED (SELECT f.query_id, array_agg(f.chunk_id ORDER BY f.rank) AS ids
             FROM {source}
            WHERE f.rank <= coalesce(%(cut)s, f.rank)
            GROUP BY f.query_id),
g AS (SELECT v.query_id, v.n_rel, v.ideal_dcg,
             pgeval.list_grades(%(testset)s, v.query_id, coalesce(l.ids, '{{}}')) AS grades
        FROM pgeval.valid_queries(%(stage_run)s, %(rel)s) v
        LEFT JOIN l ON l.query_id = v.query_id)
SELECT g.query_id,
       pgeval.list_measures(g.grades, g.n_rel, g.ideal_dcg, %(names)s, %(ks)s, %(rel)s)
  FROM g ORDER BY g.query_id COLLATE "C"
"""


@dataclass(frozen=True)
class Figures:
    """values[c, q, m]: configuration c, valid query q (``queries``, in byte order), measure m
    (``measures``, then judged@K last)."""

    queries: list[str]
    measures: list[str]
    values: np.ndarray


def _spec(conn: Any, measures: list[str]) -> tuple[list[str], list[int | None]]:
    rows = conn.execute(
        "SELECT name, k FROM pgeval.measure_spec(%s) ORDER BY ord", (measures,)
    ).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


def measure(
    database: Database,
    lists: StageLists,
    configs: list[dict[str, Any]],
    measures: list[str],
    *,
    rel: int = 1,
    judged_k: int = 10,
    jobs: int = 2,
    on_progress: Callable[[int, int], None] | None = None,
) -> Figures:
    """The figures of every configuration of ``configs`` (see :class:`Figures`)."""
    import numpy as np

    with database.connect(read_only=True) as conn:
        names, ks = _spec(conn, measures)
        conn.rollback()
    cut = None if any(k is None for k in ks) else max([*ks, judged_k])  # type: ignore[type-var]
    common = {"cut": cut, "testset": lists.testset_id, "stage_run": lists.run_id, "rel": rel,
              "names": [*names, "judged"], "ks": [*ks, judged_k]}  # fmt: skip

    def one(conn: Any, options: dict[str, Any]) -> tuple[list[str], list[list[float]]]:
        source, bound = lists.source(options)
        rows = conn.execute(STATEMENT.format(source=source), {**common, **bound}).fetchall()
        conn.rollback()
        return [r[0] for r in rows], [r[1] for r in rows]

    out: list[Any] = [None] * len(configs)
    jobs = max(1, min(jobs, len(configs)))
    free: queue.SimpleQueue = queue.SimpleQueue()
    opened = [database.connect(read_only=True) for _ in range(jobs)]
    for c in opened:
        free.put(c)

    def task(i: int) -> tuple[int, Any]:
        conn = free.get()
        try:
            return i, one(conn, configs[i])
        finally:
            free.put(conn)

    try:
        with ThreadPoolExecutor(jobs) as pool:
            for done, fut in enumerate(
                as_completed([pool.submit(task, i) for i in range(len(configs))]), 1
            ):
                i, result = fut.result()
                out[i] = result
                if on_progress:
                    on_progress(done, len(configs))
    finally:
        for c in opened:
            c.close()
    queries = out[0][0]
    values = np.array([o[1] for o in out], dtype=float)
    return Figures(queries, [*measures, f"judged@{judged_k}"], values)
