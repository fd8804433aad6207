"""The one percentile rule: nearest rank (docs/METRICS.md), as SQL's ``pgeval.nearest_rank``
defines it: sort ascending, take element ``ceil(p * n)`` (1-based), with ``p * n`` computed
exactly (``0.07 * 100`` is 7, not 7.000000000000001). For latencies measured on the client that
are not stored (warm-up passes); stored latencies are read through the SQL function."""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction


def nearest_rank(values: Iterable[float], fraction: float) -> float | None:
    """The nearest-rank percentile of ``values`` (None when there are none); ``fraction`` in
    (0, 1]."""
    if not 0 < fraction <= 1:
        raise ValueError(f"percentile must be in (0, 1], got {fraction}")
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    # the decimal the caller wrote (0.95), not its binary neighbour: 15 significant digits, as
    # PostgreSQL's float8 -> numeric cast reads it
    exact = Fraction(f"{float(fraction):.15g}") * len(ordered)
    return ordered[max(1, math.ceil(exact)) - 1]
