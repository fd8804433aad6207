"""`pgeval sweep`: run an ANN stage at every point of a grid through the stage framework
(:mod:`evaluator.stages`), against exact search, repeated; record every point under its config
hash so that an interrupted or repeated sweep measures only what is missing.

Layout in the database: the sweep is one experiment named like the sweep; its runs are
``{sweep}.exact.{rep}`` (exact search, once per repetition, needed by pgeval.index_recall) and
``{sweep}.{point label}.{rep}``; `pgeval stage-report SWEEP` therefore shows the points side by
side too. Repetitions are the outer loop, so that drift of the machine touches every point alike.

A sweep is one measuring session (:mod:`.session`) and the strategy its configuration names
(:mod:`.strategies`: a grid, builds, a find).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config import ANN_KINDS, SweepConfig
from .result import SweepResult
from .session import NOTHING_KNOWN, Callbacks, Known, open_session
from .setup import default_name

if TYPE_CHECKING:
    from ...core.db import Database

__all__ = ["ANN_KINDS", "Known", "SweepConfig", "SweepResult", "default_name", "run_sweep"]


def run_sweep(
    database: Database,
    cfg: SweepConfig,
    *,
    on_warning: Callable[..., Any] | None = None,
    on_point: Callable[..., Any] | None = None,
    on_start: Callable[..., Any] | None = None,
    on_ground_truth: Callable[..., Any] | None = None,
    on_find: Callable[..., Any] | None = None,
    known: Known = NOTHING_KNOWN,
) -> SweepResult:
    """Run (or resume) the sweep; ``on_start(points, repetitions, queries)`` once the grid and
    the queries are known; ``on_point(point, repetition, how)`` after each grid point and
    repetition (how: measured | reused | kept); ``on_ground_truth(rows, total)`` while the exact
    ground truth is computed; ``on_find(point, recall)`` after each value a --find tried;
    ``known``: what the caller measured already (:class:`.session.Known`)."""
    from .strategies import measure

    callbacks = Callbacks(on_warning, on_point, on_ground_truth, on_find, on_start)
    with open_session(database, cfg, known=known, callbacks=callbacks) as session:
        measure(session)
    res = session.result
    if cfg.held_out_rows != 0:
        from . import held_out

        res.held_out = held_out.check(database, cfg, res, cfg.held_out_rows)
    return res
