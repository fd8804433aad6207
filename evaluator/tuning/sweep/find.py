"""``pgeval sweep --find GUC``: the cheapest value of one work setting that reaches the target
recall, found by the sweep itself: bracketing (halving or doubling from the setting's current
value), then bisection on integers, within [1, --find-max]. Every value it tries is a point of the
sweep, measured like any other (``--repeat`` times, stored under its fingerprint, so a rerun or
another sweep reuses it); with other ``--param`` grids, one find per combination of the others.

Recall against exact search at a fixed query set is a deterministic function of the setting on an
unchanged index, and in practice non-decreasing in it; the answer is the smallest value tried
that reaches the target with every smaller value tried below it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ...measure.operating_points import reaches as reach

DEFAULT_START = 40  # where the search starts when the setting has no numeric value
DEFAULT_MAX = 1000  # hnsw.ef_search's own maximum


@dataclass
class Find:
    setting: str
    others: dict  # the other --param values this find ran under
    value: int | None = None  # the smallest value reaching the target; None: out of reach
    recall: float | None = None
    reached: bool = False
    path: list[list] = field(default_factory=list)  # [[value, recall], ...] in the order tried
    best: list | None = None  # when out of reach: [value, recall] of the best tried

    def as_dict(self) -> dict:
        return asdict(self)


def search(
    setting: str,
    others: dict,
    measure: Callable[[int], float | None],
    target: float,
    start: int,
    maximum: int,
    minimum: int = 1,
) -> Find:
    """Find the smallest integer in [minimum, maximum] whose ``measure`` reaches ``target``."""
    out = Find(setting, others)
    seen: dict[int, float] = {}

    def recall(v: int) -> float:
        if v not in seen:
            r = measure(v)
            seen[v] = -1.0 if r is None else float(r)
            out.path.append([v, r])
        return seen[v]

    def reaches(v: int) -> bool:
        return reach(recall(v), target)

    v = min(max(minimum, start), maximum)
    lo: int | None = None  # largest value known not to reach
    hi: int | None = None  # smallest value known to reach
    if reaches(v):
        hi = v
        while hi > minimum:
            v = max(minimum, hi // 2)
            if reaches(v):
                hi = v
            else:
                lo = v
                break
    else:
        lo = v
        while lo < maximum:
            v = min(maximum, lo * 2)
            if reaches(v):
                hi = v
                break
            lo = v
    if hi is not None and lo is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if reaches(mid):
                hi = mid
            else:
                lo = mid
    if hi is not None:
        out.value, out.recall, out.reached = hi, seen[hi], True
    else:
        best = max(seen, key=lambda x: (seen[x], -x))
        out.best = [best, seen[best]]
    return out
