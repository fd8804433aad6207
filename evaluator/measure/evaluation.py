"""A run's evaluation as `pgeval metrics` shows it: the figures of
:func:`evaluator.measure.metrics.evaluate` and, when asked, the plans of its flagged queries
(:mod:`evaluator.measure.diagnostics`), all read in one snapshot. It sits above both modules, as
the diagnostics read the flagged queries through ``metrics``."""

from __future__ import annotations

from typing import Any

from ..core.db import Database, snapshot
from .metrics import Evaluation, evaluate, measures_for


def evaluate_in(
    database: Database,
    run_name: str,
    measures: list[str] | None = None,
    *,
    plans: bool = False,
    **kwargs: Any,
) -> Evaluation:
    """:func:`evaluate` with every figure read in one snapshot of ``database``; ``plans``: also
    the flagged queries with the stored plan of the stage that served each
    (:func:`evaluator.measure.diagnostics.show_in`; implies ``with_flagged``)."""
    measures = measures or measures_for()
    if plans:
        kwargs["with_flagged"] = True
    with snapshot(database) as conn:
        ev = evaluate(conn, run_name, measures, **kwargs)
        if plans and not kwargs.get("with_per_query"):
            from .diagnostics import show_in  # imports numpy: only when plans are asked for

            ev.plans = show_in(conn, run_name, measures)
    return ev
