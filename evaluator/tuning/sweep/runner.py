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

from typing import TYPE_CHECKING, Any

from .config import ANN_KINDS, SweepConfig
from .result import SweepResult
from .session import NOTHING_KNOWN, Callbacks, Known, Session
from .setup import default_name

if TYPE_CHECKING:
    from ...core.db import Database

__all__ = ["ANN_KINDS", "Known", "SweepConfig", "SweepResult", "default_name", "run_sweep"]


def run_sweep(
    database: Database, cfg: SweepConfig, *, known: Known = NOTHING_KNOWN, **callbacks: Any
) -> SweepResult:
    """:meth:`.session.Session.run` with its callbacks as keywords (``on_warning``, ``on_point``,
    ``on_start``, ``on_ground_truth``, ``on_find``: :class:`.session.Callbacks`)."""
    return Session.run(database, cfg, known=known, callbacks=Callbacks(**callbacks))
