"""One probe (`pgeval watch`): the target's ANN stage at its production setting, measured against
exact search on a small, stable set of queries, recorded as one row of pgeval.probe.

A probe is a one-point sweep (:mod:`evaluator.tuning.sweep.session`, one repetition, the work
setting at its production value): the same stage runner, plan check, timing and SQL measures as
every sweep point, and the stored exact ground truth, reused while the data is unchanged and
computed again (saying why) when it changed. The sweep is kept under one name per series
(``watch-<target>-<stage>-<hash>``) and replaced by the next probe; the history is pgeval.probe.

The production setting: ``--set`` (``hnsw.ef_search=100``), else the target's stored settings,
else the server's current value of the stage's first work setting (registry ``work_settings``).
Sampled queries (``--sample-queries N``, default 100) are drawn in the order of
``hashtextextended(chunk id, seed)``: the same rows while they exist, so the sample follows the
table as rows are added and removed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...core.canonical import sha256_hex
from ...core.errors import Conflict, InputError, param
from ...core.held_lock import HeldLock
from ...core.warnings_once import once
from ...kinds import registry
from ...stages import gucs
from ..options import Measuring, Queries, taken
from ..sweep.session import Known
from .config import WatchConfig

if TYPE_CHECKING:
    from ...core.db import Database
    from ...measure.operating_points import Measured
    from ..sweep import SweepConfig, SweepResult

# what every probe's sweep takes as known (its data and query set are added where measured): the
# ground truth refreshed incrementally, no recommendation (a probe reads none)
PROBE_KNOWN = Known(incremental_ground_truth=True, recommend=False)

DEFAULT_SAMPLE = 100
WATCH_LOCK = 1885824376  # advisory lock class of a probe series (next to install's INIT_LOCK)


@dataclass
class ProbeResult:
    probe: dict  # the probe's row of pgeval.probe_history (plus "since": bound -> time)
    setting: str  # the work setting measured (hnsw.ef_search)
    value: str  # its production value
    ground_truth: dict | None
    queries: dict | None  # the query source (no judgements), else None
    testset: str | None
    wall_ms: float
    warnings: list[str] = field(default_factory=list)
    remedy: dict | None = None  # advice.remedy's answer, when measured
    reindex: str | None = None  # the rebuild statement, when a bound was crossed or recall drifted
    rebuild: dict | None = None  # the last build sweep of the index's design (its build time)
    alerts: list[str] = field(default_factory=list)  # one line per bound crossed
    changes: str | None = None  # the table's changes since the build's first probe
    advice: list[str] = field(default_factory=list)
    # how the data version was read: {"via": "change log" | "row versions" | "checksum",
    # "scans": passes over the table, "ms"}; None where the sweep read it (queries not sampled)
    data_read: dict | None = None
    # how it was measured: "steady" (the series' sweep kept under an unchanged configuration
    # epoch), "point" (the series' sweep kept, its point measured again with fresh
    # fingerprints) or "sweep" (a one-point sweep in full): tuning/sweep/remeasure.py
    path: str = "sweep"
    # the planner's own plan measured (a group's probe: stages/planner_plan.py): {"mode":
    # "custom", "served_by": "index kb_hnsw (hnsw)" | "exact via kb_tenant", "ann": bool}; None
    # when the stage's index was required (the whole table)
    plan: dict | None = None
    # a captured set's probe of one shape: the shape's share of the searches sent
    share: float | None = None

    @property
    def crossed(self) -> list[str]:
        return list(self.probe.get("crossed") or [])


def check(cfg: WatchConfig) -> None:
    if cfg.stage not in registry.ann_kinds():
        raise InputError(
            f"a probe measures an ANN stage against exact search: {param('stage')} must be one of "
            f"{', '.join(registry.ann_kinds())}, not '{cfg.stage}'",
            field=param("stage"),
        )
    for opt in ("min_recall", "max_drop"):
        value = getattr(cfg, opt)
        if value is not None and not 0 <= value <= 1:
            raise InputError(f"{param(opt)} must be in [0, 1], got {value}", field=param(opt))
    if cfg.max_p95_ms is not None and not cfg.max_p95_ms > 0:
        raise InputError(
            f"{param('max_p95_ms')} must be above 0, got {cfg.max_p95_ms}",
            field=param("max_p95_ms"),
        )


def bounds(cfg: WatchConfig) -> dict:
    given = {"min_recall": cfg.min_recall, "max_drop": cfg.max_drop, "max_p95_ms": cfg.max_p95_ms}
    return {name: v for name, v in given.items() if v is not None}


def production_setting(kb: Any, target: Any, cfg: WatchConfig) -> tuple[str, str, dict]:
    """(work setting, its production value, the other settings for every point)."""
    from ...table.fingerprint import load_extension_libraries

    described = registry.kind(cfg.stage)
    work = described.work_settings if described is not None else ()
    if not work:
        raise InputError(f"stage {cfg.stage} has no work setting to probe", field=param("stage"))
    merged = gucs.scope({**target.settings, **cfg.settings}, cfg.stage)
    # the first work setting given (--set, the target's); else the first the server has (a
    # setting of pgeval's own, hnsw-bq's bq.candidates, then keeps the stage's default)
    name = next((n for n in work if n in merged), None)
    value = None if name is None else merged[name]
    if name is None:
        load_extension_libraries(kb)
        server = [n for n in work if n not in gucs.OWN]
        current = gucs.current(kb, server) if server else {}
        kb.rollback()
        name = next(
            (n for n in server if current.get(n) is not None), server[0] if server else None
        )
        value = None if name is None else current.get(name)
    if name is None or value is None:
        raise InputError(
            f"the server has no setting {' or '.join(work)} (is the {cfg.stage} stage's "
            "extension installed?)",
            field=param("stage"),
        )
    rest = {k: v for k, v in cfg.settings.items() if k.rpartition(":")[2] != name}
    return name, str(value), rest


def table_stats(kb: Any, target: Any) -> dict:
    """The server's row counters of the target's table (pg_stat_all_tables), for the changes
    since a build's first probe; empty when the statistics are not readable."""
    from ...table.fingerprint import resolve_table

    oid = resolve_table(kb, target)
    row = kb.execute(
        "SELECT n_tup_ins, n_tup_upd, n_tup_del, n_live_tup, n_dead_tup, "
        "last_vacuum::text, last_autovacuum::text FROM pg_stat_all_tables WHERE relid = %s",
        (oid,),
    ).fetchone()
    kb.rollback()
    if row is None:
        return {}
    keys = ("n_tup_ins", "n_tup_upd", "n_tup_del", "n_live_tup", "n_dead_tup")
    out: dict = {k: int(v) for k, v in zip(keys, row[:5]) if v is not None}
    out["last_vacuum"] = max((v for v in row[5:] if v), default=None)
    return out


def sweep_name(cfg: WatchConfig, settings: dict) -> str:
    """One sweep name per series: the next probe of the series replaces it."""
    q = cfg.queries
    source = (
        {"kind": q.kind, "count": q.count, "seed": q.seed, "sql": q.statement, "file": q.path}
        if q is not None
        else {"testset": cfg.testset or None}  # (none given: None, as series were first named)
    )
    identity = {"k": cfg.k, "settings": settings, "queries": source, "index": cfg.index}
    if cfg.group is not None:
        identity["group"] = list(cfg.group)
    if cfg.shape is not None:
        identity["shape"] = cfg.shape
    key = sha256_hex(identity, ascii=True)[:10]
    return f"watch-{cfg.target}-{cfg.stage}-{key}"


def key_of(cfg: WatchConfig) -> dict | None:
    """The probe's series within the watch: its group ``{column: value}``, or its captured
    shape ``{"shape": "2"}``, else None."""
    if cfg.group is not None:
        return {cfg.group[0]: cfg.group[1]}
    return None if cfg.shape is None else {"shape": str(cfg.shape)}


def query_source(cfg: Queries) -> dict:
    q = cfg.queries
    if q is None:
        return {"testset": cfg.testset or None}
    out: dict[str, object] = {"kind": q.kind}
    if q.kind == "sample":
        out.update(count=q.count, seed=q.seed)
    elif q.kind == "sql":
        out["sql"] = q.statement
    elif q.kind == "captured":
        out.update(captured=q.captured, window=q.window)
        if q.shape is not None:
            out["shape"] = q.shape
    else:
        out["file"] = q.path
    return out


def run_probe(
    database: Database, cfg: WatchConfig, *, on_warning: Callable[..., Any] | None = None
) -> ProbeResult:
    """Measure, record (pgeval.probe) and, when a recall bound is crossed, measure the remedy;
    one probe of a series at a time (an advisory lock: the next probe replaces its runs). Its
    steps share a few connections (:mod:`.connections`)."""
    from .connections import Lending

    if isinstance(database, Lending):
        return _probe(database, cfg, on_warning)
    with Lending.of(database) as lending:
        return _probe(lending, cfg, on_warning)


def _probe(
    database: Database, cfg: WatchConfig, on_warning: Callable[..., Any] | None
) -> ProbeResult:
    from ...targets import targets
    from ..sweep import SweepConfig
    from .connections import KNOWLEDGE_BASE, RESULTS, Lending

    check(cfg)
    t0 = time.perf_counter()
    if isinstance(database, Lending):  # two results connections (one holds the lock), one KB
        database.open_ahead({RESULTS: 2, KNOWLEDGE_BASE: 1})
    with database.connect() as results, database.connect(results=False, read_only=True) as kb:
        target = targets.load(results, cfg.target)
        results.rollback()
        name, value, rest = production_setting(kb, target, cfg)
        stats = table_stats(kb, target)
    measured = {**gucs.scope({**target.settings, **rest}, cfg.stage), name: value}
    series = sweep_name(cfg, measured)
    sweep_cfg = replace(
        taken(SweepConfig(target=cfg.target, stage=cfg.stage), cfg, Queries, Measuring),
        params=(f"{name}={value}",),
        settings=rest,
        depth=cfg.k,  # the application's LIMIT k: a probe fetches no more
        repeat=1,
        target_recall=cfg.min_recall if cfg.min_recall else 0.95,
        name=series,
        fresh=True,  # a new measurement every time: the previous probe's runs are replaced
        index=cfg.index,
        group=cfg.group,
        shape=cfg.shape,
    )
    # the lock is held in the transaction of a results connection of its own (the probe's
    # steps borrow others): released, it is lent again
    with database.connect() as conn:
        key = (WATCH_LOCK, int(sha256_hex(series)[:8], 16) - 2**31)
        lock = HeldLock(conn, key, in_conn=True)
        if not lock.acquire(wait=False):
            raise Conflict(
                f"another probe of this series is running (sweep '{series}'): probes of one "
                "series do not overlap (cron: a longer interval; a CronJob: concurrencyPolicy "
                "Forbid)"
            )
        try:
            return _measure(
                database, cfg, sweep_cfg, name, value, measured, stats, t0, on_warning, target
            )
        finally:
            lock.release()


def _plan(point: Measured | None) -> dict | None:
    """The planner's plan the probe's point measured (its runs' ``params.plan``, as the sweep's
    summary reads it), else None."""
    if point is None or point.plan_mode is None:
        return None
    return {"mode": point.plan_mode, "served_by": point.served_by, "ann": point.index is not None}


def _epoch(database: Database, cfg: WatchConfig, target: Any, measured: dict) -> str | None:
    """The configuration epoch (:mod:`.epoch`) of a sampled probe's table, read before anything
    else the probe measures; None when there is none (untracked, a group, given queries)."""
    import psycopg

    from . import epoch

    if cfg.queries is None or cfg.queries.kind != "sample" or cfg.group is not None:
        return None
    with database.connect(results=False, read_only=True) as kb:
        try:
            return epoch.read(kb, target, measured)
        except psycopg.Error:
            return None
        finally:
            kb.rollback()


def _unchanged(
    database: Database, cfg: WatchConfig, sweep_cfg: SweepConfig, target: Any
) -> tuple[Known, dict | None]:
    """What the probe's sweep takes as known: the data measured once, and the series' last
    query set when sampling would draw it again (:mod:`.unchanged`), the ground truth refreshed
    incrementally, no recommendation; and how the data version was read."""
    from . import unchanged

    if cfg.queries is None or cfg.queries.kind != "sample":
        # nothing to reuse: the sweep measures the data after its checks, as for a sweep (a
        # refused probe writes nothing, not even a cached checksum)
        return PROBE_KNOWN, None
    scoped = target if cfg.group is None else target.scoped(*cfg.group)
    t0 = time.perf_counter()
    data = unchanged.data(database, scoped)
    read = {
        "via": unchanged.read_via(data),
        "scans": data.scans,
        "ms": (time.perf_counter() - t0) * 1000.0,
    }
    again = unchanged.query_set(
        database,
        series=sweep_cfg.name or "",
        source=query_source(cfg),
        target=scoped,
        measured=data,
    )
    return replace(PROBE_KNOWN, data=data, query_set=again), read


def _measured(
    database: Database,
    cfg: WatchConfig,
    sweep_cfg: SweepConfig,
    target: Any,
    digest: str | None,
    warn: Callable[..., Any],
) -> tuple[SweepResult, str, Known, dict | None]:
    """(the probe's sweep, how it was measured, what it took as known, how the data version was
    read): its kept sweep reopened under an unchanged configuration epoch (steady), else with its
    data measured (point: tuning/sweep/remeasure.py), else the one-point sweep in full (sweep)."""
    from ..sweep.session import Callbacks, Session

    with Session.reopen(
        database, sweep_cfg, replace(PROBE_KNOWN, epoch=digest), on_warning=warn
    ) as kept:
        if kept is not None:
            return kept.measure_again(), "steady", PROBE_KNOWN, None
    known, read = _unchanged(database, cfg, sweep_cfg, target)
    with Session.reopen(database, sweep_cfg, known, on_warning=warn) as kept:
        if kept is not None:
            return kept.measure_again(), "point", known, read
    res = Session.run(database, sweep_cfg, known=known, callbacks=Callbacks(on_warning=warn))
    return res, "sweep", known, read


def _measure(
    database: Database,
    cfg: WatchConfig,
    sweep_cfg: SweepConfig,
    name: str,
    value: Any,
    measured: Any,
    stats: Any,
    t0: Any,
    on_warning: Callable[..., Any] | None,
    target: Any,
) -> ProbeResult:
    """The probe's sweep, its row, and the advice (under the series' lock)."""
    from . import advice, epoch, record

    warnings: list[str] = []

    warn = once(warnings, on_warning)

    e0 = time.perf_counter()
    digest = _epoch(database, cfg, target, measured)
    epoch_ms = (time.perf_counter() - e0) * 1000.0
    res, path, known, read = _measured(database, cfg, sweep_cfg, target, digest, warn)
    if path == "steady":
        read = {"via": "change log", "scans": 0, "ms": epoch_ms}
    # (the epoch read before the data and the fingerprints: a change since makes the next
    # probe's epoch another one)
    epoch.remember(database, res.sweep_id, digest)
    wall_ms = (time.perf_counter() - t0) * 1000.0
    if res.ground_truth is not None:  # reused | incremental | full, said the same everywhere
        status = res.ground_truth["status"]
        res.ground_truth["refresh"] = "full" if status == "computed" else status
    with database.connect() as results:
        probe = record.insert(
            results,
            sweep_id=res.sweep_id,
            target=cfg.target,
            group_key=key_of(cfg),
            stage=cfg.stage,
            k=cfg.k,
            settings=measured,
            query_source=query_source(cfg),
            testset=res.testset,
            table_stats=stats,
            ground_truth=res.ground_truth,
            bounds=bounds(cfg),
            wall_ms=wall_ms,
            sweep=res.name,
        )
        # (after the row: an interrupted probe keeps them, and the next probe deletes them; a
        # steady probe repeats the query set of a probe that did)
        if path != "steady":
            record.forget_old_queries(
                results, series=res.name, target=cfg.target, current=res.testset
            )
    out = ProbeResult(
        probe=probe,
        setting=name,
        value=value,
        ground_truth=res.ground_truth,
        queries=res.queries,
        testset=res.testset,
        wall_ms=wall_ms,
        warnings=warnings,
        path=path,
        data_read=read,
        plan=_plan(res.operating_points.point(1)),
    )
    out.alerts = advice.crossed_lines(probe)
    out.changes = advice.changes(probe)
    if out.crossed or advice.drifted(probe):
        out.reindex = advice.reindex_statement(database, probe)
        out.rebuild = advice.last_build(database, probe)
    goal = advice.recall_goal(probe)
    if cfg.remedy and goal is not None:
        out.remedy = advice.remedy(
            database, cfg, sweep_cfg, out, goal, known=known, on_warning=warn
        )
        with database.connect() as results:
            record.set_advice(results, probe["probe_id"], out.remedy)
        out.probe["advice"] = out.remedy
    out.advice = advice.advice_lines(probe, out.reindex, out.remedy, out.rebuild)
    return out
