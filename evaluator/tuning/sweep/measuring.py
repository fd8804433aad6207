"""The measuring session's state and steps (:class:`Measuring`, which :class:`.session.Session`
is): points numbered, fingerprinted, measured where pending (kept, reused or run), their values
filled by SQL, the exact runs materialised from the stored ground truth; what a caller knows
already (:class:`Known`), what a sweep says while it runs (:class:`Callbacks`) and the one place
a sweep's status is set (:func:`finishing`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...core.canonical import canonical_json
from ...core.warnings_once import once
from ...kinds import registry
from ...measure import operating_points as stored
from ...measure.operating_points import Measured
from ...stages import gucs
from .. import spent
from . import grid, store
from . import setup as setup_mod
from .config import Plan, SweepConfig
from .context import point_context
from .result import SweepResult

if TYPE_CHECKING:
    from ...core.db import Database
    from .consistency import Consistency


@dataclass(frozen=True)
class Known:
    """What the caller measured already (a probe, tuning/watch/probe.py), taken instead of measured
    again: ``query_set`` the query set of ``cfg.queries`` already stored (its name, its source's
    record); ``data`` the data's fingerprint part (``table.data_checksum.measure`` on the target,
    scoped to the group); ``incremental_ground_truth`` the stored ground truth brought up to date
    when the data changed little (ground_truth/refresh.py) instead of computed again in
    full; ``recommend`` False when the caller reads no recommendation (not computed: None);
    ``held_out`` True when the target is a copy without the sampled query rows (advise's): no
    query has its own row there to drop, the ANN search fetches the application's LIMIT;
    ``epoch`` the configuration epoch read by the caller (tuning/watch/epoch.py): a kept sweep
    measured under it is reopened without capturing anything again (:mod:`.remeasure`)."""

    query_set: tuple[str, dict] | None = None
    data: Any = None
    incremental_ground_truth: bool = False
    recommend: bool = True
    held_out: bool = False
    epoch: str | None = None


NOTHING_KNOWN = Known()


@dataclass
class Callbacks:
    """What a sweep says while it runs (each optional): ``on_warning(message)``;
    ``on_point(point, repetition, how)`` after each point and repetition (how: measured | reused
    | kept); ``on_ground_truth(rows, total)`` while the exact ground truth is computed;
    ``on_find(point, recall)`` after each value a find tried; ``on_start(points, repetitions,
    queries)`` once the grid and the queries are known."""

    on_warning: Callable[..., Any] | None = None
    on_point: Callable[..., Any] | None = None
    on_ground_truth: Callable[..., Any] | None = None
    on_find: Callable[..., Any] | None = None
    on_start: Callable[..., Any] | None = None


@contextmanager
def finishing(results: Any, sweep_id: int, experiment_id: int, fill: Callable[[], None]) -> Any:
    """The sweep complete when the block ends, else interrupted (Ctrl-C) or failed, its values
    filled (``fill``) as far as they were measured: the one place a sweep's status is set."""
    try:
        yield
    except BaseException as exc:
        _safely(results, fill)
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        store.finish(results, sweep_id, experiment_id, status)
        raise
    store.finish(results, sweep_id, experiment_id, "complete")


def _safely(results: Any, fill: Callable[[], None]) -> None:
    try:
        if results.info.transaction_status != 0:
            results.rollback()
        fill()
    except Exception:  # noqa: BLE001 - the sweep's own error is the one to raise
        pass


@dataclass
class Measuring:
    """One sweep being measured (the state and steps of :class:`.session.Session`): its
    connections, set-up, row and result, and what it measured so far (``have``: the
    configuration hash of every (point, repetition) stored)."""

    database: Database
    cfg: SweepConfig
    plan: Plan
    kb: Any
    results: Any
    setup: setup_mod.Setup
    row: store.SweepRow
    result: SweepResult
    base_fp: dict
    data: dict  # the data's fingerprint part
    own: bool  # sampled queries: each query's own chunk dropped from its lists
    fingerprint: Callable[..., dict] | None = None  # None: the points' are given (reopen)
    fps: dict[int, dict] = field(default_factory=dict)
    hashes: dict[int, str] = field(default_factory=dict)
    have: dict = field(default_factory=dict)
    gt: Any = None  # ground_truth.store.GroundTruth, once read
    known: Known = NOTHING_KNOWN
    callbacks: Callbacks = field(default_factory=Callbacks)
    prepared: set = field(default_factory=set)
    numbers: dict[str, int] | None = None  # a find's point numbers by build and settings
    consistency: Consistency | None = None  # None: unchecked (a reopened sweep: .remeasure)
    trusted: dict | None = None  # ctx.extra[TRUSTED_PLAN]: the plan checked under the epoch
    again: int | None = None  # a reopened sweep's point run, replaced by measure_again

    # -- what the sweep says

    def warn(self, message: str) -> None:
        once(self.result.warnings, self.callbacks.on_warning)(message)

    def notify(self, p: grid.Point, rep: int, how: str) -> None:
        if self.callbacks.on_point:
            self.callbacks.on_point(p, rep, how)

    @property
    def target(self) -> Any:
        return self.setup.target

    @property
    def stage(self) -> Any:
        return self.plan.stage

    # -- points

    def point(self, settings: dict, build: dict) -> grid.Point:
        """The point of ``settings`` under ``build`` (a find's value): numbered as the sweep
        numbered it before (a value keeps its number), else the next number; fingerprinted."""
        from ...table.fingerprint import config_hash

        p = grid.Point(self.number(settings, build), settings, build)
        assert self.fingerprint is not None  # (a find's session is opened, not reopened)
        fp = setup_mod.point_fingerprint(
            self.fingerprint, self.setup, self.cfg, p, bool(self.plan.build_axes)
        )
        self.fps[p.number], self.hashes[p.number] = fp, config_hash(fp)
        return p

    def number(self, settings: dict, build: dict) -> int:
        """The number of the point of ``settings`` under ``build``: the one the sweep gave it
        before, else the next."""
        if self.numbers is None:
            self.numbers = {
                _key(p["build"] or {}, p["settings"] or {}): p["point"]
                for p in stored.summary(self.results, self.row.sweep_id)
            }
        key = _key(build, settings)
        if key not in self.numbers:
            self.numbers[key] = max(self.numbers.values(), default=0) + 1
        return self.numbers[key]

    def measured(self, number: int) -> Measured | None:
        """Point ``number`` as measured, read from SQL (None: not measured)."""
        return stored.point(self.results, self.row.sweep_id, number)

    def pending(
        self, points: list[grid.Point], reps: range | None = None
    ) -> list[tuple[int, grid.Point]]:
        """(repetition, point) pairs still to measure (``reps``: default 1..--repeat); reuses
        and keeps the others. Each round starts one point further along the grid (round r at
        point r, wrapping), so that no point is always measured first in its round: a cost of
        going first (a cold cache after the previous round) would otherwise be one point's,
        every round, and read as that point's latency beyond noise."""
        todo = []
        for rep in reps or range(1, self.cfg.repeat + 1):
            shift = (rep - 1) % max(len(points), 1)
            for p in points[shift:] + points[:shift]:
                if (p.number, rep) in self.have:
                    self._keep(p, rep)
                    continue
                h = self.hashes[p.number]
                src = (
                    None
                    if self.cfg.fresh
                    else store.find_elsewhere(self.results, self.row.sweep_id, h, rep)
                )
                if src is not None:
                    store.copy_point(self.results, self.row.sweep_id, p, rep, src)
                    self.have[(p.number, rep)] = h
                    self.result.reused += 1
                    self.notify(p, rep, "reused")
                    continue
                todo.append((rep, p))
        return todo

    def _keep(self, p: grid.Point, rep: int) -> None:
        """A point already in this sweep (resumed): kept when measured under its hash."""
        if self.have[(p.number, rep)] != self.hashes[p.number]:
            from ...core.errors import Conflict
            from .changed import changed_message

            old = self.results.execute(
                "SELECT r.fingerprint FROM pgeval.sweep_point sp JOIN pgeval.run r "
                "USING (run_id) WHERE sp.sweep_id = %s AND sp.point = %s AND "
                "sp.repetition = %s",
                (self.row.sweep_id, p.number, rep),
            ).fetchone()
            raise Conflict(changed_message(self.row.name, old and old[0], self.fps[p.number]))
        self.result.kept += 1
        self.notify(p, rep, "kept")

    def measure(
        self,
        points: list[grid.Point],
        target: Any = None,
        build_info: Any = None,
        reps: range | None = None,
    ) -> None:
        """``points`` measured where they are still pending (``reps``: default 1..--repeat), on
        ``target`` (default the sweep's; a scratch copy under a build, whose ``build_info``
        each point records)."""
        self.run_pending(target or self.target, self.pending(points, reps), build_info)

    def run_pending(self, target: Any, pending: Any, build_info: Any) -> None:
        """Each (repetition, point) of ``pending`` measured (its repetition's exact run first),
        recorded and filled by SQL."""
        from .consistency import measure_point

        for rep in sorted({r for r, _ in pending}):
            self.ensure_exact(target, rep)
            for _, p in [x for x in pending if x[0] == rep]:
                run_id, qps, detect = measure_point(self, target, p, rep)
                store.insert_point(
                    self.results,
                    self.row.sweep_id,
                    p,
                    rep,
                    self.hashes[p.number],
                    run_id,
                    concurrency=self.cfg.concurrency,
                    qps=qps,
                    build=build_info,
                )
                self.have[(p.number, rep)] = self.hashes[p.number]
                self.result.measured += 1
                self.notify(p, rep, "measured")
                if detect:  # its recall against the exact run of this moment
                    self.fill()
            self.fill()

    def fill(self) -> None:
        """The measured points' values computed by SQL (``store.fill``)."""
        store.fill(self.results, self.row.sweep_id, self.cfg.k, self.setup.measures)

    # -- exact search and ground truth

    def exact_settings(self) -> dict:
        # exact search is a sequential scan by definition: a --set enable_seqscan=off meant for
        # the ANN points (small tables) must not push it onto an index
        scoped = gucs.scope(self.setup.base, "exact")
        return {k: v for k, v in scoped.items() if k != "enable_seqscan"}

    def ground_truth(self, data: dict | None = None) -> Any:
        """The stored exact ground truth of the user's table (computed once, then reused);
        ``data``: the data part it must be current for (default the fingerprint's)."""
        if self.gt is None:
            incremental = self.known.incremental_ground_truth
            with spent.charge("ground_truth"):
                self.gt = self._ensure_ground_truth(incremental, data or self.data)
            self.result.ground_truth = self.gt.as_json()
            if self.target.statement is not None:  # its LIMIT, not --depth, sets the lists
                from ...ground_truth.statement_twin import short_of_k

                said = short_of_k(
                    self.results, self.gt.gt_id, self.cfg.k, self.own, self.cfg.target
                )
                if said:
                    self.warn(said)
        return self.gt

    def _ensure_ground_truth(self, incremental: bool, data: dict) -> Any:
        """The exact ground truth of the sweep's target, stored or computed (charged to an
        open :mod:`..spent` ledger as ``ground_truth``)."""
        from ...ground_truth import refresh
        from ...ground_truth import store as ground_truth

        return ground_truth.ensure(
            self.results,
            self.kb,
            self.target,
            testset_hash=self.setup.ts_hash,
            queries=self.setup.queries,
            depth=self.plan.depth,
            data=data,
            own_chunk_removed=self.own,
            embedder=self.setup.label,
            settings=self.exact_settings(),
            on_progress=self.callbacks.on_ground_truth,
            on_warning=self.warn,
            refresh=refresh.refresh if incremental else None,
        )

    def ensure_exact(self, target: Any, rep: int) -> int:
        """The exact run of repetition ``rep``: materialised from the stored ground truth."""
        from ...ground_truth import store as ground_truth

        name = f"{self.row.name}.exact.{rep}"
        existing = store.complete_run(self.results, self.row.experiment_id, name)
        if existing is not None:
            return existing
        gt = self.ground_truth()
        ctx = self.context(target, "exact", rep, self.exact_settings(), self.base_fp)
        return ground_truth.materialize(ctx, gt, name)

    # -- one point's run

    def context(
        self, target: Any, stage_name: str, rep: int, settings: dict, fp: dict, **extra: Any
    ) -> Any:
        """The stage context of one run of the sweep (``extra``: more of ``ctx.extra``)."""
        from ...table.fingerprint import config_hash

        return point_context(
            self.cfg,
            (self.kb, self.results),
            target,
            stage_name,
            experiment=(self.row.name, self.row.experiment_id),
            testset=(self.cfg.testset, self.setup.tid),
            queries=(self.setup.queries, self.setup.label),
            depth=self.plan.depth,
            rep=rep,
            settings=settings,
            own=self.own,
            extra={"fingerprint": fp, "config_hash": config_hash(fp), **extra},
        )

    def run_point(self, target: Any, p: grid.Point, rep: int) -> tuple[int, float | None]:
        """Point ``p``'s run of repetition ``rep`` on ``target``: (run id, qps under --concurrency)."""
        from ...stages.vector_common import TRUSTED_PLAN

        settings = {**gucs.scope(self.setup.base, self.cfg.stage), **p.settings}
        trusted = {} if self.trusted is None else {TRUSTED_PLAN: self.trusted}
        ctx = self.context(
            target,
            self.cfg.stage,
            rep,
            settings,
            self.fps[p.number],
            **setup_mod.planner(self.cfg, self.cfg.stage),  # the planner's own plan, when asked
            **trusted,
            config_hash=self.hashes[p.number],  # (a reopened sweep's: the hash it was kept under)
        )
        run_name = f"{self.row.name}.{p.label}.{rep}"
        run_id = store.complete_run(self.results, self.row.experiment_id, run_name)
        if run_id is None:
            key = f"{p.label}:{target.table}"
            # configuration checks once per point (run() re-checks the plan every time), none
            # under a trusted plan (.remeasure's steady way)
            if key not in self.prepared and not trusted:
                self.stage.prepare(ctx)
                self.prepared.add(key)
            run_id = self.stage.run(ctx, run_name)
            for w in ctx.warnings:
                self.warn(w)
        qps = None
        if self.cfg.concurrency > 1:
            from .load import throughput

            c = self.consistency
            qps = throughput(
                self.database,
                self.stage,
                replace(ctx, warnings=[]),
                self.cfg.concurrency,
                held=c.snap.conn if c is not None and c.one_snapshot and c.snap else None,
            )
        return run_id, qps

    # -- the end

    def finish(self) -> None:
        """The sweep's points and, unless the caller reads none, its recommendation."""
        if self.consistency is not None:
            self.result.consistency = self.consistency.as_json()
        self.result.points = stored.points(self.results, self.row.sweep_id)
        described = registry.kind(self.cfg.stage)
        self.result.recommendation = (
            store.recommendation(
                self.results,
                self.row.sweep_id,
                self.cfg.target_recall,
                described.work_settings if described is not None else (),
            )
            if self.known.recommend
            else None
        )
        self.results.commit()


def _key(build: dict, settings: dict) -> str:
    return canonical_json([build, settings] if build else settings)
