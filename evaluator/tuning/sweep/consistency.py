"""How a sweep's recall is kept honest while the table changes: every point's recall is the ANN
statements' rows against the exact answer over the rows those statements saw.

Two ways, and the sweep's output says which (``consistency``):

- **one snapshot** (:mod:`.snapshot`, the default): the data checksum, the exact ground truth
  and every timed statement read one exported snapshot; nothing written during the sweep is
  seen by any of them. Bounded by ``--snapshot-max-age``: past it the snapshot is released
  before the next point (the xmin horizon it holds stops VACUUM) and the rest is measured as
  below.
- **detection** (``--consistency detect``, or when a snapshot cannot be taken or imported, or
  after the bound): each point's statements run on the live table, between two reads of the
  table's *version value* (:func:`version_value`: ``count(*)`` and the sum of a hash of each
  row's (tableoid, ctid, xmin), the data checksum's cheap scan, which any committed INSERT,
  UPDATE or DELETE changes). A point is kept only when both reads equal the version value of
  the rows its repetition's exact answer was computed over; otherwise its run is deleted, the
  exact answer computed again for the table as it is now (a fresh data checksum, then the
  stored ground truth reused when that content was seen before, else computed), the
  repetition's exact run replaced, and the point measured again — up to :data:`ATTEMPTS`
  times, after which the sweep stops with an error naming the point (a table written faster
  than a point is measured: take the snapshot). The output names every point measured again.
  Each point's values are filled (by SQL) right after it is kept, against the exact run of
  that moment; the repetition's exact run left at the end is the last exact answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .snapshot import DEFAULT_MAX_AGE_S, SharedSnapshot, try_import

if TYPE_CHECKING:
    from .config import SweepConfig
    from .grid import Point

ATTEMPTS = 3  # measurements of one point while the data keeps changing, at most
ONE_SNAPSHOT = "one snapshot"
DETECTION = "re-measured points"


def version_value(kb: Any, target: Any) -> tuple:
    """(rows, version value, the change log's count or None) of ``target``'s rows, in one
    transaction of its own. The change log (`pgeval target track`) counts every committed write
    statement, also a row inserted and deleted again between two reads, which leaves the
    version value as it was."""
    from psycopg import sql

    from ...table import change_log
    from ...table.data_checksum import version_term
    from ...table.target_table import resolve_table

    where, params = target.where()
    if kb.info.transaction_status != 0:
        kb.rollback()
    try:
        oid = resolve_table(kb, target)
        log = change_log.state(kb, oid)
        row = kb.execute(
            sql.SQL("SELECT count(*), coalesce(sum({}), 0)::text FROM {}{}").format(
                version_term(kb), target.table_sql(), where
            ),
            params,
        ).fetchone()
    finally:
        kb.rollback()
    return int(row[0]), str(row[1]), None if log is None else str(log)


@dataclass
class Consistency:
    """The sweep's way (module docstring) and what it did: ``snap`` the snapshot while held;
    ``reason`` why detection; ``version`` (detection) the version value of the rows the current
    exact answer was computed over (None: not known, computed again before the next point);
    ``remeasured`` the points measured again."""

    kb: Any
    max_age_s: float = DEFAULT_MAX_AGE_S
    snap: SharedSnapshot | None = None
    reason: str | None = None
    version: tuple | None = None
    remeasured: list[dict] = field(default_factory=list)
    held_s: float | None = None  # how long the snapshot was held (when released)
    exact_again: int = 0  # exact answers computed again (detection: the data had changed)
    released_early: bool = False

    @property
    def one_snapshot(self) -> bool:
        return self.snap is not None and self.snap.held

    @property
    def way(self) -> str:
        return ONE_SNAPSHOT if self.snap is not None and not self.released_early else DETECTION

    def check_age(self, target: Any, warn: Any) -> None:
        """Past ``max_age_s``, the snapshot released (before the next point: the rows it saw
        measured first, so that detection goes on from them)."""
        if not self.one_snapshot or self.snap is None or self.snap.age_s() <= self.max_age_s:
            return
        self.version = version_value(self.kb, target)  # (still under the snapshot)
        age = self.snap.age_s()
        self.release()
        self.released_early = True
        self.reason = (
            f"the snapshot was held {age:.0f} s, past --snapshot-max-age {self.max_age_s:g} s "
            "(it holds back VACUUM's xmin horizon): released; the remaining points are "
            "measured on the live table, and measured again when the data changes"
        )
        warn(f"consistency: {self.reason}")

    def lost(self, why: str, warn: Any) -> None:
        """The snapshot refused by the server (its holder's transaction ended): released, the
        rest measured by detection against an exact answer computed again."""
        self.release()
        self.released_early, self.version = True, None
        self.reason = (
            f"the snapshot was lost ({why}): the remaining points are measured on the live "
            "table, and measured again when the data changes"
        )
        warn(f"consistency: {self.reason}")

    def release(self) -> None:
        """The snapshot released (its holder's transaction ended), the measuring connection
        back on its own snapshots."""
        if self.snap is None or not self.snap.held:
            return
        self.held_s = self.snap.age_s()
        try:
            self.kb.use_snapshot(None)
        except Exception:  # noqa: BLE001 - a closed connection reads nothing more
            pass
        self.snap.release()

    def as_json(self) -> dict:
        """What the sweep's JSON says (``consistency``)."""
        out: dict[str, Any] = {"how": self.way, "max_age_s": self.max_age_s}
        if self.snap is not None:
            out["snapshot"] = {
                "taken_at": self.snap.taken_at,
                "txids": self.snap.txids,
                "held_s": round(self.held_s if self.held_s is not None else self.snap.age_s(), 3),
                "released_early": self.released_early,
            }
        if self.way == DETECTION:
            out["reason"] = self.reason
            out["remeasured"] = list(self.remeasured)
            out["exact_answers"] = self.exact_again
        return out


class Measures(Protocol):
    """What measuring a point needs of its session (:class:`.measuring.Measuring`)."""

    database: Any
    results: Any
    row: Any  # store.SweepRow
    gt: Any  # ground_truth.store.GroundTruth, once read
    consistency: Consistency | None

    @property
    def target(self) -> Any: ...
    def warn(self, message: str) -> None: ...
    def run_point(self, target: Any, p: Point, rep: int) -> tuple[int, float | None]: ...
    def ground_truth(self, data: dict | None = None) -> Any: ...
    def ensure_exact(self, target: Any, rep: int) -> int: ...


@contextmanager
def held(database: Any, kb: Any, cfg: SweepConfig) -> Iterator[Consistency]:
    """The sweep's :class:`Consistency` on ``kb``: the snapshot taken and imported (unless
    ``cfg.consistency`` is ``detect``, or it cannot be: detection then, saying why); released
    when the block ends."""
    import psycopg

    from ...core.errors import DatabaseError, InputError, first_line, param

    cons = Consistency(kb, max_age_s=cfg.snapshot_max_age_s)
    if cfg.consistency == "detect":
        cons.reason = "--consistency detect"
    else:
        try:
            snap = SharedSnapshot.take(database)
        except (psycopg.Error, DatabaseError) as exc:
            cons.reason = f"no snapshot could be exported: {first_line(exc)}"
        else:
            cons.reason = try_import(kb, snap)
            if cons.reason is None:
                cons.snap = snap
            else:
                snap.release()
    if cfg.build and cons.snap is None:
        raise InputError(
            "a build sweep measures a scratch copy of the table, which agrees with the exact "
            f"answer only when both are taken under one snapshot: {cons.reason}",
            field=param("consistency"),
        )
    try:
        yield cons
    finally:
        cons.release()


def data_seen(
    kb: Any, target: Any, checksum: bool, known: Any, cons: Consistency, cache: Any
) -> Any:
    """The data part of the sweep's fingerprint (``data_checksum.measure``), read under the
    snapshot: the caller's (``known``, measured before it) only when the snapshot sees the same
    data, so that the ground truth reused for it is over the snapshot's rows."""
    from ...table import data_checksum

    if known is not None and not cons.one_snapshot:
        return known
    measured = data_checksum.measure(kb, target, checksum=checksum, cache=cache)
    return known if known is not None and known.data == measured.data else measured


def measure_point(
    session: Measures, target: Any, p: Point, rep: int
) -> tuple[int, float | None, bool]:
    """Point ``p`` of repetition ``rep`` measured as the sweep's consistency says: (run id,
    qps, whether by detection: its values then filled at once)."""
    from ...core.pool_safe import SnapshotGone

    cons = session.consistency
    try:
        if cons is not None:
            cons.check_age(session.target, session.warn)
        # (a build's scratch copy: nothing writes it, and it was taken under the snapshot the
        # exact answer read, strategies.copied)
        if cons is None or cons.one_snapshot or target is not session.target:
            return (*session.run_point(target, p, rep), False)
    except SnapshotGone as exc:  # its holder ended: the points before it stand, the rest detected
        if cons is None or target is not session.target:
            raise
        cons.lost(exc.server, session.warn)
    return (*detected_point(session, cons, target, p, rep), True)


def detected_point(
    session: Measures, cons: Consistency, target: Any, p: Point, rep: int
) -> tuple[int, float | None]:
    """Point ``p`` of repetition ``rep`` measured between two reads of the table's version
    value, both those of the rows its exact answer was computed over (module docstring):
    (run id, qps)."""
    from ...core.errors import Conflict

    source = session.target  # the table the exact answer reads (a build measures its copy)
    for attempt in range(1, ATTEMPTS + 1):
        if version_value(cons.kb, source) != cons.version:
            fresh_exact(session, cons, target, rep)
        run_id, qps = session.run_point(target, p, rep)
        after = version_value(cons.kb, source)
        if after == cons.version:
            if attempt > 1:
                cons.remeasured.append(
                    {
                        "point": p.number,
                        "label": p.label,
                        "repetition": rep,
                        "measurements": attempt,
                    }
                )
            return run_id, qps
        session.results.execute("DELETE FROM pgeval.run WHERE run_id = %s", (run_id,))
        session.results.commit()
        session.warn(
            f"consistency: the rows of target '{source.name}' changed while point {p.label} "
            f"(repetition {rep}) was measured ({(cons.version or ('?',))[0]} -> {after[0]} rows): "
            "measuring it again against a fresh exact answer"
        )
    raise Conflict(
        f"the rows of target '{source.name}' changed during each of {ATTEMPTS} measurements of "
        f"point {p.label} (repetition {rep}): no recall of it is measured against the rows its "
        "statements saw; measure it under one snapshot (without --consistency detect, and a "
        "--snapshot-max-age the sweep fits in), or while the writes pause"
    )


def fresh_exact(session: Measures, cons: Consistency, target: Any, rep: int) -> None:
    """The exact answer of the table as it is now (its data checksum measured again: the
    stored ground truth reused when that content was seen, else computed), between two equal
    reads of its version value, and repetition ``rep``'s exact run replaced by it."""
    from ...core.errors import Conflict
    from ...table import data_checksum
    from . import store

    kb, source, earlier = cons.kb, session.target, session.gt
    for _ in range(ATTEMPTS):
        before = version_value(kb, source)
        measured = data_checksum.measure(
            kb, source, cache=data_checksum.ChecksumCache(session.results, session.database)
        )
        kb.rollback()
        session.gt = None
        gt = session.ground_truth(data=measured.data)
        if version_value(kb, source) == before:
            break
    else:
        raise Conflict(
            f"the rows of target '{source.name}' changed during each of {ATTEMPTS} computations "
            "of the exact answer: measure under one snapshot, or while the writes pause"
        )
    cons.version, cons.exact_again = before, cons.exact_again + 1
    name = f"{session.row.name}.exact.{rep}"
    old = store.complete_run(session.results, session.row.experiment_id, name)
    if old is not None and (earlier is None or earlier.gt_id != gt.gt_id):  # (else: its lists)
        session.results.execute("DELETE FROM pgeval.run WHERE run_id = %s", (old,))
        session.results.commit()
    session.gt = gt
    session.ensure_exact(target, rep)
