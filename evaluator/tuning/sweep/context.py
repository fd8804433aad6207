"""The stage context of one run of a sweep, as every path builds it: the measuring session
(:mod:`.measuring`, also for a probe's reopened sweep, :mod:`.remeasure`) and the plan checks
before a sweep (:func:`.setup.check_plans`)."""

from __future__ import annotations

from typing import Any

from .config import SweepConfig


def point_context(
    cfg: SweepConfig,
    conns: tuple[Any, Any],
    target: Any,
    stage_name: str,
    *,
    experiment: tuple[str, int],
    testset: tuple[str, int],
    queries: tuple[list, Any],
    depth: int,
    rep: int,
    settings: dict,
    own: bool,
    extra: dict,
) -> Any:
    """The stage context of one run of a sweep, as every path builds it: the application's
    LIMIT K for an ANN stage (K + 1 when sampled queries drop their own chunk), ``--index`` and
    ``--isolate-index`` for it, not for exact search."""
    from ...stages.base import StageContext

    own = own and stage_name != "exact"  # sampled queries: fetch one more, drop their chunk
    extra = dict(extra)
    if own:
        extra["exclude_own"] = True
    if stage_name != "exact":  # recall@K at the application's LIMIT K (K + 1: own chunk dropped)
        extra["app_limit"] = {"k": cfg.k, "rows": cfg.k + (1 if own else 0)}
        # the deepest cut-off a sweep prints (recall@K, and recall@10, nDCG@10 when judged):
        # a stage returning fewer rows changes a printed figure only below it
        extra["figures_at"] = {"k": max(cfg.k, 10), "rows": max(cfg.k, 10) + (1 if own else 0)}
    kb, results = conns
    return StageContext(
        kb=kb,
        results=results,
        target=target,
        testset=testset[0],
        testset_id=testset[1],
        experiment=experiment[0],
        experiment_id=experiment[1],
        repetition=rep,
        stage=stage_name,
        depth=depth + (1 if own else 0),
        settings=settings,
        options={"index": cfg.index} if cfg.index and stage_name != "exact" else {},
        queries=queries[0],
        embedder=queries[1],
        isolate_index=cfg.isolate_index and stage_name != "exact",
        extra=extra,
    )
