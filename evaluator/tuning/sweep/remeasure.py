"""A kept one-point sweep reopened and its point measured again in place (:meth:`.session.Session
.reopen`, :meth:`.session.Session.measure_again`): a probe's short paths (tuning/watch/probe.py).

Instead of a fresh sweep (the series' sweep deleted and opened again, the exact run copied from
the stored ground truth, the point measured), the sweep keeps its experiment and exact run and
only its point is measured again, through the session's own steps (``run_pending``: the same
statement, settings, LIMIT rule, timing, storage and SQL measures as every point). Two ways, by
what the caller knows (:class:`.session.Known`):

- **lean** (``known.data`` and ``known.query_set``, measured by the caller): both fingerprints
  (the exact stage's and the point's) are captured again as a fresh sweep captures them, and the
  kept sweep is used only when their configuration hashes are those it was measured under: a
  changed setting, extension, index build or state, or data is seen at once. The plan is checked
  again (the stage's ``prepare``).
- **steady** (``known.epoch``: the configuration epoch, tuning/watch/epoch.py, a digest of the
  catalog, the settings and the change log's count): when the point run was measured under the
  epoch read now (``run.params.epoch``), everything the lean way reads is what it read then, so
  its answers are the kept run's: the fingerprints (the point run's, ``info.captured_at`` now and
  ``info.epoch`` the digest), the data version and so the query set and the exact run (its
  ground truth still stored), and the index the plan uses (``ctx.extra[TRUSTED_PLAN]``: no
  catalog look-up, no EXPLAIN). The timed statements and the measures are run as on every path.

Anything else is None and the caller measures the sweep in full (after the steady way: the lean
one): no such sweep, or not complete (an interrupted probe), not exactly one point and one
repetition, a build, a find, a concurrency, another query set, settings, k, depth, label or
statement timeout, another fingerprint or epoch, a judged query set (steady), an exact run
materialised from another ground truth than the slot's current one (lean), the server refusing
the settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from . import setup as setup_mod
from . import store
from .config import Plan, SweepConfig
from .config import plan as plan_of
from .measuring import Callbacks, Known, Measuring
from .result import SweepResult

# a series' kept sweep (s), its exact run (x) and its first point (sp) with its run (p), each
# complete: the configuration hashes, the exact run's ground truth (still stored?) and the query set
_KEPT = """
SELECT s.sweep_id, s.experiment_id, s.testset_id, s.settings, s.k, s.depth, e.config_hash,
       x.params -> 'ground_truth', sp.config_hash, sp.label, p.run_id, p.params, p.fingerprint,
       t.name, t.content_hash, t.n_queries, t.n_judgements,
       EXISTS (SELECT 1 FROM pgeval.ground_truth g
                WHERE g.target = %(target)s
                  AND g.computed_at::text = x.params -> 'ground_truth' ->> 'computed_at'),
       (SELECT count(*) FROM pgeval.sweep_point o WHERE o.sweep_id = s.sweep_id)
  FROM pgeval.sweep s
  JOIN pgeval.run x ON x.experiment_id = s.experiment_id AND x.name = s.name || '.exact.1'
                   AND x.status = 'complete'
  JOIN pgeval.sweep_point sp ON sp.sweep_id = s.sweep_id AND sp.point = 1 AND sp.repetition = 1
  JOIN pgeval.run p ON p.run_id = sp.run_id AND p.status = 'complete'
  JOIN pgeval.experiment e ON e.experiment_id = s.experiment_id
  JOIN pgeval.testset t ON t.testset_id = s.testset_id
 WHERE s.name = %(name)s AND s.status = 'complete'
"""

# the kept sweep running again, its point's earlier run deleted (with its results): one statement
REOPEN = """
WITH point AS (DELETE FROM pgeval.sweep_point WHERE sweep_id = %(sweep)s),
     run AS (DELETE FROM pgeval.run WHERE run_id = %(run)s)
UPDATE pgeval.sweep SET status = 'running', finished_at = NULL, target_recall = %(target_recall)s
 WHERE sweep_id = %(sweep)s
"""

S = TypeVar("S", bound=Measuring)  # (.session.Session)

# what identifies one computation of the stored ground truth (GroundTruth.as_json, status aside)
_GT_KEYS = ("computed_at", "method", "depth", "compute_ms")


@dataclass(frozen=True)
class Kept:
    """The series' kept sweep as :data:`_KEPT` reads it."""

    sweep_id: int
    experiment_id: int
    testset_id: int
    settings: dict
    k: int
    depth: int
    experiment_hash: str
    ground_truth: dict | None  # the exact run's (GroundTruth.as_json)
    point_hash: str
    label: str
    run_id: int  # the point's run, replaced
    params: dict | None  # the point run's (its epoch, index, embedder)
    fingerprint: dict | None  # the point run's
    testset: str
    content_hash: str
    n_queries: int
    n_judgements: int
    ground_truth_stored: bool
    points: int


def eligible(cfg: SweepConfig, known: Known) -> Plan | None:
    """``cfg``'s plan when its sweep may be reopened with ``known`` (module docstring)."""
    if cfg.name is None or cfg.find or cfg.repeat != 1 or cfg.concurrency != 1:
        return None
    if known.epoch is not None:
        q: Any = cfg.queries  # (testset.query_source.QuerySource)
        if q is None or q.kind != "sample" or cfg.group is not None:
            return None
    elif known.query_set is None or known.data is None:
        return None
    plan = plan_of(cfg)
    return plan if plan.one_point else None


def reopened(
    cls: type[S],
    database: Any,
    cfg: SweepConfig,
    known: Known,
    plan: Plan,
    conns: tuple[Any, Any],
    on_warning: Callable[..., Any] | None,
) -> S | None:
    """The session of the kept sweep ``cfg.name`` on ``conns`` (kb, results), its point to be
    measured again; None when that would not be what a fresh sweep measures."""
    row = conns[1].execute(_KEPT, {"name": cfg.name, "target": cfg.target}).fetchone()
    kept = None if row is None else Kept(*row)
    one = (1, cfg.k, plan.depth, plan.points[0].label)  # one point, at cfg's k, depth, setting
    if kept is None or (kept.points, kept.k, kept.depth, kept.label) != one:
        conns[1].rollback()
        return None
    how = _Reopening(cls, database, cfg, known, plan, conns, kept, Callbacks(on_warning=on_warning))
    return _steady(how) if known.epoch is not None else _lean(how)


@dataclass(frozen=True)
class _Reopening(Generic[S]):
    """What both ways reopen the kept sweep with: the session's class, the configuration and
    its plan, what the caller knows, the connections (kb, results), the kept sweep."""

    cls: type[S]
    database: Any
    cfg: SweepConfig
    known: Known
    plan: Plan
    conns: tuple[Any, Any]
    kept: Kept
    calls: Callbacks

    def row(self, reused: bool) -> store.SweepRow:
        return store.SweepRow(
            self.kept.sweep_id, self.cfg.name or "", self.kept.experiment_id, reused
        )

    def session(self, cfg: SweepConfig, fps: dict, **state: Any) -> S:
        """The session measuring the kept point again, with ``fps`` and the other ``state``
        each way reads (its setup, row, result, ...)."""
        kb, results = self.conns
        return self.cls(
            database=self.database, cfg=cfg, plan=self.plan, kb=kb, results=results, fps=fps,
            hashes={self.plan.points[0].number: self.kept.point_hash}, known=self.known,
            callbacks=self.calls, again=self.kept.run_id, **state,
        )  # fmt: skip


def _lean(how: _Reopening[S]) -> S | None:
    """Reopened with both fingerprints captured again (module docstring)."""
    import psycopg

    from ...table.fingerprint import config_hash

    kb, results = how.conns
    cfg, known, plan, kept = how.cfg, how.known, how.plan, how.kept
    cfg, qinfo = setup_mod.query_set(how.database, cfg, known.query_set)
    # (the extension and the settings checked when the kept sweep was measured: the same
    # server, extensions and settings, which the fingerprints' hashes below make sure of)
    checked = setup_mod.checked_settings(results, kb, cfg, plan.param_axes, checks=False)
    s = setup_mod.setup(results, kb, cfg, plan.stage, checked)
    if s.tid != kept.testset_id or s.base != kept.settings:
        return None
    own = bool(qinfo and qinfo["own_chunk_removed"])
    gt = _current_ground_truth(results, s, plan.depth, own, known.data.data, kept.ground_truth)
    if gt is None:
        return None
    try:
        _, base_fp, fps = setup_mod.fingerprints(kb, cfg, s, plan, known.data)
    except psycopg.Error:  # the server refuses the settings: the full path says why
        kb.rollback()
        return None
    n = plan.points[0].number
    if (config_hash(base_fp), config_hash(fps[n])) != (kept.experiment_hash, kept.point_hash):
        return None
    row = how.row(True)
    warn = how.calls.on_warning
    return how.session(
        cfg, fps, setup=s, row=row, base_fp=base_fp, data=known.data.data, own=own, gt=gt,
        result=setup_mod.new_result(cfg, s, row.name, row, qinfo, base_fp, warn, own),
    )  # fmt: skip


def _steady(how: _Reopening[S]) -> S | None:
    """Reopened under an unchanged configuration epoch (module docstring)."""
    from ...providers.embedders import storage
    from ...testset.query_source import sample_record

    kb, results = how.conns
    cfg, known, plan, kept = how.cfg, how.known, how.plan, how.kept
    target, base = setup_mod.checked_settings(results, kb, cfg, plan.param_axes, checks=False)
    params = kept.params or {}
    if (
        params.get("epoch") != known.epoch
        or kept.n_judgements
        or kept.settings != base
        or not kept.fingerprint
        or not kept.ground_truth_stored
    ):
        results.rollback()
        return None
    queries = storage.testset_queries(results, kept.testset_id, with_embedding=True)
    results.rollback()
    cfg = replace(cfg, testset=kept.testset)  # (the query set's, as setup.query_set names it)
    s = setup_mod.Setup(
        tid=kept.testset_id, ts_hash=kept.content_hash, target=target, judged=False, measures=[],
        base=base, queries=queries, label=params.get("embedder"), dim=None,
    )  # fmt: skip
    fp = _captured_now(kept.fingerprint, known.epoch or "")
    q: Any = cfg.queries
    result = SweepResult(
        cfg.name or "", kept.sweep_id, kept.experiment_id, cfg.k, cfg.target_recall, False,
        testset=kept.testset, judged=False, server=dict(fp.get("server") or {}), sampled=True,
        queries=sample_record(kept.n_queries, kept.content_hash, q and q.seed, target.name),
    )  # fmt: skip
    result.ground_truth = {**(kept.ground_truth or {}), "status": "reused"}
    return how.session(
        cfg, {plan.points[0].number: fp}, setup=s, row=how.row(False), result=result, base_fp={},
        data={}, own=True,  # a sample's own chunk (materialize's rule)
        trusted={"index": params.get("index")},
    )  # fmt: skip


def _captured_now(fingerprint: dict, digest: str) -> dict:
    """The kept point run's fingerprint as captured now, under ``digest``."""
    from ...table import data_checksum

    fp = dict(fingerprint)
    fp["info"] = {
        **(fp.get("info") or {}),
        "captured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "epoch": digest,
        # (the data named by the change log's count, which the epoch holds: no pass over the table)
        "checksum": f"{data_checksum.CONTENT_NOTE}: reused (change log unchanged; configuration "
        f"epoch {digest[:12]} unchanged since the measurement this one repeats)",
    }
    return fp


def _current_ground_truth(
    results: Any, s: Any, depth: int, own: bool, data: dict, exact_gt: dict | None
) -> Any:
    """The slot's stored ground truth when it is current for ``data`` (what the full path would
    reuse) and is the one the kept exact run was materialised from, else None."""
    from ...ground_truth import store as ground_truth

    spec = ground_truth.slot_spec(s.target, s.ts_hash, own, s.label)
    found, _ = ground_truth.stored(results, spec, data, depth)
    if found is None or exact_gt is None:
        return None
    now = found.as_json()
    if any(now.get(key) != exact_gt.get(key) for key in _GT_KEYS):
        return None
    return found
