"""A one-point sweep measured again in place: a probe's lean path (dba/watch/probe.py).

A probe of a series on unchanged data would redo, as a fresh sweep, what it did last time: delete
the series' sweep and open it again, copy the exact run from the stored ground truth, and measure
its one point. :func:`again` keeps the sweep, its experiment and its exact run, and measures only
the point again, through the measuring session's own steps (``Session.run_pending``: the same statement,
settings, LIMIT rule, plan check and timing as every sweep point), its values filled by the same
SQL (``store.fill``: pgeval.index_recall, pgeval.nearest_rank, pgeval.run_throughput) on the
point's new rows.

Nothing of the configuration is taken from the earlier probe: both fingerprints (the exact
stage's and the point's) are captured again by the runner's own fingerprinter, as a fresh sweep
captures them (server, extensions, indexes with their builds and state, every setting as the
stage sees it, the data measured by the caller), and the kept sweep is used only when their
configuration hashes are those it was measured under: the experiment's (its exact run) and the
point's. The configuration hash the probe records is therefore the one a fresh sweep computes,
every probe; a changed setting, extension, index build or state, or data is seen at once.

Anything else returns None and the caller runs the sweep in full: no such sweep, or not complete
(an interrupted probe), not exactly one point and one repetition, a build, a find, a concurrency,
another query set, settings, k or depth, another fingerprint, an exact run materialised from
another ground truth than the slot's current one (or none current: it is computed or refreshed
by the full path), the sweep's measures failing on the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...stages import gucs
from . import grid, store
from . import setup as setup_mod
from .config import SweepConfig
from .config import plan as plan_of
from .result import SweepResult
from .session import Known, Session, finishing, point_fingerprint

# a series' kept sweep (s), its exact run (x) and its first point (sp) with its run (p), each
# complete; the steady path (dba/watch/steady.py) reads them too
KEPT_JOINS = """
  FROM pgeval.sweep s
  JOIN pgeval.run x ON x.experiment_id = s.experiment_id AND x.name = s.name || '.exact.1'
                   AND x.status = 'complete'
  JOIN pgeval.sweep_point sp ON sp.sweep_id = s.sweep_id AND sp.point = 1 AND sp.repetition = 1
  JOIN pgeval.run p ON p.run_id = sp.run_id AND p.status = 'complete'
"""
KEPT_WHERE = " WHERE s.name = %s AND s.status = 'complete'\n"

# the kept sweep: its point, the exact run's ground truth and the configuration hashes
_KEPT = (
    """
SELECT s.sweep_id, s.experiment_id, s.testset_id, s.settings, s.k, s.depth, e.config_hash,
       x.params -> 'ground_truth', sp.config_hash, sp.run_id, sp.label,
       (SELECT count(*) FROM pgeval.sweep_point o WHERE o.sweep_id = s.sweep_id)"""
    + KEPT_JOINS
    + "  JOIN pgeval.experiment e ON e.experiment_id = s.experiment_id\n"
    + KEPT_WHERE
)

# the kept sweep running again, its point's earlier run deleted (with its results): one statement
REOPEN = """
WITH point AS (DELETE FROM pgeval.sweep_point WHERE sweep_id = %(sweep)s),
     run AS (DELETE FROM pgeval.run WHERE run_id = %(run)s)
UPDATE pgeval.sweep SET status = 'running', finished_at = NULL, target_recall = %(target_recall)s
 WHERE sweep_id = %(sweep)s
"""

# what identifies one computation of the stored ground truth (GroundTruth.as_json, status aside)
_GT_KEYS = ("computed_at", "method", "depth", "compute_ms")


def again(
    database: Any,
    cfg: SweepConfig,
    known: Known,
    *,
    on_warning: Callable[..., Any] | None = None,
) -> SweepResult | None:
    """The sweep ``cfg.name`` (one point, one repetition; its data and query set measured by the
    caller: ``known.data``, ``known.query_set``) with its point measured again and its exact
    run kept; None when that would not be what a fresh sweep measures (module docstring)."""
    if known.query_set is None or known.data is None or cfg.name is None:
        return None
    plan = plan_of(cfg)
    if not plan.one_point or cfg.find or cfg.repeat != 1 or cfg.concurrency != 1:
        return None
    name: str = cfg.name
    cfg, qinfo = setup_mod.query_set(database, cfg, known.query_set)
    with database.connect() as results, database.connect(results=False, read_only=True) as kb:
        # (the transaction goes on with the setup's reads, which end it)
        kept = results.execute(_KEPT, (name,)).fetchone()
        if kept is None or kept[-1] != 1 or (kept[4], kept[5]) != (cfg.k, plan.depth):
            return None
        sweep_id, exp_id, tid, settings, _, _, exp_hash, exact_gt, point_hash, old_run, label, _ = (
            kept
        )
        point = plan.points[0]
        if label != point.label:
            return None
        # (the extension and the settings checked when the kept sweep was measured: the same
        # server, extensions and settings, which the fingerprints' hashes below make sure of)
        s = setup_mod.setup(results, kb, cfg, plan.stage, plan.param_axes, checks=False)
        if s.tid != tid or s.base != settings:
            return None
        own = bool(qinfo and qinfo["own_chunk_removed"])
        gt = _current_ground_truth(results, s, plan.depth, own, known.data.data, exact_gt)
        if gt is None:
            return None
        fps = _fingerprints(kb, cfg, s, plan.depth, plan.stage, point, known.data)
        if fps is None:
            return None
        base_fp, point_fp, hashes = fps
        if hashes != (exp_hash, point_hash):
            return None
        row = store.SweepRow(sweep_id, name, exp_id, True)
        session = Session(
            database=database, cfg=cfg, plan=plan, kb=kb, results=results, setup=s, row=row,
            result=setup_mod.new_result(cfg, s, row.name, row, qinfo, base_fp, on_warning, own),
            base_fp=base_fp, data=known.data.data, own=own, fps={point.number: point_fp},
            hashes={point.number: point_hash}, gt=gt, known=known,
        )  # fmt: skip
        session.callbacks.on_warning = on_warning
        return _measure_point(session, point, old_run)


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


def _fingerprints(
    kb: Any, cfg: SweepConfig, s: Any, depth: int, stage: Any, point: grid.Point, data: Any
) -> tuple[dict, dict, tuple[str, str]] | None:
    """The exact stage's and the point's fingerprints, captured as a fresh sweep captures them
    (``setup.fingerprinter``, the setting-free part read once), and their configuration
    hashes; None when the server refuses the settings (the full path says why)."""
    import psycopg

    from .. import fingerprint as fpmod

    fingerprint = setup_mod.fingerprinter(kb, cfg, s, depth, stage, data)
    try:
        common = fpmod.settings_free(kb, s.target)
        kb.rollback()  # (each fingerprint's settings are read in a transaction of their own)
        base_fp = fingerprint(gucs.scope(s.base, "exact"), "exact", common=common)
        point_fp = point_fingerprint(fingerprint, s, cfg, point, False, common)
    except psycopg.Error:
        kb.rollback()
        return None
    return base_fp, point_fp, (fpmod.config_hash(base_fp), fpmod.config_hash(point_fp))


def _measure_point(session: Session, point: grid.Point, old_run: int) -> SweepResult:
    """The point's earlier run deleted, the point run again and filled, the sweep complete; an
    exception leaves the sweep failed (interrupted), which the next probe replaces in full."""
    results, row, result = session.results, session.row, session.result
    # (the target recall, not part of the series' name, as the full path would record it)
    results.execute(
        REOPEN,
        {"sweep": row.sweep_id, "run": old_run, "target_recall": session.cfg.target_recall},
    )
    results.commit()
    result.ground_truth = session.gt.as_json()
    with finishing(results, row.sweep_id, row.experiment_id, session.fill):
        session.run_pending(session.target, [(1, point)], None)
    result.points = store.points(results, row.sweep_id)
    results.commit()
    return result
