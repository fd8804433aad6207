"""The in-sample pick of `pgeval tune` stored as a run (``EXPERIMENT.STAGE.tuned`` unless named),
so that `metrics`, `compare` and `gate` read it: its lists written in one INSERT ... SELECT from
the same SQL that measured it, its params the stage's with the tuned options and what tune found
(``params.tuned``: in-sample pick, held-out gain, recommended or not). It belongs to no
experiment: the experiment's stages stay as they ran."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ...core.errors import Conflict
from ...stages import store
from ...stages.base import ORDER_SIMILARITY

if TYPE_CHECKING:
    from ...core.db import Database
    from .result import TuneResult


def _params(conn: Any, result: TuneResult) -> dict[str, Any]:
    lists = result.lists
    params = dict(conn.execute(
        "SELECT params FROM pgeval.run WHERE run_id = %s", (lists.run_id,)
    ).fetchone()[0])  # fmt: skip
    for key in ("fusion_ms", "rows", "k", "input_depth"):
        params.pop(key, None)
    params.update({k: v for k, v in result.options(result.in_sample_best).items() if v is not None})
    if isinstance(params.get("input_depth"), dict) and all(
        v is None for v in params["input_depth"].values()
    ):
        params.pop("input_depth")
    params["tuned"] = {
        "from_run": lists.run_name,
        "experiment": lists.experiment,
        "in_sample_pick": True,
        "metric": result.metric,
        "configurations": len(result.configs),
        "held_out": {
            k: v for k, v in result.held_out.as_dict(result.queries).items() if k != "folds"
        },
        "recommended": not result.keep,
    }
    return params


def store_pick(database: Database, result: TuneResult, name: str | None) -> TuneResult:
    lists = result.lists
    name = name or f"{lists.experiment}.{lists.stage}.tuned"
    options = result.configs[result.in_sample_best]
    source, bound = lists.source(options)
    with database.connect() as conn:
        row = conn.execute(
            "SELECT params ? 'tuned' FROM pgeval.run WHERE name = %s", (name,)
        ).fetchone()
        conn.rollback()
        if row is not None and not row[0]:
            raise Conflict(f"a run named '{name}' exists and is not a tune's pick: give --name")
        run_id = store.create_run(
            conn,
            name=name,
            testset_id=lists.testset_id,
            stage=lists.stage,
            params=_params(conn, result),
            order_rule=ORDER_SIMILARITY,
            depth=options.get("depth") or options.get("top_n"),
            timing_boundary=None,
            replace=row is not None,
        )
        with conn.transaction():
            conn.execute(
                "INSERT INTO pgeval.result_list (run_id, query_id, scores, chunk_ids) "
                "SELECT %(new_run)s, f.query_id, array_agg(f.score ORDER BY f.rank), "
                f"array_agg(f.chunk_id ORDER BY f.rank) FROM {source} GROUP BY f.query_id",
                {**bound, "new_run": run_id},
            )
        store.finish_run(conn, run_id, "complete")
        conn.commit()
    return dataclasses.replace(result, run=name)
