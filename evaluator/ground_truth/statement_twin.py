"""The exact ground truth of a target defined by the application's statement (``target add
--statement``): its *exact twin*, the same statement run under
:data:`evaluator.targets.statement.TWIN_SETTINGS` (approximate index scans off, as
``pgeval.evaluate_recall`` runs it), its plan checked to scan no ANN index of the table, one
query at a time in a READ ONLY transaction. Its lists are the statement's rows ranked by
(distance, chunk id), each chunk once: at most the statement's LIMIT, whatever depth is asked.
Stored and reused as every ground truth is (:mod:`.store`), under a slot that names the
statement."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg

from ..core.errors import DatabaseError, PlanError, first_line
from ..stages import gucs, plan_check, statement_sql, vector_sql

METHOD = "statement-twin"


def lists(
    kb: Any, target: Any, vectors: list, settings: dict, ids: list[str] | None = None
) -> list[list[tuple[str, float]]]:
    """Per query vector, the twin's ranked list (chunk id, distance); ``ids``: the queries' ids
    (a captured shape's queries bind their own values, :func:`statement_sql.bound`)."""
    from psycopg import sql

    from ..core.vector_types import register_vector
    from ..stages.vector_common import relation_oid
    from ..targets.statement import TWIN_SETTINGS

    register_vector(kb)
    if kb.info.transaction_status != 0:
        kb.rollback()
    all_ann = plan_check.ann_indexes(kb, relation_oid(kb, target))
    kb.rollback()
    stmt, params = statement_sql.application(target, sql.Placeholder, dollar=False)
    if not kb.read_only:
        kb.execute("SET TRANSACTION READ ONLY")
    gucs.apply_local(kb, {**settings, **TWIN_SETTINGS})
    out = []
    try:
        ids = ids or [""] * len(vectors)
        if vectors:
            first = dict(params, q=np.asarray(vectors[0], dtype=np.float32))
            first.update(statement_sql.bound(target, ids[0]))
            plan = plan_check.explain(kb, stmt, first)
            try:
                plan_check.check_exact(plan, stage="exact twin", all_ann=all_ann)
            except PlanError as exc:
                raise PlanError(
                    f"target '{target.name}': {exc} with index scans disabled: no exact answer "
                    "to compare with"
                ) from None
        cur = kb.cursor()
        for v, qid in zip(vectors, ids, strict=True):
            q = np.asarray(v, dtype=np.float32)
            values = dict(params, q=q, **statement_sql.bound(target, qid))
            rows = cur.execute(stmt, values, prepare=True).fetchall()
            ranked, _ = vector_sql.ranked_rows(
                statement_sql.projected(cur.description, rows, target, kb, q)
            )
            out.append(
                [(c, float(d)) for c, d in statement_sql.first_per_chunk(ranked) if d is not None]
            )
    except psycopg.Error as exc:
        raise DatabaseError(
            f"ground truth of target '{target.name}' (its statement's exact twin): "
            f"{first_line(exc)}"
        ) from None
    finally:
        kb.rollback()
    return out


def short_of_k(results: Any, gt_id: int, k: int, own: bool, name: str) -> str | None:
    """What to say when the twin's longest list (the statement's LIMIT, less a sampled query's
    own row) is shorter than the cut-off ``k`` the figures are read at (None: it is not)."""
    longest = results.execute(
        "SELECT max(rank) FROM pgeval.ground_truth_result WHERE gt_id = %s", (gt_id,)
    ).fetchone()[0]
    results.rollback()
    if longest is None or longest >= k:
        return None
    mine = ", less the sampled query's own row" if own else ""
    return (
        f"target '{name}': its statement returns at most {longest} rows per query (its "
        f"LIMIT{mine}): recall@{k} counts min({k}, rows exact search returned) (--k {longest} "
        "reads it at the statement's depth)"
    )
