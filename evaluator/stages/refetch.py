"""Full lists when chunks have several rows (WeKnora's layout: a chunk's generated-question rows):
a stage that collapses rows to chunks asks its scan for ``ceil(depth * overfetch)`` rows; a query
whose rows collapse to fewer than ``--depth`` chunks while the scan returned every row it was asked
for runs again with a doubled LIMIT, until it has ``--depth`` chunks or the scan is exhausted
(fewer rows than asked for). Rows, short queries and the rows-returned minimum then count the
chunks stored. ``run.params`` says how far the LIMIT went (:func:`summary`)."""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import InputError, param


def overfetch(ctx: Any) -> float:
    """Rows fetched per chunk wanted when chunks have several rows (``STAGE:overfetch``,
    default 2 for such targets, 1 otherwise)."""
    default = 1.0 if ctx.target.unique_id else 2.0
    value = ctx.option("overfetch", default, float)
    if not 1.0 <= value <= 100.0:
        raise InputError(f"{ctx.stage}:overfetch must be between 1 and 100", field=param("options"))
    return value


def fetch_limit(depth: int, over: float) -> int:
    """The first LIMIT: ``ceil(depth * overfetch)``."""
    return math.ceil(depth * max(1.0, over))


def grow(limit: int) -> int:
    """The next LIMIT when ``limit`` rows collapsed to fewer than depth chunks."""
    return limit * 2


def summary(limits: list, first: int | None) -> dict:
    """``run.params`` of a stage that may raise its LIMIT: the first LIMIT, the largest one a
    query needed, how many queries needed more than the first (nothing when it never may)."""
    if first is None:
        return {}
    used = [x for x in limits if x is not None]
    return {
        "fetch_limit": first,
        "fetch_limit_max": max(used, default=first),
        "queries_refetched": sum(1 for x in used if x > first),
    }
