"""The pipeline's exact stage from the stored ground truth (:mod:`.store`): :func:`offer` lets
every exact stage of a pipeline take its lists from it, :func:`run_exact` is that stage's run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.db import Database
from ..core.errors import param
from .store import ensure, materialize


def query_set(database: Database, cfg: Any) -> Any:
    """``cfg`` with its query source stored as a query set (its name as the test set)."""
    from dataclasses import replace

    from ..core.errors import InputError
    from ..targets import targets
    from ..testset import query_source

    if not cfg.target:
        raise InputError(
            f"query vectors are searched on a target: give {param('target')}", field=param("target")
        )
    with database.connect() as conn:
        target = targets.load(conn, cfg.target)
    if getattr(cfg, "group", None) is not None:  # one group's rows: run/groups.py
        target = target.scoped(*cfg.group)
    name, info = query_source.materialize(database, cfg.queries, target)
    return replace(cfg, testset=name, queries=None), info


def offer(contexts: dict, config: dict, data: dict | None, settings: dict) -> None:
    """Let every exact stage of a pipeline (``contexts``) take its lists from the stored ground
    truth: by default for query vectors without judgements, else when asked (``--opt
    exact:ground_truth=stored``); ``exact:ground_truth=off`` runs the exact statement per query
    (timed) as before. ``config``: the experiment's (its test set's hash, its query set)."""
    from ..core.errors import InputError

    testset_hash, qinfo = config["testset_hash"], config.get("queries")
    shared: dict = {}
    for ctx in contexts.values():
        if ctx.target is None:
            continue
        mode = ctx.options.get("ground_truth", "stored" if qinfo else "off")
        if mode not in ("stored", "off"):
            raise InputError(
                f"option {ctx.stage}:ground_truth={mode!r} must be stored or off",
                field=param("options"),
            )
        if mode == "stored" and data is not None:
            ctx.extra["ground_truth"] = {
                "testset_hash": testset_hash,
                "data": data,
                "settings": settings,
                "shared": shared,
                "own": bool(qinfo and qinfo["own_chunk_removed"]),
                "run": run_exact,  # the exact stage's run (stages/exact.py, a layer below)
            }


def run_exact(ctx: Any, run_name: str, on_warning: Callable[..., Any] | None = None) -> int:
    """The exact stage's run from the stored ground truth (computed on first use)."""
    from dataclasses import replace

    offer_ = ctx.extra["ground_truth"]
    own = offer_["own"]
    depth = ctx.depth - 1 if own else ctx.depth
    shared = offer_["shared"]
    if "gt" not in shared:
        progress = ctx.progress

        def on_progress(rows: Any, total: Any) -> None:
            if progress is not None:
                if "started" not in shared:
                    progress.start(f"{ctx.stage} (ground truth, rows read)", total or 0)
                    shared["started"] = True
                    shared["done"] = 0
                progress.advance(rows - shared["done"])
                shared["done"] = rows

        settings = {k: v for k, v in offer_["settings"].items() if k != "enable_seqscan"}
        shared["gt"] = ensure(
            ctx.results,
            ctx.kb,
            ctx.target,
            testset_hash=offer_["testset_hash"],
            queries=ctx.queries,
            depth=depth,
            data=offer_["data"],
            own_chunk_removed=own,
            settings=settings,
            embedder=ctx.embedder,
            on_progress=on_progress,
            on_warning=ctx.warn,
        )
    return materialize(replace(ctx, depth=depth), shared["gt"], run_name)
