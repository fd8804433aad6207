"""A sweep's configuration (:class:`SweepConfig`, what `pgeval sweep`'s options say) and its
:class:`Plan` (the configuration checked before any connection: depth, stage, axes, points)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.errors import InputError, param
from ...kinds import registry
from ...stages import gucs
from ..options import Building, Finding, Queries, Sweeping
from . import grid
from .snapshot import DEFAULT_MAX_AGE_S

ANN_KINDS = registry.ann_kinds()


@dataclass(frozen=True, kw_only=True)
class SweepConfig(Queries, Sweeping, Building, Finding):
    """`pgeval sweep`'s options: the query source, measuring, building and find groups
    (:mod:`evaluator.tuning.options`) and what is swept."""

    target: str
    stage: str
    params: tuple = ()  # ("hnsw.ef_search=10,20,40", ...)
    build: tuple = ()  # ("m=8,16", ...)
    depth: int | None = None  # default max(k, 20)
    name: str | None = None
    isolate_index: bool = False
    index: str | None = None
    find: str | None = None  # --find GUC: the cheapest value reaching target_recall
    find_min: int | None = None  # the least value a find tries (advise: the LIMIT; default 1)
    find_start: int | None = None  # the first value a find tries (default: the server's setting)
    # one group of the target (column, value): searched as the application searches it,
    # ``WHERE column = value`` (tuning/sweep/groups.py runs one such sweep per group)
    group: tuple[str, str] | None = None
    # one shape of the captured set (``--captured``): searched by the application's statement
    # as it sent it, each query with its own values (captured/shapes.py runs one per shape)
    shape: int | None = None
    # the plan measured (stages/planner_plan.py): "custom" (each execution planned with its
    # values) or "generic" (the prepared statement's); the planner's own, whatever serves it.
    # None: a group's sweep measures the custom plan, a whole table's requires the index
    plan: str | None = None
    # after a --find on sampled rows through the table's index: rows of each copy on which the
    # sampled rows' bias is measured, in the index and held out (tuning/sweep/held_out.py); None:
    # every row of the table (`pgeval sweep` and the API's sweep); 0 skips (watch and advise)
    held_out_rows: int | None = 0
    # how every recall is measured against the rows its statements saw (tuning/sweep/consistency.py):
    # "snapshot" (one exported snapshot, held at most snapshot_max_age_s seconds, then
    # detection) or "detect" (each point between two reads of the rows' versions)
    consistency: str = "snapshot"
    snapshot_max_age_s: float = DEFAULT_MAX_AGE_S


@dataclass(frozen=True)
class Plan:
    """A sweep's configuration checked: the depth fetched, the stage class, the axes of
    ``--param`` and ``--build``, and the grid's points (none for a find: its values are tried
    one by one)."""

    depth: int
    stage: Any  # the stage class (kinds.registry.get)
    param_axes: list[tuple[str, list[str]]]
    build_axes: list[tuple[str, list[str]]]
    points: list[grid.Point]

    @property
    def one_point(self) -> bool:
        """One point, no build: what a probe measures again (remeasure, steady)."""
        return not self.build_axes and len(self.points) == 1


def _check(cfg: SweepConfig) -> int:
    if cfg.stage not in ANN_KINDS:
        raise InputError(
            f"sweeps measure an ANN stage against exact search: {param('stage')} must be one "
            f"of {', '.join(ANN_KINDS)}, not '{cfg.stage}'",
            field=param("stage"),
        )
    for opt, value, low in (
        (param("k"), cfg.k, 1),
        (param("repeat"), cfg.repeat, 1),
        (param("concurrency"), cfg.concurrency, 1),
    ):
        if value < low:
            raise InputError(f"{opt} must be >= {low}, got {value}", field=opt)
    if cfg.concurrency > 1 and cfg.isolate_index:
        raise InputError(
            f"{param('concurrency')} cannot be combined with {param('isolate_index', True)} (each client's "
            "DROP INDEX would lock the table against the others); keep each index "
            "on its own copy of the table",
            field=param("concurrency"),
        )
    check_target_recall(cfg)
    from ...stages.planner_plan import MODES

    if cfg.plan is not None and cfg.plan not in MODES:
        raise InputError(
            f"{param('plan')} must be one of {', '.join(MODES)}, not '{cfg.plan}'",
            field=param("plan"),
        )
    # the planner's own plan is the application's LIMIT K's (a deeper LIMIT can change it)
    depth = cfg.depth or (cfg.k if plan_mode(cfg) else max(cfg.k, 20))
    if depth < cfg.k:
        raise InputError(
            f"{param('depth')} {depth} is below {param('k')} {cfg.k}", field=param("depth")
        )
    return depth


def check_target_recall(cfg: Finding) -> None:
    if not 0 < cfg.target_recall <= 1:
        raise InputError(
            f"{param('target_recall')} must be in (0, 1], got {cfg.target_recall}",
            field=param("target_recall"),
        )


def plan_mode(cfg: SweepConfig) -> str | None:
    """The planner's plan mode the sweep measures (None: the stage's index required)."""
    return cfg.plan or ("custom" if cfg.group is not None or cfg.shape is not None else None)


def find_max(cfg: Finding) -> int:
    from .find import DEFAULT_MAX

    return int(cfg.find_max or DEFAULT_MAX)


def _check_find(
    cfg: SweepConfig,
    param_axes: list[tuple[str, list[str]]],
    build_axes: list[tuple[str, list[str]]],
) -> None:
    if cfg.find is None:
        if cfg.find_max is not None:
            raise InputError(
                f"{param('find_max')} needs {param('find')} GUC", field=param("find_max")
            )
        return
    described = registry.kind(cfg.stage)
    work = described.work_settings if described is not None else ()
    if cfg.find not in work:
        raise InputError(
            f"{param('find')} takes a work setting of the {cfg.stage} stage ({', '.join(work)}), "
            f"not '{cfg.find}'",
            field=param("find"),
        )
    if any(name == cfg.find for name, _ in param_axes):
        raise InputError(
            f"'{cfg.find}' is both found ({param('find')}) and swept ({param('params')})",
            field=param("find"),
        )
    if cfg.find in cfg.settings:
        raise InputError(
            f"'{cfg.find}' is both found ({param('find')}) and fixed ({param('settings')})",
            field=param("find"),
        )
    if find_max(cfg) < 1:
        raise InputError(f"{param('find_max')} must be 1 or more", field=param("find_max"))


def plan(cfg: SweepConfig) -> Plan:
    """The sweep's depth, stage, axes and grid points, checked before any connection."""
    depth = _check(cfg)
    stage = registry.get(cfg.stage)
    param_axes = grid.parse_axes(cfg.params, "hnsw.ef_search=10,20,40", param("params"))
    build_axes = grid.parse_axes(cfg.build, "m=8,16", param("build"))
    _check_find(cfg, param_axes, build_axes)
    if not param_axes and not build_axes and not cfg.find:
        raise InputError(
            f"nothing to sweep: give {param('params')} GUC=v1,v2,... and/or {param('build')} "
            "OPTION=v1,v2,...",
            field=param("params"),
        )
    gucs.check_stages(cfg.settings, ["exact", cfg.stage])  # STAGE:GUC=VALUE
    grid.check_params(
        param_axes, cfg.stage, stage.guc_prefixes, gucs.scope(cfg.settings, cfg.stage)
    )
    grid.check_build(build_axes, stage.method)
    points = [] if cfg.find else grid.points(param_axes, build_axes)
    return Plan(depth, stage, param_axes, build_axes, points)
