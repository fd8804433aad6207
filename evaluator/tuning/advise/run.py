"""Run an advise: one stored sweep per design x build, read back from the sweep's own rows
(:mod:`.measure`), then the recommendation (:mod:`.recommend`). A rerun reuses every stored point
and builds nothing that is not missing ("stored").

The flow (:mod:`.screen`): a design the table has is measured in place (the anchor); on a
table of more than ``screen.SCREEN_ABOVE`` rows (or with ``sample_rows``) every design is
screened on a sample, the others pruned (:mod:`.prune`) and at most one built in full; on a
smaller table every design is measured at the table's size. Builds are on copies without the
sampled query rows (:mod:`.sample`).

- ``group_by``: every design measured per group (one index over every group, one sweep per
  group); a design meets the target only where every group does.
- ``confirm_on_table``: the design built in full is built CONCURRENTLY on the table
  (:mod:`.confirm`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ...core.errors import InputError, param
from ...core.warnings_once import once
from ...table import copied_rows
from ...testset.query_source import label
from .. import build_sweep, spent
from ..sweep.scan_modes import searched
from . import confirm, inplace, margin, measure, modes, recommend, sample, screen, shapes
from .outcome import Outcome
from .plan import AdviseConfig, Design, designs, iterative_variants, raised_variants, supported

OnDesign = Callable[[int, int, Design, "float | None"], None] | None
OnDesigned = Callable[[int, int, Design, Mapping[str, Any]], None] | None


@dataclass
class AdviseResult:
    target: str
    k: int
    target_recall: float
    budgets: dict[str, float]
    designs: list[Outcome] = field(default_factory=list)
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
    confirmed: list[str] = field(default_factory=list)  # designs built in full after screening
    low_end: bool = False  # each design at its setting interval's upper end (ungrouped)
    anchor: str | None = None  # the design the table has, measured in place (screening)
    dropped: list[dict[str, Any]] = field(default_factory=list)  # {design, why}: not built in full
    full_build: dict[str, Any] | None = None  # the one design built in full after screening
    held_out: int = 0  # sampled query rows left out of the full copy
    spent: dict[str, float] = field(default_factory=dict)  # seconds: ground truth, copies, ...
    stored: bool = False  # nothing built or measured: every figure read back as stored
    notes: list[str] = field(default_factory=list)  # what advise did to the table, in words
    # --group-by: {per_group, sample_queries, groups, given}: the queries each group is measured
    # with (--sample-queries spread over the groups, or --group-queries)
    group_queries: dict[str, Any] | None = None
    # --group-by: the chosen index in each scan mode, the groups no setting brings to the target
    scan: dict[str, Any] = field(default_factory=dict)

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
            "group_queries": self.group_queries,
            "screened_on": self.screened_on,
            "confirmed_on": "full" if self.screened_on is not None else None,
            "screen": self.screen,
            "confirmed": self.confirmed,
            "anchor": self.anchor,
            "dropped": self.dropped,
            "full_build": self.full_build,
            "held_out": self.held_out,
            "spent": self.spent,
            "stored": self.stored,
            "notes": self.notes,
            "skipped": self.skipped,
            "designs": [d.as_dict() for d in self.designs],
            "recommendation": self.recommendation,
            "unmet": self.unmet,
            **self.scan,
            "warnings": self.warnings,
        }


def refuse_statement(target: Any) -> None:
    """advise measures each design on a scratch copy of the table, and a statement target's
    statement names the table itself: it would measure the table's own index under every
    design's name. Refused, naming what measures the statement in place."""
    if target.statement is None:
        return

    raise InputError(
        f"target '{target.name}' is searched by its own statement, which names its table: "
        "advise builds each design on a scratch copy the statement does not search; measure "
        f"the index it uses in place with `pgeval sweep --target {target.name} --stage KIND "
        "--find SETTING` (e.g. hnsw, hnsw.ef_search), or advise a target of the same table "
        "without --statement",
        field=param("target"),
    )


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
    from ...targets import targets
    from ...targets.groups import column_for, ungrouped
    from . import apply

    _check(cfg)
    column = None if cfg.group_by == "" else column_for(database, cfg.target, cfg.group_by)
    with database.connect(results=False, autocommit=True) as kb:
        available, why_not = supported(kb)
        plan = designs(cfg, available, why_not, grouped=column is not None)
        apply.check_role(kb, cfg.role)
    with database.connect() as conn:
        target = targets.load(conn, cfg.target)
        refuse_statement(target)
        if cfg.queries is None and cfg.testset:  # a test set that is not there: before work
            from ...testset.catalog import resolve_testset

            resolve_testset(conn, cfg.testset)
    with database.connect(results=False, autocommit=True) as kb:  # (per group: partial ones)
        plan = inplace.match(kb, target, plan, column)  # the indexes the table has, in place
        q = cfg.queries
        sampled = q.kind == "sample" if q is not None else not cfg.testset
        if sampled or any(d.in_place is None for d in plan):  # (a held-out copy, a build)
            copied_rows.require_create(kb, "advise")
    spread = None
    if column is not None:  # before any work: the column, the queries per group, a group
        cfg, spread = _spread(database, cfg, column)
    else:
        ungrouped(cfg.group_queries)
    result = AdviseResult(
        cfg.target,
        cfg.k,
        cfg.target_recall,
        recommend.budgets(cfg),
        skipped={k: v for k, v in why_not.items() if not cfg.designs},
        settings=dict(cfg.settings),
        group_by=column,
        low_end=cfg.low_end,
        group_queries=spread,
    )

    warn = once(result.warnings, on_warning)

    measured = _Measure(database, cfg, column, warn, on_design, on_find, result)
    measured.on_designed = on_designed
    t0 = time.monotonic()
    with spent.ledger() as book:
        with build_sweep.shared():  # one scratch copy per source; dropped at the end
            _flow(database, cfg, plan, column, measured)
        result.designs = margin.attach(database, result.designs, cfg.k)
        _recommend(database, cfg, target, column, result, warn)
    result.spent = spent.split(book, time.monotonic() - t0)
    result.stored = book["builds"] == 0 and all(not r.get("measured") for r in result.designs)
    return result


def _spread(
    database: Any, cfg: AdviseConfig, column: str
) -> tuple[AdviseConfig, dict[str, Any] | None]:
    """The groups checked before any work (the column, the queries, a group to measure), and
    the sampled queries each is measured with (``targets.groups.plan``: ``--sample-queries N``
    spread over the groups measured, unless ``--group-queries`` says how many per group): from
    then on the count and ``--group-queries``. (the config, what was done; None: captured)"""
    from dataclasses import replace

    from ...targets.groups import plan as group_plan

    chosen = group_plan(
        database, cfg.target, column, cfg.max_groups, cfg.queries, "measure", cfg.group_queries
    )
    said = chosen.sampled(cfg.queries, cfg.group_queries)
    if said is None:
        return cfg, None
    counted = replace(cfg.queries, count=chosen.per_group)
    return replace(cfg, queries=counted, group_queries=chosen.per_group), said


def _flow(
    database: Any, cfg: AdviseConfig, plan: list[Design], column: str | None, measured: _Measure
) -> None:
    """Every design measured (in place, in full) or screened and pruned (:mod:`.screen`)."""
    rows = screen.table_rows(database, cfg.target)
    qs = measured.query_set(plan[0]) if plan else None
    held = () if qs is None else sample.held_out_ids(database, *qs)
    size = screen.sample_size(rows, cfg.sample_rows)
    if size is None:
        measured.result.designs = screen.in_full(database, cfg, plan, column, measured, held, rows)
    else:
        measured.result.designs = screen.screened(
            database, cfg, plan, column, measured, held, rows, size
        )
    if column is not None:  # per tenant: the index in place in each iterative-scan mode too
        extra = iterative_variants(plan, cfg, lambda kind: searched(database, kind, cfg.settings))
        if extra:
            done = screen.in_full(database, cfg, extra, column, measured, held, rows)
            # a mode short of the target: once more with its limits raised
            higher = raised_variants(extra, done, cfg.settings)
            measured.result.designs += done + (
                screen.in_full(database, cfg, higher, column, measured, held, rows)
                if higher
                else []
            )


def _recommend(
    database: Any,
    cfg: AdviseConfig,
    target: Any,
    column: str | None,
    result: AdviseResult,
    warn: measure.Warn,
) -> None:
    with database.connect(results=False, autocommit=True) as kb:
        context = recommend.server_context(kb, target, cfg)
        result.designs = [recommend.describe(row, context, cfg) for row in result.designs]
        eligible = [r for r in result.designs if r.get("measured_on", "table") == "table"]
        result.recommendation, result.unmet = recommend.choose(
            kb, target, eligible, cfg, group=column
        )
    chosen = None
    if result.recommendation is not None:
        rec = result.recommendation
        chosen = next(
            r for r in eligible if r["sweep"] == rec["sweep"] and r["point"] == rec["point"]
        )
    result.scan = modes.answer(result.designs, chosen, cfg.target_recall, column)
    said = confirm.drop_unless_chosen(database, cfg, result.designs, result.recommendation)
    if said:
        result.notes.append(said)
    if result.recommendation is not None:
        wide = margin.warning(result.recommendation, cfg.k, cfg.target_recall)
        if wide:
            warn(wide)
        if column is None:  # captured: each shape at the setting, as the application sends it
            result.recommendation, said = shapes.check(database, cfg, result.recommendation, warn)
            if said:
                result.notes.append(said)


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
        self.done = 0
        self.total = 0
        # per target (the table, a sample copy): its query set and data, measured once for
        # every design (a grouped advise measures them per group, in each group's sweep)
        self.known: dict[str, measure.Known] = {}

    def all(self, plan: list[Design], target: str) -> list[Outcome]:
        self.total = max(self.total, self.done + len(plan))
        return [self.one(d, target) for d in plan]

    def one(self, design: Design, target: str, eta: float | None = None) -> Outcome:
        """One design measured on ``target``; ``eta``: the seconds it is expected to take (a
        full build's, from the sample's build rate), else None: no estimate (designs differ too
        much for the average of those measured to say what is left: issue 50 saw "about 19 s
        left" with 110 s to go)."""
        if self.on_design:
            self.on_design(self.done + 1, max(self.total, self.done + 1), design, eta)
        known = self._known(design, target)
        row, res = measure.design_row(
            self.database, self.cfg, design, target, self.column, self.warn, self.on_find, known
        )
        if self.cfg.low_end:
            row = measure.low_end(row, res, design, self.cfg.target_recall)
        # what its queries are: sampled rows in the index they search (an upper bound), held out
        row = replace(row, queries=label(res.queries, held_out=known.held_out))
        self.done += 1
        if self.on_designed:
            self.on_designed(self.done, self.total, design, row)
        self.result.testset, self.result.queries = res.testset, res.queries
        return row

    def _known(self, design: Design, target: str) -> measure.Known:
        """The target's query set and data; a copy's sweeps search the table's query set."""
        if self.column is not None:
            return measure.NOTHING_KNOWN
        if target not in self.known:
            table = None if target == self.cfg.target else self.query_set(design)
            self.known[target] = measure.known(self.database, self.cfg, design, target, table)
        return self.known[target]

    def query_set(self, design: Design) -> tuple[str, dict] | None:
        """The table's query set (its stored name, its source's record); None: grouped (each
        group's own) or a graded test set."""
        if self.column is not None:
            return None
        return self._known(design, self.cfg.target).query_set


def _check(cfg: AdviseConfig) -> None:
    from ..sweep.config import check_target_recall

    check_target_recall(cfg)
    for opt in ("max_p95_ms", "max_index_mb", "max_build_s"):
        value = getattr(cfg, opt)
        if value is not None and not value > 0:
            raise InputError(f"{param(opt)} must be above 0, got {value:g}", field=param(opt))
    for opt in ("sample_rows", "max_groups", "group_queries"):
        count = getattr(cfg, opt)
        if count is not None and count < 1:
            raise InputError(f"{param(opt)} must be >= 1, got {count}", field=param(opt))
