"""A probe's steady path: the series' kept sweep measured again under an unchanged configuration
epoch (:mod:`.epoch`), in about twenty statements.

The lean path (dba/sweep/remeasure.py) keeps the series' one-point sweep but captures both
fingerprints again, looks the stage's catalog up again, checks the plan with EXPLAIN, and measures
the data version and the query set. Each of those reads the catalog, the settings or the change log
as they are now. The epoch reads the same inputs in a few statements and hashes them; the point's
run records the epoch it was measured under (``run.params.epoch``). When the epoch read now is that
one, everything those steps would read is what they read then, so their answers are the kept run's:

- the exact stage's and the point's fingerprints and configuration hashes (the point run's
  fingerprint is copied, its ``info.captured_at`` set to now and ``info.epoch`` to the digest);
- the data version (the change log's count is in the epoch) and so the query set and the exact
  run materialised from the ground truth (still stored: deleted or computed again, the lean path
  looks at it);
- the index the plan uses (the indexes, their statistics, the settings and the server are in it).

What is not reused: the timed statements, run as every stage run runs them (the stage's own
statement, settings with ``SET LOCAL``, timing, ranking and storage: ``ctx.extra[TRUSTED_PLAN]``
only skips the catalog look-ups and EXPLAIN), and the measures, computed by the same SQL on the
new rows. The probe's row is written as on every path.

Anything else returns None and the caller takes the lean path, which records the epoch for the
next probe: no epoch (an untracked table), another epoch, no kept sweep or an incomplete one, a
judged query set, another k, depth, settings, label or statement timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ...stages import gucs
from ..sweep.remeasure import KEPT_JOINS, KEPT_WHERE

# the kept sweep: its point run (with the epoch it was measured under), its exact run's ground
# truth and its query set
_KEPT = (
    """
SELECT s.sweep_id, s.experiment_id, s.testset_id, s.settings, s.k, s.depth, t.name,
       t.content_hash, t.n_queries, t.n_judgements, x.params -> 'ground_truth', sp.config_hash,
       sp.label, p.run_id, p.params, p.fingerprint,
       (SELECT count(*) FROM pgeval.sweep_point o WHERE o.sweep_id = s.sweep_id)"""
    + KEPT_JOINS
    + "  JOIN pgeval.testset t ON t.testset_id = s.testset_id\n"
    + KEPT_WHERE
    + """
   -- the stored ground truth the exact run was copied from, still stored (deleted or computed
   -- again: the lean path looks at it)
   AND EXISTS (SELECT 1 FROM pgeval.ground_truth g
                WHERE g.target = %s
                  AND g.computed_at::text = x.params -> 'ground_truth' ->> 'computed_at')
"""
)


def remember(database: Any, sweep_id: int, digest: str | None) -> None:
    """Record ``digest`` on the sweep's point run, whichever path measured it: the epoch read
    before it was measured (a change after that read makes the next probe's epoch another one:
    never a stale match)."""
    if digest is None:
        return
    with database.connect() as results:
        results.execute(
            "UPDATE pgeval.run p SET params = p.params || jsonb_build_object('epoch', %s::text) "
            "FROM pgeval.sweep_point sp WHERE sp.sweep_id = %s AND p.run_id = sp.run_id",
            (digest, sweep_id),
        )
        results.commit()


def again(
    database: Any,
    sweep_cfg: Any,
    target: Any,
    digest: str | None,
    *,
    on_warning: Callable[..., Any] | None = None,
) -> Any:
    """The series' sweep (``sweep_cfg.name``) with its point measured again when its point run
    was measured under ``digest``; else None (module docstring)."""
    from ..sweep.config import plan as plan_of

    q = sweep_cfg.queries
    if digest is None or q is None or q.kind != "sample" or sweep_cfg.group is not None:
        return None
    plan = plan_of(sweep_cfg)
    depth, stage, points = plan.depth, plan.stage, plan.points
    if not plan.one_point or sweep_cfg.find or sweep_cfg.repeat != 1:
        return None
    if sweep_cfg.concurrency != 1 or sweep_cfg.name is None:
        return None
    base = gucs.with_statement_timeout(
        None, {**target.settings, **sweep_cfg.settings}, sweep_cfg.statement_timeout, check=False
    )
    with database.connect() as results, database.connect(results=False, read_only=True) as kb:
        kept = results.execute(_KEPT, (sweep_cfg.name, target.name)).fetchone()
        results.rollback()
        if kept is None:
            return None
        (sweep_id, exp_id, tid, settings, k, kdepth, ts_name, ts_hash, n_queries, judged, gt,
         point_hash, label, old_run, params, fingerprint, n_points) = kept  # fmt: skip
        point = points[0]
        if (
            (params or {}).get("epoch") != digest
            or n_points != 1
            or judged
            or (k, kdepth) != (sweep_cfg.k, depth)
            or label != point.label
            or settings != base
            or not fingerprint
        ):
            return None
        return _measure(
            database, results, kb, sweep_cfg, stage, point, target,
            kept={"sweep_id": sweep_id, "experiment_id": exp_id, "testset_id": tid,
                  "testset": ts_name, "content_hash": ts_hash, "n_queries": n_queries,
                  "ground_truth": gt, "point_hash": point_hash, "run_id": old_run,
                  "params": params, "fingerprint": fingerprint, "base": base, "depth": depth},
            digest=digest, on_warning=on_warning,
        )  # fmt: skip


def _measure(
    database: Any,
    results: Any,
    kb: Any,
    cfg: Any,
    stage: Any,
    point: Any,
    target: Any,
    *,
    kept: dict,
    digest: str,
    on_warning: Callable[..., Any] | None,
) -> Any:
    """The point's earlier run deleted, the point run again and filled, the sweep complete; an
    exception leaves the sweep failed (interrupted), which the next probe replaces in full."""
    from ..sweep import store
    from ..sweep.remeasure import REOPEN
    from ..sweep.session import finishing

    ctx = _context(results, kb, cfg, point, target, kept, digest)
    results.execute(
        REOPEN,
        {"sweep": kept["sweep_id"], "run": kept["run_id"], "target_recall": cfg.target_recall},
    )
    results.commit()

    def fill() -> None:
        store.fill(results, kept["sweep_id"], cfg.k, [])

    with finishing(results, kept["sweep_id"], kept["experiment_id"], fill):
        run_id = stage.run(ctx, f"{cfg.name}.{point.label}.1")
        store.insert_point(results, kept["sweep_id"], point, 1, kept["point_hash"], run_id)
        fill()
    for w in ctx.warnings:
        if on_warning is not None:
            on_warning(w)
    return _result(cfg, target, kept, ctx)


def _context(
    results: Any, kb: Any, cfg: Any, point: Any, target: Any, kept: dict, digest: str
) -> Any:
    """The point's stage context as every sweep builds it (``sweep.context.point_context``), with the
    kept fingerprint (captured now, under ``digest``) and the plan trusted."""
    from ...providers.embedders import storage
    from ...stages.vector_common import TRUSTED_PLAN
    from .. import data_checksum
    from ..sweep.context import point_context

    queries = storage.testset_queries(results, kept["testset_id"], with_embedding=True)
    results.rollback()
    params = kept["params"]
    fp = dict(kept["fingerprint"])
    fp["info"] = {
        **(fp.get("info") or {}),
        "captured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "epoch": digest,
        # (the data named by the change log's count, which the epoch holds: no pass over the table)
        "checksum": f"{data_checksum.CONTENT_NOTE}: reused (change log unchanged; configuration "
        f"epoch {digest[:12]} unchanged since the measurement this one repeats)",
    }
    return point_context(
        cfg,
        (kb, results),
        target,
        cfg.stage,
        experiment=(cfg.name, kept["experiment_id"]),
        testset=(kept["testset"], kept["testset_id"]),
        queries=(queries, params.get("embedder")),
        depth=kept["depth"],
        rep=1,
        settings={**gucs.scope(kept["base"], cfg.stage), **point.settings},
        own=True,  # a sample's own chunk (query_source.materialize's rule)
        extra={
            "fingerprint": fp,
            "config_hash": kept["point_hash"],
            TRUSTED_PLAN: {"index": params.get("index")},
        },
    )


def _result(cfg: Any, target: Any, kept: dict, ctx: Any) -> Any:
    """What the probe reads of its sweep, as the lean path returns it."""
    from ..sweep.result import SweepResult
    from .unchanged import sample_info

    source = {"kind": "sample", "count": cfg.queries.count, "seed": cfg.queries.seed}
    result = SweepResult(
        cfg.name,
        kept["sweep_id"],
        kept["experiment_id"],
        cfg.k,
        cfg.target_recall,
        False,
        measured=1,
        config_hash=None,
        testset=kept["testset"],
        queries=sample_info(kept["testset"], kept["content_hash"], kept["n_queries"], source,
                            target)[1],
        judged=False,
        server=dict(ctx.extra["fingerprint"].get("server") or {}),
    )  # fmt: skip
    gt = dict(kept["ground_truth"] or {})
    gt["status"] = "reused"
    result.ground_truth = gt
    result.warnings = list(ctx.warnings)
    return result
