"""The measuring session: the one way pgeval opens, reopens and measures a sweep (`pgeval sweep`,
`--find`, advise's designs, a probe of `pgeval watch` and its remedy); nothing outside this
package imports its storage or set-up modules (tests/test_architecture.py).

- :meth:`Session.open` opens (or resumes) a sweep, finished on exit; the strategies of
  :mod:`.strategies` (a grid, builds on a scratch copy, a find) measure its points through
  :meth:`Session.measure`; :meth:`Session.run` is the whole sweep its configuration names.
- :meth:`Session.reopen` reopens a kept one-point sweep (:mod:`.remeasure`: a probe's lean and
  steady paths), whose point :meth:`Session.measure_again` measures again in place.
- :class:`Known` is what a caller has measured already (:meth:`Session.measure_known`: once for
  several sweeps) and the session takes instead of measuring it again.
- :func:`finishing` marks a sweep complete, interrupted or failed: the one place that does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...measure import operating_points as stored
from . import grid, store, strategies
from . import setup as setup_mod
from .config import SweepConfig
from .measuring import NOTHING_KNOWN, Callbacks, Known, Measuring, finishing
from .remeasure import REOPEN, eligible, reopened
from .result import SweepResult

if TYPE_CHECKING:
    from ...core.db import Database

__all__ = ["NOTHING_KNOWN", "Callbacks", "Known", "Session"]


class Session(Measuring):
    """One sweep being measured (:class:`.measuring.Measuring`), opened, run or reopened."""

    @classmethod
    @contextmanager
    def open(
        cls,
        database: Database,
        cfg: SweepConfig,
        *,
        known: Known = NOTHING_KNOWN,
        callbacks: Callbacks | None = None,
    ) -> Iterator[Session]:
        """The sweep of ``cfg`` opened (created, resumed or replaced) with its grid's points
        fingerprinted; on exit its values filled and the sweep finished: complete (its points and
        recommendation in ``session.result``), interrupted or failed (:func:`finishing`)."""
        from .config import plan as plan_of
        from .consistency import held

        calls = callbacks or Callbacks()
        plan = plan_of(cfg)
        # least privilege: the knowledge base is read in READ ONLY sessions (but --isolate-index's
        # drops; build sweeps write only to their scratch schema, on a connection of their own)
        with (
            database.connect() as results,
            database.connect(results=False, read_only=not cfg.isolate_index) as kb,
        ):
            # refused before anything is stored: a typo in --set or --param stores no query set
            checked = setup_mod.checked_settings(results, kb, cfg, plan.param_axes)
            cfg, qinfo = setup_mod.query_set(database, cfg, known.query_set)
            # one snapshot for the data checksum, the ground truth and every timed statement
            with held(database, kb, cfg) as cons:
                yield from cls._opened(
                    database, cfg, plan, known, calls, qinfo, checked, results, kb, cons
                )

    @classmethod
    def _opened(
        cls,
        database: Database,
        cfg: SweepConfig,
        plan: Any,
        known: Known,
        calls: Callbacks,
        qinfo: dict | None,
        checked: tuple[Any, dict],
        results: Any,
        kb: Any,
        cons: Any,
    ) -> Iterator[Session]:
        """:meth:`open`'s sweep, once its settings are checked and its query set stored."""
        from ...table import data_checksum
        from ...table import fingerprint as fpmod
        from .consistency import data_seen

        s = setup_mod.setup(results, kb, cfg, plan.stage, checked)
        own = bool(qinfo and qinfo["own_chunk_removed"]) and not known.held_out
        setup_mod.check_plans(results, kb, cfg, s, plan, own)  # refused before any work
        if calls.on_start:  # a find's points are not known before: its bracket's first guess
            n = len(plan.points) or 8 * len(grid.product(plan.param_axes))
            calls.on_start(n, cfg.repeat, len(s.queries))
        cache = data_checksum.ChecksumCache(results, database)
        measured = data_seen(kb, s.target, cfg.checksum, known.data, cons, cache)
        kb.rollback()
        ident = setup_mod.identity(
            cfg, s.ts_hash, plan.param_axes, plan.build_axes, s.base, plan.depth, s.label
        )
        name = cfg.name or setup_mod.default_name(ident)
        fingerprint, base_fp, fps = setup_mod.fingerprints(kb, cfg, s, plan, measured)
        row = setup_mod.open_row(
            results, cfg, s, name, ident, plan.points, plan.depth, qinfo, base_fp
        )
        session = cls(
            database=database,
            cfg=cfg,
            plan=plan,
            kb=kb,
            results=results,
            setup=s,
            row=row,
            result=setup_mod.new_result(cfg, s, name, row, qinfo, base_fp, calls.on_warning, own),
            base_fp=base_fp,
            data=measured.data,
            own=own,
            fingerprint=fingerprint,
            fps=fps,
            hashes={n: fpmod.config_hash(f) for n, f in fps.items()},
            have=store.measured(results, row.sweep_id),
            known=known,
            callbacks=calls,
            consistency=cons,
        )
        if cons.reason and cfg.consistency != "detect":
            session.warn(f"consistency: {cons.reason}; each point is checked for changes instead")
        with (
            store.discarded_when_empty(results, row),
            finishing(results, row.sweep_id, row.experiment_id, session.fill),
        ):
            yield session
            session.fill()
        session.finish()

    @classmethod
    def run(
        cls,
        database: Database,
        cfg: SweepConfig,
        *,
        known: Known = NOTHING_KNOWN,
        callbacks: Callbacks | None = None,
    ) -> SweepResult:
        """The sweep of ``cfg`` run (or resumed) whole, by the strategy it names
        (:mod:`.strategies`), and the sampled rows' bias measured held out when asked."""
        with cls.open(database, cfg, known=known, callbacks=callbacks) as session:
            strategies.measure(session)
        res = session.result
        if cfg.held_out_rows != 0:
            from . import held_out

            res.held_out = held_out.check(database, cfg, res, cfg.held_out_rows)
        return res

    @classmethod
    @contextmanager
    def reopen(
        cls,
        database: Database,
        cfg: SweepConfig,
        known: Known,
        *,
        on_warning: Callable[..., Any] | None = None,
    ) -> Iterator[Session | None]:
        """The kept one-point sweep ``cfg.name`` reopened, its point to be measured again in
        place (:meth:`measure_again`), when ``known`` (its data and query set, or the
        configuration epoch) makes that what a fresh sweep measures; else None, and the caller
        measures the sweep in full (:mod:`.remeasure`)."""
        plan = eligible(cfg, known)
        if plan is None:
            yield None
            return
        with database.connect() as results, database.connect(results=False, read_only=True) as kb:
            yield reopened(cls, database, cfg, known, plan, (kb, results), on_warning)

    def measure_again(self) -> SweepResult:
        """A reopened sweep's point measured again: its earlier run deleted, the point run
        again and filled, the sweep complete; an exception leaves the sweep failed
        (interrupted), which the next probe replaces in full."""
        results, row = self.results, self.row
        # (the target recall, not part of the series' name, as the full path would record it)
        results.execute(
            REOPEN,
            {"sweep": row.sweep_id, "run": self.again, "target_recall": self.cfg.target_recall},
        )
        results.commit()
        if self.gt is not None:
            self.result.ground_truth = self.gt.as_json()
        with finishing(results, row.sweep_id, row.experiment_id, self.fill):
            self.run_pending(self.target, [(1, self.plan.points[0])], None)
        if self.trusted is None:  # (the steady way's plan is the one trusted: its point unread)
            self.result.points = stored.points(results, row.sweep_id)
        results.commit()
        return self.result

    @classmethod
    def measure_known(
        cls, database: Database, cfg: SweepConfig, query_set: tuple[str, dict] | None = None
    ) -> Known:
        """The query set and data of ``cfg``'s target measured once for several sweeps (advise's
        designs); ``query_set``: the one stored already (a copy's sweeps search the table's
        queries, not rows of the copy, and leave the sampled rows out: ``Known.held_out``)."""
        from ...table import data_checksum

        stored, qinfo = setup_mod.query_set(database, cfg, query_set)
        with database.connect() as results, database.connect(results=False, read_only=True) as kb:
            target = setup_mod.target_of(results, cfg)
            cache = data_checksum.ChecksumCache(results, database)
            data = data_checksum.measure(kb, target, checksum=cfg.checksum, cache=cache)
            kb.rollback()
            results.commit()
        query_set_of = None if qinfo is None else (stored.testset, qinfo)
        return Known(query_set=query_set_of, data=data, held_out=query_set is not None)
