"""Run an advise: one stored sweep per design x build (``sweep --build ... --find ...``: the index
built on a scratch copy, dropped afterwards), read back from the sweep's own rows
(:mod:`.measure`), then the recommendation (:mod:`.recommend`). A rerun reuses every stored point
and builds nothing that is not missing.

- ``group_by``: every design measured per group (one index over every group, one sweep per
  group); a design meets the target only where every group does.
- ``sample_rows``: every design screened on a sample of the target (:mod:`.sample`), the best
  (and a cheap runner-up) confirmed on the whole table; the recommendation is among the
  confirmed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import InputError, param
from ...core.warnings_once import once
from .. import build_sweep
from . import inplace, margin, measure, recommend, sample
from .plan import AdviseConfig, Design, designs, supported

OnDesign = Callable[[int, int, Design, "float | None"], None] | None
OnDesigned = Callable[[int, int, Design, dict[str, Any]], None] | None


@dataclass
class AdviseResult:
    target: str
    k: int
    target_recall: float
    budgets: dict[str, float]
    designs: list[dict[str, Any]] = field(default_factory=list)
    recommendation: dict[str, Any] | None = None
    unmet: dict[str, Any] | None = None  # nothing meets R within the budgets: what binds
    skipped: dict[str, str] = field(default_factory=dict)  # design -> why it cannot be built
    settings: dict[str, str] = field(default_factory=dict)  # --set: measured under
    queries: dict[str, Any] | None = None
    testset: str | None = None
    warnings: list[str] = field(default_factory=list)
    group_by: str | None = None  # every design measured per group of this column
    screened_on: int | None = None  # --sample-rows: the rows every design was screened on
    screen: dict[str, Any] | None = None  # the sample's target, rows, the table's rows
    confirmed: list[str] = field(default_factory=list)  # designs measured on the whole table
    low_end: bool = False  # each design at its setting interval's upper end (ungrouped)

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "k": self.k,
            "target_recall": self.target_recall,
            "low_end": self.low_end,
            "budgets": self.budgets,
            "testset": self.testset,
            "queries": self.queries,
            "measured_under": self.settings,
            "group_by": self.group_by,
            "screened_on": self.screened_on,
            "confirmed_on": "full" if self.screened_on is not None else None,
            "screen": self.screen,
            "confirmed": self.confirmed,
            "skipped": self.skipped,
            "designs": self.designs,
            "recommendation": self.recommendation,
            "unmet": self.unmet,
            "warnings": self.warnings,
        }


def run_advise(
    database: Any,
    cfg: AdviseConfig,
    *,
    on_design: OnDesign = None,
    on_warning: Callable[[str], None] | None = None,
    on_find: measure.OnFind = None,
    on_designed: OnDesigned = None,
) -> AdviseResult:
    """Measure every design x build (``on_design(i, n, design, seconds_left)`` before each,
    ``on_find(design, point, recall)`` after each value a find tried, ``on_designed(i, n,
    design, row)`` after each: its row says what was measured, what read from stored sweeps)
    and recommend one."""
    from ...target import targets
    from ...target.groups import column_for
    from . import apply

    _check(cfg)
    column = None if cfg.group_by == "" else column_for(database, cfg.target, cfg.group_by)
    with database.connect(results=False, autocommit=True) as kb:
        available, why_not = supported(kb)
        plan = designs(cfg, available, why_not)
        apply.check_role(kb, cfg.role)
    with database.connect() as conn:
        target = targets.load(conn, cfg.target)
        if cfg.queries is None and cfg.testset:  # a test set that is not there: before work
            from ...testset.catalog import resolve_testset

            resolve_testset(conn, cfg.testset)
    with database.connect(results=False, autocommit=True) as kb:
        plan = inplace.match(kb, target, plan)  # the indexes the table has: measured in place
    if column is not None:  # before any work: the column, the queries per group, a group
        from ...target.groups import plan as group_plan

        group_plan(database, cfg.target, column, cfg.max_groups, cfg.queries, "measure")
    result = AdviseResult(
        cfg.target,
        cfg.k,
        cfg.target_recall,
        recommend.budgets(cfg),
        skipped={k: v for k, v in why_not.items() if not cfg.designs},
        settings=dict(cfg.settings),
        group_by=column,
        low_end=cfg.low_end,
    )

    warn = once(result.warnings, on_warning)

    measured = _Measure(database, cfg, column, warn, on_design, on_find, result)
    measured.on_designed = on_designed
    with build_sweep.shared():  # one scratch copy for every design; dropped at the end
        if cfg.sample_rows is None:
            result.designs = measured.all(plan, cfg.target)
        else:
            _screen_and_confirm(database, cfg, plan, column, measured, result)
    margin.attach(database, result.designs, cfg.k)
    with database.connect(results=False, autocommit=True) as kb:
        context = recommend.server_context(kb, target, cfg)
        for row in result.designs:
            recommend.describe(row, context, cfg)
        eligible = [r for r in result.designs if r.get("measured_on", "table") == "table"]
        result.recommendation, result.unmet = recommend.choose(
            kb, target, eligible, cfg, group=column
        )
    if result.recommendation is not None:
        wide = margin.warning(result.recommendation, cfg.k, cfg.target_recall)
        if wide:
            warn(wide)
    return result


class _Measure:
    """Measures designs on a target, with the progress line's estimate of the time left."""

    def __init__(
        self,
        database: Any,
        cfg: AdviseConfig,
        column: str | None,
        warn: measure.Warn,
        on_design: OnDesign,
        on_find: measure.OnFind,
        result: AdviseResult,
    ) -> None:
        self.database, self.cfg, self.column, self.warn = database, cfg, column, warn
        self.on_design, self.on_find, self.result = on_design, on_find, result
        self.on_designed: OnDesigned = None
        self.spent: list[float] = []
        self.done = 0
        self.total = 0
        # per target (the table, a sample copy): its query set and data, measured once for
        # every design (a grouped advise measures them per group, in each group's sweep)
        self.known: dict[str, measure.Known] = {}

    def all(self, plan: list[Design], target: str) -> list[dict[str, Any]]:
        self.total = max(self.total, self.done + len(plan))
        return [self.one(d, target) for d in plan]

    def one(self, design: Design, target: str) -> dict[str, Any]:
        if self.on_design:
            left = None
            if self.spent:
                left = sum(self.spent) / len(self.spent) * (self.total - self.done)
            self.on_design(self.done + 1, self.total, design, left)
        t0 = time.monotonic()
        known = self._known(design, target)
        row, res = measure.design_row(
            self.database, self.cfg, design, target, self.column, self.warn, self.on_find, known
        )
        if self.cfg.low_end:
            measure.low_end(row, res, design, self.cfg.target_recall)
        if row["measured"]:
            self.spent.append(time.monotonic() - t0)
        self.done += 1
        if self.on_designed:
            self.on_designed(self.done, self.total, design, row)
        self.result.testset, self.result.queries = res.testset, res.queries
        return row

    def _known(self, design: Design, target: str) -> measure.Known:
        if self.column is not None:
            return measure.NOTHING_KNOWN
        if target not in self.known:
            self.known[target] = measure.known(self.database, self.cfg, design, target)
        return self.known[target]


def _screen_and_confirm(
    database: Any,
    cfg: AdviseConfig,
    plan: list[Design],
    column: str | None,
    measured: _Measure,
    result: AdviseResult,
) -> None:
    """Every design on the sample; the best (and a cheap runner-up) again on the whole table.
    The confirmed designs' rows are the table's figures (their screening beside them)."""
    assert cfg.sample_rows is not None
    measured.total = len(plan) + 2
    with sample.copy(database, cfg.target, cfg.sample_rows, column) as sampled:
        screened = measured.all(plan, sampled.target)
    result.screened_on = sampled.rows
    result.screen = {"target": sampled.target, "rows": sampled.rows, "table_rows": sampled.of}
    scale = sampled.of / max(sampled.rows, 1)
    picked = sample.to_confirm(screened, scale, recommend.budgets(cfg))
    measured.total = len(plan) + len(picked)
    rows = []
    for i, (design, screen) in enumerate(zip(plan, screened)):
        if i not in picked:
            rows.append({**screen, "measured_on": "sample"})
            continue
        row = measured.one(design, cfg.target)
        keep = ("setting", "recall", "p95_ms", "index_bytes", "build_ms", "reached", "sweep")
        row["screened"] = {k: screen[k] for k in keep}
        row["measured_on"] = "table"
        result.confirmed.append(design.label)
        rows.append(row)
    result.designs = rows


def _check(cfg: AdviseConfig) -> None:
    if not 0 < cfg.target_recall <= 1:
        raise InputError(
            f"{param('target_recall')} must be in (0, 1], got {cfg.target_recall}",
            field=param("target_recall"),
        )
    for opt, value in (
        ("max_p95_ms", cfg.max_p95_ms),
        ("max_index_mb", cfg.max_index_mb),
        ("max_build_s", cfg.max_build_s),
    ):
        if value is not None and not value > 0:
            raise InputError(f"{param(opt)} must be above 0, got {value:g}", field=param(opt))
    if cfg.sample_rows is not None and cfg.sample_rows < 1:
        raise InputError(
            f"{param('sample_rows')} must be >= 1, got {cfg.sample_rows}",
            field=param("sample_rows"),
        )
    if cfg.max_groups < 1:
        raise InputError(
            f"{param('max_groups')} must be >= 1, got {cfg.max_groups}",
            field=param("max_groups"),
        )
