"""A probe's configuration (`pgeval watch`'s options), read by :mod:`.probe` and :mod:`.advice`."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import Grouping, Measuring, Queries


@dataclass(frozen=True, kw_only=True)
class WatchConfig(Queries, Measuring, Grouping):
    """`pgeval watch`'s options: the query source, measuring and grouping groups
    (:mod:`evaluator.tuning.options`; ``settings``: the production setting) and the bounds."""

    target: str
    stage: str
    min_recall: float | None = None
    max_drop: float | None = None
    max_p95_ms: float | None = None
    index: str | None = None
    remedy: bool = True  # measure a higher setting on the same queries when recall is crossed
    remedy_max: int | None = None  # the largest value tried (find's --find-max)
    group: tuple[str, str] | None = None  # (column, value): this probe's group
    shape: int | None = None  # --captured: this probe's shape (its statement, LIMIT, values)


# what `pgeval watch` does without options (the CLI's option defaults and the API's)
WATCH_DEFAULTS = WatchConfig(target="", stage="")
