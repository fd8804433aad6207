"""`pgeval sweep`: run an ANN stage at every point of a grid through the stage framework
(:mod:`evaluator.stages`), against exact search, repeated; record every point under its config
hash so that an interrupted or repeated sweep measures only what is missing.

Layout in the database: the sweep is one experiment named like the sweep; its runs are
``{sweep}.exact.{rep}`` (exact search, once per repetition, needed by pgeval.index_recall) and
``{sweep}.{point label}.{rep}``; `pgeval stage-report SWEEP` therefore shows the points side by
side too. Repetitions are the outer loop, so that drift of the machine touches every point alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from ...core.canonical import canonical_json, sha256_hex
from ...core.errors import InputError, param
from ...core.warnings_once import once
from ...stages import gucs, registry
from . import grid, store

if TYPE_CHECKING:
    from ...core.db import Database

ANN_KINDS = registry.ann_kinds()


@dataclass
class SweepConfig:
    testset: str
    target: str
    stage: str
    params: tuple = ()  # ("hnsw.ef_search=10,20,40", ...)
    build: tuple = ()  # ("m=8,16", ...)
    settings: dict = field(default_factory=dict)  # --set, every point
    k: int = 10
    depth: int | None = None  # default max(k, 20)
    repeat: int = 3
    concurrency: int = 1
    target_recall: float = 0.95
    embedder: str | None = None
    name: str | None = None
    fresh: bool = False
    isolate_index: bool = False
    index: str | None = None
    checksum: bool = True
    statement_timeout: str | None = (
        gucs.DEFAULT_STATEMENT_TIMEOUT
    )  # per statement on the knowledge base (None: server's)
    maintenance_work_mem: str | None = None  # None: sized to the index (build_sweep)
    build_timeout_s: float = 1800
    queries: object = None  # testset.query_source.QuerySource (instead of testset)
    find: str | None = None  # --find GUC: the cheapest value reaching target_recall
    find_max: int | None = None  # --find-max (default find.DEFAULT_MAX)
    find_min: int | None = None  # the least value a find tries (advise: the LIMIT; default 1)
    # one group of the target (column, value): searched as the application searches it,
    # ``WHERE column = value`` (dba/sweep/groups.py runs one such sweep per group)
    group: tuple[str, str] | None = None
    # measured by the caller (a probe, dba/watch/probe.py), else here: the query set of
    # ``queries`` already stored, (its name, its source record), and the data's fingerprint
    # part (dba.data_checksum.measure on the target, scoped to ``group``)
    materialized: tuple[str, dict] | None = None
    data: object = None
    # the stored ground truth brought up to date when the data changed little (a probe's:
    # dba/ground_truth_refresh.py), instead of computed again in full
    incremental_ground_truth: bool = False
    recommend: bool = True  # a probe reads no recommendation: not computed (None)


@dataclass
class SweepResult:
    name: str
    sweep_id: int
    experiment_id: int
    k: int
    target_recall: float
    resumed: bool
    measured: int = 0
    reused: int = 0
    kept: int = 0  # already in this sweep (resume)
    points: list[dict] = field(default_factory=list)
    recommendation: dict | None = None
    warnings: list[str] = field(default_factory=list)
    measures: list[str] = field(default_factory=list)
    config_hash: str | None = None  # of the sweep's base configuration (exact stage)
    filters: dict = field(default_factory=dict)
    testset: str | None = None
    queries: dict | None = None  # the query source (no judgements), else None
    judged: bool = True  # the queries have graded judgements
    ground_truth: dict | None = None  # computed | reused (None: every point was kept)
    # the configuration changed since the sweep of this name was measured: {"sweep": the name
    # its earlier points are kept under, "changes": [{"key", "then", "now"}], "message"}
    previous: dict | None = None
    finds: list[dict] = field(default_factory=list)  # --find: one per combination of the others
    # the server that answered (fingerprint's server part: host, port, in recovery, version)
    server: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """What `pgeval sweep --format json` prints."""
        from ...testset.query_source import SAMPLED_BIAS
        from .text import recommendation_line

        return {
            "sweep": self.name,
            "experiment_id": self.experiment_id,
            "k": self.k,
            "config_hash": self.config_hash,
            "filters": self.filters,
            "target_recall": self.target_recall,
            "resumed": self.resumed,
            "previous": self.previous,
            "find": self.finds[0] if len(self.finds) == 1 else None,
            "finds": self.finds,
            "server": self.server,
            "measured": self.measured,
            "reused": self.reused,
            "kept": self.kept,
            "testset": self.testset,
            "queries": self.queries,
            "notes": [SAMPLED_BIAS] if (self.queries or {}).get("source") == "sample" else [],
            "judgements": self.judged,
            "ground_truth": self.ground_truth,
            "recommendation": self.recommendation,
            "recommendation_line": recommendation_line(self),
            "points": self.points,
            "warnings": self.warnings,
        }


class _Env:
    """Everything one sweep needs while it runs."""

    # (set from the keywords)
    cfg: SweepConfig
    database: Database
    kb: Any
    results: Any
    stage: Any  # the stage class (stages.registry.get)
    exact: Any
    tid: int
    depth: int
    base: dict
    queries: list
    label: Any
    row: store.SweepRow
    fps: dict[int, dict]
    hashes: dict[int, str]
    base_fp: dict
    have: dict
    result: SweepResult
    on_warning: Any
    on_point: Any
    on_ground_truth: Any
    on_find: Any
    measures: list[str]
    prepared: set
    data: dict
    ts_hash: str
    own: bool
    gt: Any  # stages.ground_truth.GroundTruth, once read

    def __init__(self, **kw: Any):
        self.__dict__.update(kw)

    def warn(self, message: str) -> None:
        once(self.result.warnings, self.on_warning)(message)


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
    if not 0 < cfg.target_recall <= 1:
        raise InputError(
            f"{param('target_recall')} must be in (0, 1], got {cfg.target_recall}",
            field=param("target_recall"),
        )
    depth = cfg.depth or max(cfg.k, 20)
    if depth < cfg.k:
        raise InputError(
            f"{param('depth')} {depth} is below {param('k')} {cfg.k}", field=param("depth")
        )
    return depth


def default_name(identity: dict) -> str:
    # json's default separators: the spelling earlier default names were made with
    key = sha256_hex(identity, ascii=True, compact=False)[:10]
    return f"sweep-{identity['target']}-{identity['stage']}-{key}"


def run_sweep(
    database: Database,
    cfg: SweepConfig,
    *,
    on_warning: Callable[..., Any] | None = None,
    on_point: Callable[..., Any] | None = None,
    on_start: Callable[..., Any] | None = None,
    on_ground_truth: Callable[..., Any] | None = None,
    on_find: Callable[..., Any] | None = None,
) -> SweepResult:
    """Run (or resume) the sweep; ``on_start(points, repetitions, queries)`` once the grid and
    the queries are known; ``on_point(point, repetition, how)`` after each grid point and
    repetition (how: measured | reused | kept); ``on_ground_truth(rows, total)`` while the exact
    ground truth is computed; ``on_find(point, recall)`` after each value a --find tried."""
    from .. import data_checksum
    from .. import fingerprint as fpmod

    depth, stage, param_axes, build_axes, points = _plan(cfg)
    cfg, qinfo = _query_set(database, cfg)
    # least privilege: the knowledge base is read in READ ONLY sessions (but --isolate-index's
    # drops; build sweeps write only to their scratch schema, on a connection of their own)
    with (
        database.connect() as results,
        database.connect(results=False, read_only=not cfg.isolate_index) as kb,
    ):
        s = _setup(results, kb, cfg, stage, param_axes)
        if on_start:  # a find's points are not known before: its bracket's first guess
            on_start(len(points) or 8 * len(grid.product(param_axes)), cfg.repeat, len(s.queries))
        measured = cast("data_checksum.DataChecksum", cfg.data) or data_checksum.measure(
            kb,
            s.target,
            checksum=cfg.checksum,
            cache=data_checksum.ChecksumCache(results, database),
        )
        kb.rollback()
        identity = _identity(cfg, s.ts_hash, param_axes, build_axes, s.base, depth, s.label)
        name = cfg.name or default_name(identity)
        fingerprint = _fingerprinter(kb, cfg, s, depth, stage, measured)
        # the exact stage's and every point's fingerprint, taken together: what no setting
        # changes (server, extensions, the table's indexes and size) is read once for them
        common = fpmod.settings_free(kb, s.target)
        kb.rollback()  # (each fingerprint's settings are read in a transaction of their own)
        base_fp = fingerprint(gucs.scope(s.base, "exact"), "exact", common=common)
        fps = {
            p.number: fingerprint(
                {**gucs.scope(s.base, cfg.stage), **p.settings},
                cfg.stage,
                p.build if build_axes else None,
                common=common,
            )
            for p in points
        }
        row = _open(results, cfg, s, name, identity, points, depth, qinfo, base_fp)
        result = _result(cfg, s, name, row, qinfo, base_fp, on_warning)
        env = _env(
            cfg,
            database,
            (kb, results, stage),
            s,
            row,
            result,
            depth=depth,
            fps=fps,
            hashes={n: fpmod.config_hash(f) for n, f in fps.items()},
            base_fp=base_fp,
            have=store.measured(results, row.sweep_id),
            data=measured.data,
            own=bool(qinfo and qinfo["own_chunk_removed"]),
            on_warning=on_warning,
            on_point=on_point,
            on_ground_truth=on_ground_truth,
            on_find=on_find,
        )
        _measure(env, s.target, param_axes, build_axes, points, fingerprint)
    return result


def _env(
    cfg: SweepConfig,
    database: Database,
    conns: tuple[Any, Any, Any],
    s: Any,
    row: store.SweepRow,
    result: SweepResult,
    *,
    depth: int,
    fps: dict[int, dict],
    hashes: dict[int, str],
    base_fp: dict,
    have: dict,
    data: dict,
    own: bool,
    on_warning: Any,
    on_point: Any = None,
    on_ground_truth: Any = None,
    on_find: Any = None,
    gt: Any = None,
) -> _Env:
    """The sweep's :class:`_Env`: ``conns`` is (knowledge base, results, the stage class); what
    the setup ``s`` holds is taken from it (a sweep and a probe's point measured again, alike)."""
    kb, results, stage = conns
    return _Env(
        cfg=cfg,
        database=database,
        kb=kb,
        results=results,
        stage=stage,
        exact=registry.get("exact"),
        tid=s.tid,
        depth=depth,
        base=s.base,
        queries=s.queries,
        label=s.label,
        row=row,
        fps=fps,
        hashes=hashes,
        base_fp=base_fp,
        have=have,
        result=result,
        on_warning=on_warning,
        on_point=on_point,
        measures=s.measures,
        prepared=set(),
        data=data,
        ts_hash=s.ts_hash,
        own=own,
        gt=gt,
        on_ground_truth=on_ground_truth,
        on_find=on_find,
    )


def _query_set(database: Database, cfg: SweepConfig) -> tuple[SweepConfig, dict | None]:
    """``cfg`` with its query source stored as a query set (named as its test set), and the
    source's record (None: a test set was given)."""
    if cfg.queries is None:
        return cfg, None
    if cfg.materialized is not None:
        stored = cfg.materialized
        cfg = replace(cfg)
        cfg.testset, qinfo = stored
        return cfg, qinfo
    from ...testset import query_source

    with database.connect() as conn:
        tgt = _target(conn, cfg)
    cfg = replace(cfg)
    cfg.testset, qinfo = query_source.materialize(
        database, cast("query_source.QuerySource", cfg.queries), tgt
    )
    return cfg, qinfo


@dataclass
class _Setup:
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


def _setup(
    results: Any,
    kb: Any,
    cfg: SweepConfig,
    stage: Any,
    param_axes: list[tuple[str, list[str]]],
    *,
    checks: bool = True,
) -> _Setup:
    """``checks=False`` (a probe's lean path, dba/sweep/remeasure.py): the stage's extension
    and the settings are not checked here; the caller uses the result only under a
    fingerprint hashed as when they were (the same server, extensions and settings)."""
    from ...measure import metrics as mmod
    from ...run.pipeline import PipelineConfig, _queries
    from ...stages.server_support import require
    from ...testset.catalog import resolve_testset

    if checks:
        require(kb, cfg.stage)  # before any work: pgvectorscale, pgvector 0.7 for halfvec/bq
    tid, ts_hash = resolve_testset(results, cfg.testset)
    target = _target(results, cfg)
    judged = results.execute(
        "SELECT n_judgements > 0 FROM pgeval.testset WHERE testset_id = %s", (tid,)
    ).fetchone()[0]
    # query vectors only: no qrels metric to compute per point
    measures = mmod.measures_for(sorted({3, 5, 10, cfg.k})) if judged else []
    base = {**target.settings, **cfg.settings}  # preset's, then --set
    if not checks:
        base = gucs.with_statement_timeout(None, base, cfg.statement_timeout, check=False)
    else:
        base = gucs.validate(kb, base)
        base = gucs.with_statement_timeout(kb, base, cfg.statement_timeout)
        for values in grid.product(param_axes):
            try:
                gucs.validate(kb, {**base, **values})
            except InputError as exc:
                raise InputError(exc.detail, field=param("params")) from None
        kb.rollback()
    queries, label, dim = _queries(
        results,
        cfg.testset,
        tid,
        [(cfg.stage, cfg.stage, stage)],
        PipelineConfig(testset=cfg.testset, stages=cfg.stage, embedder=cfg.embedder),
    )
    results.commit()
    return _Setup(tid, ts_hash, target, bool(judged), measures, base, queries, label, dim)


def _fingerprinter(
    kb: Any, cfg: SweepConfig, s: _Setup, depth: int, stage: Any, measured: Any
) -> Any:
    """``fingerprint(settings, stage name, build=None)``: a point's run fingerprint (under a
    build, the scratch copy's index)."""
    from .. import fingerprint as fpmod

    target = s.target
    sweep_extra = {
        "sweep": {
            "k": cfg.k,
            "depth": depth,
            "concurrency": cfg.concurrency,
            "embedder": s.label,
            "index": cfg.index,
            "isolate_index": cfg.isolate_index,
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


def _open(
    results: Any,
    cfg: SweepConfig,
    s: _Setup,
    name: str,
    identity: Any,
    points: list[grid.Point],
    depth: int,
    qinfo: dict | None,
    base_fp: dict,
) -> Any:
    """The sweep's row and experiment (created, resumed, or replaced: store.open_sweep)."""
    from .. import fingerprint as fpmod

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


def _result(
    cfg: SweepConfig,
    s: _Setup,
    name: str,
    row: Any,
    qinfo: dict | None,
    base_fp: dict,
    on_warning: Callable[..., Any] | None,
) -> SweepResult:
    """The sweep's result before its points; a configuration changed since the sweep of this
    name was measured is said (its earlier points kept under another name)."""
    from .. import fingerprint as fpmod

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
    )
    if row.previous is not None:
        result.warnings.append(row.previous["message"])
        if on_warning:
            on_warning(row.previous["message"])
    return result


def _measure(
    env: _Env,
    target: Any,
    param_axes: list[tuple[str, list[str]]],
    build_axes: list[tuple[str, list[str]]],
    points: list[grid.Point],
    fingerprint: Callable[..., dict],
) -> None:
    """Every point (or a find's), its values filled; the sweep finished (interrupted or failed
    on an exception) with its summary and recommendation."""
    cfg, results, row, result = env.cfg, env.results, env.row, env.result
    try:
        if cfg.find:
            _finds(env, target, param_axes, build_axes, fingerprint)
        elif build_axes:
            _build_blocks(env, target, points)
        else:
            _block(env, target, points)
        store.fill(results, row.sweep_id, cfg.k, env.measures)
    except KeyboardInterrupt:
        _safe_fill(env)
        store.finish(results, row.sweep_id, row.experiment_id, "interrupted")
        raise
    except BaseException:
        _safe_fill(env)
        store.finish(results, row.sweep_id, row.experiment_id, "failed")
        raise
    store.finish(results, row.sweep_id, row.experiment_id, "complete")
    result.points = store.summary(results, row.sweep_id)
    described = registry.kind(cfg.stage)
    result.recommendation = (
        store.recommendation(
            results,
            row.sweep_id,
            cfg.target_recall,
            described.work_settings if described is not None else (),
        )
        if cfg.recommend
        else None
    )
    results.commit()


def _plan(cfg: SweepConfig) -> Any:
    """The sweep's depth, stage, axes and grid points, checked before any connection."""
    from ...stages import gucs

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
    return depth, stage, param_axes, build_axes, points


def _identity(
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
                        "max": _find_max(cfg),
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
    return identity


def _target(conn: Any, cfg: SweepConfig) -> Any:
    """The sweep's target: the stored one, scoped to ``cfg.group`` when the sweep is a group's."""
    from ...target import targets

    target = targets.load(conn, cfg.target)
    return target if cfg.group is None else target.scoped(*cfg.group)


def _safe_fill(env: _Env) -> None:
    try:
        if env.results.info.transaction_status != 0:
            env.results.rollback()
        store.fill(env.results, env.row.sweep_id, env.cfg.k, env.measures)
    except Exception:
        pass


def _pending(env: _Env, points: list[grid.Point]) -> list[tuple[int, grid.Point]]:
    """(repetition, point) pairs still to measure; reuses and keeps the others."""
    todo = []
    for rep in range(1, env.cfg.repeat + 1):
        for p in points:
            if (p.number, rep) in env.have:
                if env.have[(p.number, rep)] != env.hashes[p.number]:
                    from ...core.errors import Conflict

                    old = env.results.execute(
                        "SELECT r.fingerprint FROM pgeval.sweep_point sp JOIN pgeval.run r "
                        "USING (run_id) WHERE sp.sweep_id = %s AND sp.point = %s AND "
                        "sp.repetition = %s",
                        (env.row.sweep_id, p.number, rep),
                    ).fetchone()
                    raise Conflict(
                        store.changed_message(env.row.name, old and old[0], env.fps[p.number])
                    )
                env.result.kept += 1
                _notify(env, p, rep, "kept")
                continue
            h = env.hashes[p.number]
            src = (
                None
                if env.cfg.fresh
                else store.find_elsewhere(env.results, env.row.sweep_id, h, rep)
            )
            if src is not None:
                store.copy_point(env.results, env.row.sweep_id, p, rep, src)
                env.have[(p.number, rep)] = h
                env.result.reused += 1
                _notify(env, p, rep, "reused")
                continue
            todo.append((rep, p))
    return todo


def _find_max(cfg: SweepConfig) -> int:
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
    if _find_max(cfg) < 1:
        raise InputError(f"{param('find_max')} must be 1 or more", field=param("find_max"))


def _finds(
    env: _Env,
    target: Any,
    param_axes: list[tuple[str, list[str]]],
    build_axes: list[tuple[str, list[str]]],
    fingerprint: Callable[..., dict],
) -> None:
    """One find per build and combination of the other --param values; each value tried is a
    point. Under --build, on a scratch copy whose index is built when a point of that build
    first needs measuring (a rerun whose points are all stored builds nothing)."""
    from contextlib import ExitStack

    from ...stages import gucs
    from ..fingerprint import config_hash
    from .find import DEFAULT_START, search

    cfg = env.cfg
    assert cfg.find is not None  # (a find's sweep)
    find: str = cfg.find
    current = gucs.current(env.kb, [find])[find]
    env.kb.rollback()
    start = int(current) if current and current.strip().isdigit() else DEFAULT_START
    numbers = _numbers(env)
    with ExitStack() as stack:
        copy: dict = {"stack": stack}  # the scratch copy and the build on it, once needed
        for build in grid.product(build_axes):
            for others in grid.product(param_axes):

                def measure(value: int, others: Any = others, build: Any = build) -> float | None:
                    settings = {**others, cfg.find: str(value)}
                    key = _key(build, settings)
                    if key not in numbers:
                        numbers[key] = max(numbers.values(), default=0) + 1
                    p = grid.Point(numbers[key], settings, build)
                    fp = fingerprint(
                        {**gucs.scope(env.base, cfg.stage), **settings},
                        cfg.stage,
                        build if build_axes else None,
                    )
                    env.fps[p.number], env.hashes[p.number] = fp, config_hash(fp)
                    if build_axes:
                        _on_scratch(env, target, p, copy)
                    else:  # measured and filled, or reused or kept with its values
                        _block(env, target, [p])
                    row = next(
                        (
                            x
                            for x in store.summary(env.results, env.row.sweep_id)
                            if x["point"] == p.number
                        ),
                        None,
                    )
                    recall = None if row is None else row["index_recall"]
                    if env.on_find:
                        env.on_find(p, recall)
                    return recall

                found = search(
                    find,
                    others,
                    measure,
                    cfg.target_recall,
                    start,
                    _find_max(cfg),
                    min(cfg.find_min or 1, _find_max(cfg)),
                )
                env.result.finds.append(
                    {**found.as_dict(), **({"build": build} if build_axes else {})}
                )


def _key(build: dict, settings: dict) -> str:
    return canonical_json([build, settings] if build else settings)


def _numbers(env: _Env) -> dict[str, int]:
    """The point number of every value a find of this sweep tried before (a find under another
    --target-recall tries them in another order: a value keeps its number)."""
    return {
        _key(p["build"] or {}, p["settings"] or {}): p["point"]
        for p in store.summary(env.results, env.row.sweep_id)
    }


def _on_scratch(env: _Env, target: Any, p: grid.Point, copy: dict) -> None:
    """Point ``p`` of a find under a build: measured on the scratch copy, whose index is (re)built
    for ``p.build`` when a point first needs measuring; stored points are kept or reused."""
    pending = _pending(env, [p])
    if not pending:
        return
    if "scratch" not in copy:
        from ..build_sweep import Scratch

        _warn_leftovers(env)
        _ground_truth(env, target)  # before the builds: the user's table, not the scratch copy
        copy["scratch"] = copy["stack"].enter_context(
            Scratch(
                env.database,
                target,
                maintenance_work_mem=env.cfg.maintenance_work_mem,
                build_timeout_s=env.cfg.build_timeout_s,
            )
        )
    scratch = copy["scratch"]
    if copy.get("built") != p.build:
        copy["info"] = scratch.build(
            env.stage.method, p.build, grid.label_of(p.build, {}), env.cfg.stage
        )
        copy["built"] = p.build
        for w in scratch.warnings:
            env.warn(w)
    _run_pending(env, scratch.target, pending, copy["info"])


def _warn_leftovers(env: _Env) -> None:
    from ..build_sweep import leftover_schemas

    stale = leftover_schemas(env.kb)
    env.kb.rollback()
    if stale:
        env.warn(
            f"scratch schemas left by an earlier process: {', '.join(stale)} (drop them "
            "with DROP SCHEMA ... CASCADE when no sweep is running)"
        )


def _notify(env: _Env, p: grid.Point, rep: int, how: Any) -> None:
    if env.on_point:
        env.on_point(p, rep, how)


def _build_blocks(env: _Env, target: Any, points: list[grid.Point]) -> None:
    from ..build_sweep import Scratch

    groups: dict[str, list] = {}
    for p in points:
        groups.setdefault(canonical_json(p.build), []).append(p)
    todo = {key: _pending(env, pts) for key, pts in groups.items()}
    if not any(todo.values()):
        return
    _warn_leftovers(env)
    _ground_truth(env, target)  # before the builds: the user's table, not the scratch copy
    with Scratch(
        env.database,
        target,
        maintenance_work_mem=env.cfg.maintenance_work_mem,
        build_timeout_s=env.cfg.build_timeout_s,
    ) as scratch:
        for key, pending in todo.items():
            if not pending:
                continue
            options = json.loads(key)
            info = scratch.build(
                env.stage.method, options, grid.label_of(options, {}), env.cfg.stage
            )
            for w in scratch.warnings:
                env.warn(w)
            _run_pending(env, scratch.target, pending, info)


def _block(env: _Env, target: Any, points: list[grid.Point]) -> None:
    _run_pending(env, target, _pending(env, points), None)


def _run_pending(env: _Env, target: Any, pending: Any, build_info: Any) -> None:
    for rep in sorted({r for r, _ in pending}):
        _ensure_exact(env, target, rep)
        for _, p in [x for x in pending if x[0] == rep]:
            run_id, qps = _run_point(env, target, p, rep)
            store.insert_point(
                env.results,
                env.row.sweep_id,
                p,
                rep,
                env.hashes[p.number],
                run_id,
                concurrency=env.cfg.concurrency,
                qps=qps,
                build=build_info,
            )
            env.have[(p.number, rep)] = env.hashes[p.number]
            env.result.measured += 1
            _notify(env, p, rep, "measured")
        store.fill(env.results, env.row.sweep_id, env.cfg.k, env.measures)


def _context(env: _Env, target: Any, stage_name: str, rep: int, settings: dict, fp: dict) -> Any:
    from ...stages.base import StageContext
    from ..fingerprint import config_hash

    options = {"index": env.cfg.index} if env.cfg.index and stage_name != "exact" else {}
    own = env.own and stage_name != "exact"  # sampled queries: fetch one more, drop their chunk
    extra: dict = {"fingerprint": fp, "config_hash": config_hash(fp)}
    if own:
        extra["exclude_own"] = True
    if stage_name != "exact":  # recall@K at the application's LIMIT K (K + 1: own chunk dropped)
        extra["app_limit"] = {"k": env.cfg.k, "rows": env.cfg.k + (1 if own else 0)}
    return StageContext(
        kb=env.kb,
        results=env.results,
        target=target,
        testset=env.cfg.testset,
        testset_id=env.tid,
        experiment=env.row.name,
        experiment_id=env.row.experiment_id,
        repetition=rep,
        stage=stage_name,
        depth=env.depth + (1 if own else 0),
        settings=settings,
        options=options,
        queries=env.queries,
        embedder=env.label,
        isolate_index=env.cfg.isolate_index and stage_name != "exact",
        extra=extra,
    )


def _run(env: _Env, stage: Any, ctx: Any, run_name: str, key: str) -> int:
    existing = store.complete_run(env.results, env.row.experiment_id, run_name)
    if existing is not None:
        return existing
    if key not in env.prepared:  # configuration checks once per point (run() re-checks the
        stage.prepare(ctx)  # plan every time)
        env.prepared.add(key)
    run_id = stage.run(ctx, run_name)
    for w in ctx.warnings:
        env.warn(w)
    return run_id


def _exact_settings(env: _Env) -> dict:
    # exact search is a sequential scan by definition: a --set enable_seqscan=off meant for the
    # ANN points (small tables) must not push it onto an index
    return {k: v for k, v in gucs.scope(env.base, "exact").items() if k != "enable_seqscan"}


def _ground_truth(env: _Env, target: Any) -> Any:
    """The stored exact ground truth of the user's table (computed once, then reused)."""
    if env.gt is None:
        from ...stages import ground_truth
        from .. import ground_truth_refresh

        incremental = env.cfg.incremental_ground_truth
        env.gt = ground_truth.ensure(
            env.results,
            env.kb,
            target,
            testset_hash=env.ts_hash,
            queries=env.queries,
            depth=env.depth,
            data=env.data,
            own_chunk_removed=env.own,
            embedder=env.label,
            settings=_exact_settings(env),
            on_progress=env.on_ground_truth,
            on_warning=env.warn,
            refresh=ground_truth_refresh.refresh if incremental else None,
        )
        env.result.ground_truth = env.gt.as_json()
    return env.gt


def _ensure_exact(env: _Env, target: Any, rep: int) -> int:
    """The exact run of repetition ``rep``: materialised from the stored ground truth."""
    from ...stages import ground_truth

    name = f"{env.row.name}.exact.{rep}"
    existing = store.complete_run(env.results, env.row.experiment_id, name)
    if existing is not None:
        return existing
    gt = _ground_truth(env, target)
    ctx = _context(env, target, "exact", rep, _exact_settings(env), env.base_fp)
    return ground_truth.materialize(ctx, gt, name)


def _run_point(env: _Env, target: Any, p: grid.Point, rep: int) -> tuple[int, float | None]:
    settings = {**gucs.scope(env.base, env.cfg.stage), **p.settings}
    ctx = _context(env, target, env.cfg.stage, rep, settings, env.fps[p.number])
    run_id = _run(
        env, env.stage, ctx, f"{env.row.name}.{p.label}.{rep}", f"{p.label}:{target.table}"
    )
    qps = None
    if env.cfg.concurrency > 1:
        from .load import throughput

        qps = throughput(env.database, env.stage, replace(ctx, warnings=[]), env.cfg.concurrency)
    return run_id, qps
