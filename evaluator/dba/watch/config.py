"""A probe's configuration (`pgeval watch`'s options), read by :mod:`.probe` and :mod:`.advice`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...stages.gucs import DEFAULT_STATEMENT_TIMEOUT

if TYPE_CHECKING:
    from ...testset.query_source import QuerySource


@dataclass
class WatchConfig:
    target: str
    stage: str
    queries: QuerySource | None = None  # None with testset
    testset: str | None = None
    settings: dict = field(default_factory=dict)  # --set
    k: int = 10
    min_recall: float | None = None
    max_drop: float | None = None
    max_p95_ms: float | None = None
    index: str | None = None
    statement_timeout: str | None = DEFAULT_STATEMENT_TIMEOUT
    remedy: bool = True  # measure a higher setting on the same queries when recall is crossed
    remedy_max: int | None = None  # the largest value tried (find's --find-max)
    group_by: str | None = None  # one probe per group of this column (None: the target's)
    max_groups: int = 10
    group: tuple[str, str] | None = None  # (column, value): this probe's group
    shape: int | None = None  # --captured: this probe's shape (its statement, LIMIT, values)


# what `pgeval watch` does without options (the CLI's option defaults and the API's)
WATCH_DEFAULTS = WatchConfig(target="", stage="")
