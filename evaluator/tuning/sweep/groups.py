"""Recall per group of a target (``pgeval sweep --group-by COLUMN``): a knowledge base serves
tenants, the application scopes every search to one (``WHERE knowledge_base_id = $2``), and a
filtered index scan returns short lists for small groups. A whole-table recall of 0.95 can hide a
tenant at 0.1; this measures each group as the application searches it.

- The groups: the values of COLUMN among the target's rows (its filters applied; NULL is no
  group); all of them up to ``max_groups``, else the largest half and the smallest half of that
  many. A group of one chunk has nothing to find besides itself and is skipped, saying so.
- Per group, one sweep (:func:`runner.run_sweep` with ``group=(column, value)``): rows of that
  group as queries (``--sample-queries N`` spread over the groups, or ``--group-queries M`` each,
  at most its chunks: ``targets.groups.plan``), exact ground truth within the group, every
  point measured with ``WHERE column = value`` added to the target's filters. Each is an
  ordinary stored sweep: a rerun measures only what is missing, and the same point in
  another grouping or sweep is reused.
- The recommendation is SQL's cost rule over the groups' worst recall per point
  (``pgeval.sweeps_recommendation``); with ``--find``, each group finds its own least value and
  every group is then measured at every value found (mostly reused), so that the setting that
  brings the worst group to the target is measured in every group, not inferred; a group that
  reaches no value adds the best value it tried.
- ``builds`` (advise): one find shared by the groups. The smallest group finds its least value
  first (a filtered index scan leaves small groups short: they need the most); each next
  group's find starts at the largest value found so far and searches only above it (a value
  below fails a group already), so that a group reaching the target there, as a group the
  planner serves exactly does, costs one point, not a find; then every group is measured at
  the largest value found (most of them reused), not at every group's own.
- ``--find`` (not ``builds``): the kind's iterative scans are searched settings
  (:mod:`.scan_modes`): the same grouped find again in each iterative mode, under its limits
  (a mode short of the target once more with its limits raised);
  ``scan_modes`` says each mode's least value, the least work across them and the groups no
  mode brings to the target (``unreachable``). Without ``--find``, groups that miss the target
  at the point shown are measured once more with each iterative mode at the same settings, to
  say whether it fixes them.
- Every group row has its share of the target's rows beside its recall.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...core.db import dict_rows, first_row
from ...core.errors import InputError, PlanError, param
from ...core.warnings_once import once
from ...kinds import registry
from ...measure.operating_points import reaches
from ...stages import gucs
from ...targets.groups import (
    DEFAULT_MAX_GROUPS,
    Chosen,
    Group,
    choose,
    column_for,
    list_groups,
    plan,
)
from .config import SweepConfig
from .result import SweepResult
from .runner import run_sweep
from .scan_modes import (
    ModeResult,
    cheapest,
    line,
    mode_of,
    raised,
    searched,
    unreachable,
    unreachable_line,
)

if TYPE_CHECKING:
    from ...core.db import Database


@dataclass
class GroupSweepResult:
    column: str
    k: int
    target_recall: float
    groups_total: int  # groups in the target (non-NULL values)
    chosen: str  # which groups were measured, in words
    null_rows: int = 0  # rows whose column is NULL: in no group
    skipped: list[dict] = field(default_factory=list)  # {"group", "rows", "why"}
    sweeps: dict[str, SweepResult] = field(default_factory=dict)  # group -> its sweep
    failed: dict[str, str] = field(default_factory=dict)  # group -> why it was not measured
    points: list[dict] = field(default_factory=list)  # per point: worst group, groups
    groups: list[dict] = field(default_factory=list)  # at `at`, worst first
    at: dict | None = None  # the point the groups are shown at (label, settings, why)
    recommendation: dict | None = None
    finds: dict[str, dict] = field(default_factory=dict)  # group -> its find
    warnings: list[str] = field(default_factory=list)
    rows_total: int = 0  # the target's rows: what a group's share is of
    # --find: each scan mode's answer (the scan off first) and the groups none brings to R
    scan_modes: list[ModeResult] = field(default_factory=list)
    unreachable: list[dict] = field(default_factory=list)
    # the sampled queries of each group: targets.groups.Chosen.sampled (None: captured)
    group_queries: dict[str, Any] | None = None

    def as_dict(self) -> dict:
        return {
            "group_by": self.column,
            "k": self.k,
            "target_recall": self.target_recall,
            "groups_total": self.groups_total,
            "chosen": self.chosen,
            "null_rows": self.null_rows,
            "skipped": self.skipped,
            "failed": [{"group": g, "why": w} for g, w in self.failed.items()],
            "sweeps": {g: s.name for g, s in self.sweeps.items()},
            "consistency": {g: s.consistency for g, s in self.sweeps.items()},
            "at": self.at,
            "groups": self.groups,
            "points": self.points,
            "finds": self.finds,
            "recommendation": self.recommendation,
            # sampled rows through the index they are nodes of: every recall an upper bound
            "queries_label": self.queries_label,
            # the recommendation holds for every group only when every group chosen was measured
            "every_group_measured": not self.failed,
            "rows_total": self.rows_total,
            "group_queries": self.group_queries,
            "scan_modes": [m.as_dict() for m in self.scan_modes],
            # the least work reaching the target in every group across the modes
            "scan_mode": None if self.scan_mode is None else self.scan_mode.as_dict(),
            "scan_modes_line": line(self.scan_modes),
            "unreachable": self.unreachable,
            "unreachable_line": None
            if not self.scan_modes
            else unreachable_line(self.unreachable, self.scan_modes[0].find, self.column),
            "warnings": self.warnings,
        }

    @property
    def scan_mode(self) -> ModeResult | None:
        return cheapest(self.scan_modes)

    @property
    def sampled(self) -> bool:
        """The groups' queries are rows of the index they search: each recall an upper bound
        for the application's queries (:attr:`SweepResult.sampled`)."""
        return any(s.sampled for s in self.sweeps.values())

    @property
    def queries_label(self) -> str | None:
        from ...testset.query_source import label

        first = next(iter(self.sweeps.values()), None)
        return None if first is None else label(first.queries, held_out=not self.sampled)

    @property
    def missing(self) -> list[dict]:
        """The groups under the target at the point shown."""
        return [g for g in self.groups if g["recall"] is None or not g["reached"]]


def check(cfg: SweepConfig, builds: bool = False) -> None:
    """What a grouped sweep refuses besides what every grouped measurement does
    (:func:`evaluator.targets.groups.plan`); ``builds``: an index built on a scratch copy of
    every group (advise, under ``build_sweep.shared()``: one build for all groups)."""
    if cfg.build and not builds:
        raise InputError(
            f"{param('group_by')} measures the index you have, per group: not with "
            f"{param('build')} (compare builds without {param('group_by')}, then measure the "
            "chosen one per group)",
            field=param("group_by"),
        )
    if cfg.find and cfg.params:
        raise InputError(
            f"{param('find')} with {param('group_by')} finds one setting for every group: give "
            f"no other {param('params')}",
            field=param("find"),
        )


def run_groups(
    database: Database,
    cfg: SweepConfig,
    column: str,
    *,
    max_groups: int = DEFAULT_MAX_GROUPS,
    group_queries: int | None = None,
    on_group: Any = None,
    on_warning: Callable[..., Any] | None = None,
    builds: bool = False,
    generic: bool | None = None,
    search_modes: bool = True,
    **callbacks: Any,
) -> GroupSweepResult:
    """Sweep every chosen group of ``column`` (see the module's docstring; ``group_queries``:
    sampled queries per group); ``on_group(index, count, group, step)`` before each group's
    sweep (step: sweep | confirm | iterative | generic); ``builds``: see :func:`check`; ``generic``:
    each group at the point shown measured again with the generic plan (default: unless ``builds``:
    advise asks for it where it measures the table's own index); ``search_modes``: with ``--find``,
    the kind's iterative scans searched too (the module's docstring); ``callbacks`` go to
    :func:`runner.run_sweep`."""
    check(cfg, builds)
    groups = plan(database, cfg.target, column, max_groups, cfg.queries, "measure", group_queries)
    out = GroupSweepResult(
        column,
        cfg.k,
        cfg.target_recall,
        groups.total,
        groups.chosen,
        null_rows=groups.nulls,
        skipped=groups.skipped,
    )

    warn = once(out.warnings, on_warning)
    out.rows_total = groups.rows
    out.group_queries = groups.sampled(cfg.queries, group_queries)

    if groups.null_warning:
        warn(groups.null_warning)
    measured = groups.measured
    sizes = {g.value: g for g in measured}

    def sweep_of(g: Group, step: str, **changes: Any) -> SweepResult | None:
        if on_group:
            on_group(measured.index(g) + 1, len(measured), g, step)
        gcfg = _group_config(cfg, groups, g, step, **changes)
        try:
            return run_sweep(database, gcfg, on_warning=warn, **callbacks)
        except PlanError as exc:  # the planner serves this group otherwise: say so, go on
            out.failed[g.value] = str(exc)
            return None

    floor: int | None = None  # builds (advise): the largest value a group found so far
    for g in sorted(measured, key=lambda g: g.rows) if builds else measured:
        raised = {}
        if builds and cfg.find and floor is not None:
            raised = {"find_min": max(floor, cfg.find_min or 1), "find_start": floor}
        res = sweep_of(g, "sweep", **raised)
        if res is not None:
            out.sweeps[g.value] = res
            if res.finds:
                out.finds[g.value] = res.finds[0]
                if builds and res.finds[0].get("reached"):
                    floor = max(floor or 0, int(res.finds[0]["value"]))
    if cfg.find:
        _confirm(cfg, out, sizes, sweep_of, shared=builds)
    _summarize(database, cfg, out, sizes)
    kind, fixed = registry.kind(cfg.stage), gucs.scope(cfg.settings, cfg.stage)
    modes = searched(database, kind, fixed) if cfg.find and not builds and search_modes else []
    if modes:
        floor = max(cfg.find_min or 1, cfg.k)

        def again(mode: dict[str, str]) -> GroupSweepResult:
            name = None if cfg.name is None else f"{cfg.name}/{mode_of(mode)}"
            return run_groups(
                database,
                # from the LIMIT up: below it an iterative scan does its work in iterations
                # the setting does not count, and "least work" would mean nothing
                replace(cfg, settings={**cfg.settings, **mode}, name=name, find_min=floor),
                column,
                max_groups=max_groups,
                group_queries=group_queries,
                on_group=on_group,
                on_warning=warn,
                generic=False,
                search_modes=False,
                **callbacks,
            )

        _search_modes(cfg, out, modes, again)
    else:
        _iterative(cfg, out, sizes, sweep_of, warn)
    if (not builds) if generic is None else generic:  # (not on a scratch copy's index)
        _generic(cfg, out, sizes, sweep_of)
    return out


def _group_config(cfg: SweepConfig, groups: Chosen, g: Group, step: str, **changes: Any) -> Any:
    src, column = groups.queries_of(cfg.queries, g), groups.column
    name = None
    if cfg.name:
        name = f"{cfg.name}/{column}={g.value}" + ("" if step == "sweep" else f"/{step}")
    return replace(cfg, group=(column, g.value), queries=src, name=name, **changes)


def _confirm(
    cfg: SweepConfig, out: GroupSweepResult, sizes: dict, sweep_of: Any, shared: bool = False
) -> None:
    """--find: every group measured at every value a group found (most points are reused), and
    at the best value tried by a group that did not reach the target, so that the point where the
    hardest group comes closest is measured in every group too; ``shared`` (one find shared by
    the groups): at the largest value found, those best values, and the values every group's
    find measured already (kept: nothing measured again)."""
    found = {f["value"] for f in out.finds.values() if f.get("reached")}
    if shared and found:
        paths = [{int(v) for v, _ in f.get("path") or []} for f in out.finds.values()]
        every = set.intersection(*paths) if paths and len(paths) == len(out.sweeps) else set()
        found = {max(found)} | {v for v in every if v <= max(found)}
    values = sorted(
        found | {f["best"][0] for f in out.finds.values() if not f.get("reached") and f.get("best")}
    )
    if not values:
        return
    grid = (f"{cfg.find}={','.join(str(v) for v in values)}",)
    for value in list(out.sweeps):
        confirmed = sweep_of(sizes[value], "confirm", find=None, find_max=None, params=grid)
        if confirmed is not None:
            out.sweeps[value] = confirmed


def _summarize(database: Database, cfg: SweepConfig, out: GroupSweepResult, sizes: dict) -> None:
    """Points (worst group each), the recommendation and the groups at the point shown, all
    read from SQL over the groups' sweeps."""
    if not out.sweeps:
        return
    order = list(out.sweeps)
    ids = [out.sweeps[g].sweep_id for g in order]
    kind = registry.kind(cfg.stage)
    work = kind.work_settings if kind is not None else ()
    with database.connect() as conn:
        rows = dict_rows(conn, "SELECT * FROM pgeval.sweep_group_points(%s)", (ids,))
        recommendation = first_row(
            conn,
            "SELECT * FROM pgeval.sweeps_recommendation(%s, %s, %s)",
            (ids, cfg.target_recall, list(work)),
        )
        worst = dict_rows(conn, "SELECT * FROM pgeval.sweep_worst_group(%s)", (ids,))
    by_sweep = {out.sweeps[g].sweep_id: g for g in order}
    per_point: dict[int, list[dict]] = {}
    for r in rows:
        per_point.setdefault(r["point"], []).append(
            _group_row(r, by_sweep, sizes, cfg, out.rows_total)
        )
    for w in worst:
        groups = sorted(per_point.get(w["point"], []), key=_worst_first)
        out.points.append(
            {
                "point": w["point"],
                "label": w["label"],
                "settings": w["settings"],
                "worst_recall": w["index_recall"],
                "worst_group": groups[0]["group"] if groups else None,
                "p95_ms": w["p95_ms"],
                "groups": groups,
            }
        )
    out.recommendation = recommendation
    if recommendation is not None:
        at = next(p for p in out.points if p["point"] == recommendation["point"])
        why = "the recommended point"
    elif out.points:  # nothing reaches the target everywhere: the point closest to it
        at = max(out.points, key=lambda p: (p["worst_recall"] or 0, -p["point"]))
        why = "no point reaches the target in every group: the point with the best worst group"
    else:
        return
    out.at = {"point": at["point"], "label": at["label"], "settings": at["settings"], "why": why}
    out.groups = at["groups"]


def _group_row(r: dict, by_sweep: dict, sizes: dict, cfg: SweepConfig, total: int) -> dict:
    g = by_sweep[r["sweep_id"]]
    recall = r["index_recall"]
    return {
        "group": g,
        "rows": sizes[g].rows,
        "share": sizes[g].rows / total if total else None,  # of the target's rows
        "queries": r["queries"],
        "recall": recall,
        "short": r["short_queries"],
        "p95_ms": r["p95_ms"],
        "reached": reaches(recall, cfg.target_recall),
        # the planner's plan the group was measured with, and what served it
        "plan": r.get("plan_mode"),
        "served_by": r.get("served_by"),
        # "10: index kb_hnsw (hnsw)": the application's LIMIT is planned otherwise (None: not)
        "served_at_limit": r.get("served_at_limit"),
        # a partitioned table's partition holding the group (the partition key's groups)
        **({"partition": sizes[g].partition} if sizes[g].partition else {}),
    }


def _worst_first(g: dict) -> tuple:
    return (g["recall"] if g["recall"] is not None else -1.0, g["group"])


def _search_modes(
    cfg: SweepConfig,
    out: GroupSweepResult,
    modes: list[dict[str, str]],
    again: Callable[[dict[str, str]], GroupSweepResult],
) -> None:
    """The grouped find again in each iterative mode (``again``); ``out`` gets every mode's
    answer, the scan as it is first, and the groups no mode brings to the target."""
    find = str(cfg.find)
    runs: list[tuple[dict[str, str], GroupSweepResult]] = [({}, out)]
    fixed = gucs.scope(cfg.settings, cfg.stage)
    for mode in modes:
        res = again(mode)
        runs.append((mode, res))
        higher = None if res.recommendation is not None else raised(mode, fixed)
        if higher is not None:  # short of the target: once more, its limits raised
            runs.append((higher, again(higher)))
    seen: list[tuple[ModeResult, list[dict]]] = []
    for mode, res in runs:
        result = ModeResult.of_groups(mode, res, find)
        out.scan_modes.append(result)
        out.warnings.extend(w for w in res.warnings if w not in out.warnings)
        rows = [
            {**g, "value": int((p["settings"] or {}).get(find, 0)) or None}
            for p in res.points
            for g in p["groups"]
        ]
        seen.append((result, rows))
    out.unreachable = unreachable(seen, cfg.target_recall)


def _iterative(
    cfg: SweepConfig, out: GroupSweepResult, sizes: dict, sweep_of: Any, warn: Any
) -> None:
    """Groups under the target at the point shown: measured again with each iterative-scan mode
    of the kind, at the same settings; each group row gets ``iterative``: mode -> recall."""
    kind = registry.kind(cfg.stage)
    if kind is None or kind.iterative_scan is None or out.at is None or not out.missing:
        return
    setting, modes = kind.iterative_scan
    if setting in (out.at["settings"] or {}) or setting in gucs.scope(cfg.settings, cfg.stage):
        return  # the grid or --set already chose the scan mode
    fixed = {**cfg.settings, **(out.at["settings"] or {})}
    for row in out.missing:
        res = None
        try:
            res = sweep_of(
                sizes[row["group"]],
                "iterative",
                find=None,
                find_max=None,
                params=(f"{setting}={','.join(modes)}",),
                settings=fixed,
            )
        except InputError as exc:  # a server without the setting (pgvector before 0.8)
            warn(f"{setting} could not be measured: {exc.detail}")
            return
        if res is None:
            continue
        row["iterative_setting"] = setting
        row["iterative"] = {
            m.settings.get(setting): m.recall for m in res.operating_points.points if m.settings
        }
        row["fixed_by"] = [
            mode for mode, recall in row["iterative"].items() if reaches(recall, cfg.target_recall)
        ]


def _generic(cfg: SweepConfig, out: GroupSweepResult, sizes: dict, sweep_of: Any) -> None:
    """Every group at the point shown measured again with the prepared statement's generic plan
    (what psycopg 3 and JDBC get after five executions), unless the sweep named its plan mode;
    each group row gets ``generic``: {recall, served_by, differs} (differs: another path serves
    it, or another recall)."""
    if cfg.plan is not None or out.at is None or not out.groups:
        return
    point = {k: str(v) for k, v in (out.at["settings"] or {}).items()}
    params = tuple(f"{k}={v}" for k, v in point.items())
    for row in out.groups:
        if row.get("served_by") is None:  # (measured without the planner's plan: nothing to say)
            continue
        res = sweep_of(
            sizes[row["group"]], "generic", find=None, find_max=None, params=params, plan="generic"
        )
        measured = None if res is None or not res.points else res.operating_points.points[0]
        if measured is None:
            continue
        recall, served = measured.recall, measured.served_by
        row["generic"] = {
            "recall": recall,
            "served_by": served,
            "differs": served != row["served_by"]
            or (
                recall is not None
                and row["recall"] is not None
                and abs(recall - row["recall"]) > 1e-9
            ),
        }


__all__ = [
    "DEFAULT_MAX_GROUPS",
    "Group",
    "GroupSweepResult",
    "choose",
    "list_groups",
    "column_for",
    "run_groups",
]
