"""advise's answer across scan modes (:mod:`evaluator.tuning.sweep.scan_modes`): the index the
recommendation keeps, as each mode measured it (the scan off: the database-wide setting; each
iterative mode: its least work), in words beside the recommendation; the groups no design nor
mode brings to the target, with the best point found for each and its cost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..sweep.scan_modes import line, unreachable, unreachable_line
from .rules import Row, index_of, mode_result


def answer(
    rows: Sequence[Row], chosen: Row | None, target: float, column: str | None
) -> dict[str, Any]:
    """``scan_modes`` (each mode of the chosen index, else of the first index measured in
    several modes), ``scan_modes_line``, ``unreachable`` and ``unreachable_line``, over the
    rows measured at the table's size; {} for an ungrouped advise."""
    if column is None:
        return {}
    rows = [r for r in rows if r.get("measured_on", "table") == "table"]  # (not a sample's)
    several = [r for r in rows if sum(index_of(s) == index_of(r) for s in rows) > 1]
    anchor = chosen if chosen is not None else next(iter(several), None)
    same = [] if anchor is None else [r for r in rows if index_of(r) == index_of(anchor)]
    modes = [mode_result(r) for r in same] if len(same) > 1 else []
    seen = [
        (
            mode_result(r),
            [{**g, "value": mode_result(r).value, "design": r["design"]} for g in r["groups"]],
        )
        for r in rows
        if r.get("groups") and list(r["setting"])
    ]
    lost = unreachable(seen, target)
    find = modes[0].find if modes else next((m.find for m, _ in seen), "")
    return {
        "scan_modes": [m.as_dict() for m in modes],
        "scan_modes_line": line(modes),
        "unreachable": lost,
        "unreachable_line": unreachable_line(lost, find, column),
    }
