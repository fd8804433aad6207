"""What a sweep reads and writes before its first point: the query set stored, the test set,
target, settings checked and queries (:class:`Setup`), the fingerprinter of its points, its
identity (what names it), its row and experiment, and its result before any point."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from ...core.canonical import sha256_hex
from ...core.errors import InputError, param
from ...core.warnings_once import once
from ...stages import gucs
from . import grid, store
from .config import Plan, SweepConfig, find_max, plan_mode
from .result import SweepResult

if TYPE_CHECKING:
    from ...core.db import Database


def default_name(identity: dict) -> str:
    # json's default separators: the spelling earlier default names were made with
    key = sha256_hex(identity, ascii=True, compact=False)[:10]
    return f"sweep-{identity['target']}-{identity['stage']}-{key}"


@dataclass
class Setup:
    """What the sweep reads before its first point: the test set, the target, the settings
    checked, the queries and their embedder."""

    tid: int
    ts_hash: str
    target: Any
    judged: bool
    measures: list[str]
    base: dict
    queries: list
    label: Any
    dim: Any


def checked_settings(
    results: Any,
    kb: Any,
    cfg: SweepConfig,
    param_axes: list[tuple[str, list[str]]],
    *,
    checks: bool = True,
) -> tuple[Any, dict]:
    """The sweep's target and the settings every point starts from (the preset's, then ``--set``,
    and the statement timeout), checked on the server with the stage's extension, the rights a
    build needs and every value of ``--param``: what needs no query set, so that a refused option
    is refused before one is stored (:class:`.session.Session` calls this first).
    ``checks=False`` (a probe's lean path, tuning/sweep/remeasure.py): nothing is checked; the
    caller uses the result only under a fingerprint hashed as when it was (the same server,
    extensions and settings)."""
    from ...stages.server_support import require

    target = target_of(results, cfg)
    base = {**target.settings, **cfg.settings}  # preset's, then --set
    if not checks:
        return target, gucs.with_statement_timeout(None, base, cfg.statement_timeout, check=False)
    require(kb, cfg.stage)  # before any work: pgvectorscale, pgvector 0.7 for halfvec/bq
    if target.statement is not None and cfg.build:
        raise InputError(
            f"target '{target.name}' is searched by its own statement, which names its table: "
            f"{param('build')} builds on a scratch copy the statement does not search (measure "
            "the index the table has, or sweep builds on a target without the statement)",
            field=param("build"),
        )
    if cfg.build:
        from ...table.copied_rows import require_create

        require_create(kb, f"sweep {param('build')}")
    base = gucs.validate(kb, base)
    base = gucs.with_statement_timeout(kb, base, cfg.statement_timeout)
    for values in grid.product(param_axes):
        try:
            gucs.validate(kb, {**base, **values})
        except InputError as exc:
            raise InputError(exc.detail, field=param("params")) from None
    kb.rollback()
    results.commit()
    return target, base


def setup(
    results: Any,
    kb: Any,
    cfg: SweepConfig,
    stage: Any,
    checked: tuple[Any, dict],
) -> Setup:
    """What the sweep measures: its query set's queries and measures, with ``checked``, the target
    and settings of :func:`checked_settings`."""
    from ...measure import metrics as mmod
    from ...run.pipeline import stage_queries
    from ...testset.catalog import resolve_testset

    target, base = checked
    tid, ts_hash = resolve_testset(results, cfg.testset)
    judged = results.execute(
        "SELECT n_judgements > 0 FROM pgeval.testset WHERE testset_id = %s", (tid,)
    ).fetchone()[0]
    # query vectors only: no qrels metric to compute per point
    measures = mmod.measures_for(sorted({3, 5, 10, cfg.k})) if judged else []
    queries, label, dim = stage_queries(
        results, cfg.testset, tid, [(cfg.stage, cfg.stage, stage)], cfg.embedder
    )
    results.commit()
    return Setup(tid, ts_hash, target, bool(judged), measures, base, queries, label, dim)


def planner(cfg: SweepConfig, stage_name: str) -> dict:
    """``ctx.extra`` of the planner's own plan for an ANN run (stages/planner_plan.py)."""
    from ...stages.planner_plan import PLANNER

    which = plan_mode(cfg)
    return {} if which is None or stage_name == "exact" else {PLANNER: {"mode": which}}


def check_plans(results: Any, kb: Any, cfg: SweepConfig, s: Setup, plan: Plan, own: bool) -> None:
    """The stage's configuration and plan checked on the user's table at every setting of the
    grid (a find's: at each combination of the other values), before any work: no ground
    truth computed, no sweep row opened, no earlier sweep renamed when a point would be refused
    (an index missing, the planner not using it). Under ``--build`` the index is the scratch
    copy's, built later, and checked there."""
    from .context import point_context

    if plan.build_axes:
        return
    for values in [p.settings for p in plan.points] or grid.product(plan.param_axes):
        ctx = point_context(
            cfg,
            (kb, results),
            s.target,
            cfg.stage,
            experiment=(cfg.name or cfg.stage, 0),
            testset=(cfg.testset, s.tid),
            queries=(s.queries, s.label),
            depth=plan.depth,
            rep=1,
            settings={**gucs.scope(s.base, cfg.stage), **values},
            own=own,
            extra=planner(cfg, cfg.stage),
        )
        plan.stage.prepare(ctx)  # (its warnings are said when the point runs)


def query_set(
    database: Database, cfg: SweepConfig, stored: tuple[str, dict] | None = None
) -> tuple[SweepConfig, dict | None]:
    """``cfg`` with its query source stored as a query set (named as its test set), and the
    source's record (None: a test set was given); ``stored``: that query set and record,
    already stored by the caller (a probe's, :class:`.session.Known`)."""
    if cfg.queries is None:
        return cfg, None
    if stored is not None:
        return replace(cfg, testset=stored[0]), stored[1]
    from ...testset import query_source

    with database.connect() as conn:
        tgt = target_of(conn, cfg)
    testset, qinfo = query_source.materialize(
        database, cast("query_source.QuerySource", cfg.queries), tgt
    )
    return replace(cfg, testset=testset), qinfo


def target_of(conn: Any, cfg: SweepConfig) -> Any:
    """The sweep's target: the stored one, scoped to ``cfg.group`` when the sweep is a group's,
    searched by a captured shape's statement when it is a shape's (captured/shapes.py)."""
    from ...targets import targets

    target = targets.load(conn, cfg.target)
    if cfg.shape is not None:
        from ...targets.shapes import shape_target

        return shape_target(conn, target, getattr(cfg.queries, "captured", None), cfg.shape)
    return target if cfg.group is None else target.scoped(*cfg.group)


def identity(
    cfg: SweepConfig,
    ts_hash: str,
    param_axes: list[tuple[str, list[str]]],
    build_axes: list[tuple[str, list[str]]],
    base: Any,
    depth: int,
    label: Any,
) -> dict:
    """What names the sweep: its default name is a hash of this."""
    identity = {
        "testset": cfg.testset,
        "testset_hash": ts_hash,
        "target": cfg.target,
        "stage": cfg.stage,
        "grid": {
            **grid.as_json(param_axes, build_axes),
            **(
                {
                    "find": {
                        "setting": cfg.find,
                        "max": find_max(cfg),
                        **({"min": cfg.find_min} if cfg.find_min else {}),
                    }
                }
                if cfg.find
                else {}
            ),
        },
        "settings": base,
        "k": cfg.k,
        "depth": depth,
        "concurrency": cfg.concurrency,
        "embedder": label,
    }
    if cfg.group is not None:  # (absent otherwise: the names of earlier sweeps stay)
        identity["group"] = {cfg.group[0]: cfg.group[1]}
    # the index: one name per index measured (of several on the column)
    given = {"shape": cfg.shape, "plan": cfg.plan, "index": cfg.index}
    identity.update({k: v for k, v in given.items() if v is not None})
    if cfg.isolate_index:
        identity["isolate_index"] = True
    return identity


def fingerprinter(
    kb: Any, cfg: SweepConfig, s: Setup, depth: int, stage: Any, measured: Any
) -> Any:
    """``fingerprint(settings, stage name, build=None)``: a point's run fingerprint (under a
    build, the scratch copy's index)."""
    from ...table import fingerprint as fpmod

    target = s.target
    sweep_extra = {
        "sweep": {
            "k": cfg.k,
            "depth": depth,
            "concurrency": cfg.concurrency,
            "embedder": s.label,
            "index": cfg.index,
            "isolate_index": cfg.isolate_index,
            # (the planner's plan mode; absent where the index is required: earlier hashes stay)
            **({"plan": plan_mode(cfg)} if plan_mode(cfg) else {}),
        }
    }

    def fingerprint(
        settings: dict, stage_name: str, build: dict | None = None, common: dict | None = None
    ) -> dict:
        extra = dict(sweep_extra)
        if build is not None:
            extra["build"] = build
        fp = fpmod.capture(
            kb,
            target,
            settings=settings,
            embedder=s.label,
            dimension=s.dim,
            testset_hash=s.ts_hash,
            testset_name=cfg.testset,
            stage=stage_name,
            data=measured.data,
            data_note=measured.note,
            extra=extra,
            common=common,
        )
        kb.rollback()
        if build is not None:  # the index is the scratch copy's, not the user's
            from ..build_sweep import opclass

            fp["indexes"] = {
                "scratch": {
                    "method": stage.method,
                    "opclasses": [opclass(target, stage.method, cfg.stage)],
                    "columns": [target.vector_column],
                    "predicate": None,
                    "valid": True,
                    "options": {**fpmod.INDEX_DEFAULTS.get(stage.method, {}), **build},
                }
            }
            fp["target"]["scratch_copy"] = True
        return fp

    return fingerprint


def open_row(
    results: Any,
    cfg: SweepConfig,
    s: Setup,
    name: str,
    identity: Any,
    points: list[grid.Point],
    depth: int,
    qinfo: dict | None,
    base_fp: dict,
) -> Any:
    """The sweep's row and experiment (created, resumed, or replaced: store.open_sweep)."""
    from ...table import fingerprint as fpmod

    exp_config = {
        "stages": ["exact"] + [p.label for p in points],
        "sweep": {**identity, "repeat": cfg.repeat},
        "settings": s.base,
        "depth": depth,
        "repeat": cfg.repeat,
        "embedder": s.label,
        "dimension": s.dim,
        "target": {"name": s.target.name, **s.target.spec()},
        "filters": s.target.filter_literals(),
        "queries": qinfo,
    }
    return store.open_sweep(
        results,
        name=name,
        testset_id=s.tid,
        target=cfg.target,
        stage=cfg.stage,
        grid=identity["grid"],
        settings=s.base,
        k=cfg.k,
        depth=depth,
        repeat=cfg.repeat,
        concurrency=cfg.concurrency,
        target_recall=cfg.target_recall,
        fresh=cfg.fresh,
        experiment_config=exp_config,
        fingerprint=base_fp,
        config_hash=fpmod.config_hash(base_fp),
    )


def new_result(
    cfg: SweepConfig,
    s: Setup,
    name: str,
    row: Any,
    qinfo: dict | None,
    base_fp: dict,
    on_warning: Callable[..., Any] | None,
    own: bool = False,
) -> SweepResult:
    """The sweep's result before its points; a configuration changed since the sweep of this
    name was measured is said (its earlier points kept under another name); ``own``: the
    queries are rows of the index they search (:attr:`SweepResult.sampled`)."""
    from ...table import fingerprint as fpmod

    result = SweepResult(
        name,
        row.sweep_id,
        row.experiment_id,
        cfg.k,
        cfg.target_recall,
        row.resumed,
        measures=s.measures,
        config_hash=fpmod.config_hash(base_fp),
        filters=dict(base_fp.get("filters") or {}),
        testset=cfg.testset,
        queries=qinfo,
        judged=s.judged,
        previous=row.previous,
        server=dict(base_fp.get("server") or {}),
        sampled=own,
    )
    if row.previous is not None:
        once(result.warnings, on_warning)(row.previous["message"])
    return result


def point_fingerprint(
    fingerprint: Callable[..., dict],
    s: Setup,
    cfg: SweepConfig,
    p: grid.Point,
    built: bool,
    common: dict | None = None,
) -> dict:
    """Point ``p``'s run fingerprint: the stage's settings with the point's (under ``built``,
    the scratch copy's index of its build); ``common``: the setting-free part read once."""
    settings = {**gucs.scope(s.base, cfg.stage), **p.settings}
    return fingerprint(settings, cfg.stage, p.build if built else None, common=common)


def fingerprints(
    kb: Any, cfg: SweepConfig, s: Setup, plan: Plan, data: Any
) -> tuple[Callable[..., dict], dict, dict[int, dict]]:
    """(the sweep's fingerprinter, the exact stage's fingerprint, every point's of ``plan`` by
    number), taken together: what no setting changes (server, extensions, the table's indexes
    and size) is read once for them; ``data``: the data measured (``data_checksum.measure``)."""
    from ...table import fingerprint as fpmod

    fingerprint = fingerprinter(kb, cfg, s, plan.depth, plan.stage, data)
    common = fpmod.settings_free(kb, s.target)
    kb.rollback()  # (each fingerprint's settings are read in a transaction of their own)
    base_fp = fingerprint(gucs.scope(s.base, "exact"), "exact", common=common)
    built = bool(plan.build_axes)
    fps = {p.number: point_fingerprint(fingerprint, s, cfg, p, built, common) for p in plan.points}
    return fingerprint, base_fp, fps
