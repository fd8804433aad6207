"""What a sweep measures, as strategies over one :class:`.session.Session` (typed as its
:class:`.measuring.Measuring`): the grid's points (:func:`grid_points`), under ``--build`` one index per build on a scratch copy
(:func:`builds`), or a find's values, tried one by one (:func:`finds`). :func:`measure` picks the
strategy of the sweep's configuration."""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

from ...core.canonical import canonical_json
from ...stages import gucs
from . import grid, store
from .config import find_max
from .measuring import Measuring


def measure(session: Measuring) -> None:
    """Every point of the sweep (or every value its finds try), measured or kept."""
    if session.cfg.find:
        finds(session)
    elif session.plan.build_axes:
        builds(session)
    else:
        grid_points(session)


def _scratch(session: Measuring) -> Any:
    """The scratch copy the sweep's builds are on (a ``Scratch`` to enter; then
    :func:`copied`), the steps before any build taken (:func:`before_builds`)."""
    from ..build_sweep import Scratch

    before_builds(session)
    cfg = session.cfg
    return Scratch(
        session.database,
        session.target,
        maintenance_work_mem=cfg.maintenance_work_mem,
        build_timeout_s=cfg.build_timeout_s,
        snapshot=copy_snapshot(session),
        rows_seen=rows_seen(session),
        stage=cfg.stage,
    )


def grid_points(session: Measuring) -> None:
    """The grid's points on the user's table."""
    session.measure(session.plan.points)


def builds(session: Measuring) -> None:
    """The grid's points, one index per build on a scratch copy of the table (a build whose
    points are all stored is not built)."""
    groups: dict[str, list] = {}
    for p in session.plan.points:
        groups.setdefault(canonical_json(p.build), []).append(p)
    todo = {key: session.pending(pts) for key, pts in groups.items()}
    if not any(todo.values()):
        return
    with _scratch(session) as scratch:
        copied(session)
        for key, pending in todo.items():
            if not pending:
                continue
            options = json.loads(key)
            info = scratch.build(
                session.stage.method, options, grid.label_of(options, {}), session.cfg.stage
            )
            for w in scratch.warnings:
                session.warn(w)
            session.run_pending(scratch.target, pending, info)


def finds(session: Measuring) -> None:
    """One find per build and combination of the other --param values; each value tried is a
    point. Under --build, on a scratch copy whose index is built when a point of that build
    first needs measuring (a rerun whose points are all stored builds nothing)."""
    from .find import DEFAULT_START, search

    cfg, plan = session.cfg, session.plan
    assert cfg.find is not None  # (a find's sweep)
    setting: str = cfg.find
    current = gucs.current(session.kb, [setting])[setting]
    session.kb.rollback()
    start = int(current) if current and current.strip().isdigit() else DEFAULT_START
    if cfg.find_start is not None:  # (advise's grouped find: where the groups before stopped)
        start = int(cfg.find_start)
    most = find_max(cfg)
    with ExitStack() as stack:
        copy = _Copy(session, stack)

        def measure(p: grid.Point, reps: range | None = None) -> None:
            if plan.build_axes:
                copy.measure(p, reps)
            else:  # measured and filled, or reused or kept with its values
                session.measure([p], reps=reps)

        for build in grid.product(plan.build_axes):
            for others in grid.product(plan.param_axes):
                points: dict[int, grid.Point] = {}  # the values tried, fingerprinted once

                def tried(
                    value: int, others: Any = others, build: Any = build, points: dict = points
                ) -> float | None:
                    p = points[value] = session.point({**others, setting: str(value)}, build)
                    measure(p)
                    found = session.measured(p.number)
                    recall = None if found is None else found.recall
                    if session.callbacks.on_find:
                        session.callbacks.on_find(p, recall)
                    return recall

                found = search(
                    setting, others, tried, cfg.target_recall, start, most,
                    min(cfg.find_min or 1, most),
                )  # fmt: skip
                if found.value is not None and (cfg.final_rounds or 0) > cfg.repeat:
                    # (under a build, its index is the one on the copy: the last built)
                    measure(
                        points[found.value], range(cfg.repeat + 1, int(cfg.final_rounds or 0) + 1)
                    )
                session.result.finds.append(
                    {
                        **found.as_dict(),
                        "interval": interval(session, setting, others, build, found.path),
                        **({"build": build} if plan.build_axes else {}),
                    }
                )


def interval(
    session: Measuring, setting: str, others: dict, build: dict, path: list[list]
) -> dict | None:
    """The found value's 95 % interval over resamples of the queries (SQL's
    pgeval.sweep_setting_interval over this find's points); None when it measured nothing."""
    points = [session.number({**others, setting: str(v)}, build) for v, _ in path]
    if not points:
        return None
    session.results.commit()  # (the points' values filled: read in a transaction of its own)
    found = store.setting_interval(
        session.results, session.row.sweep_id, setting, session.cfg.target_recall,
        session.cfg.k, points,
    )  # fmt: skip
    session.results.commit()
    return found


class _Copy:
    """A find's scratch copy, made when a point of a build first needs measuring, its index
    (re)built for each build in turn; stored points are kept or reused without it."""

    def __init__(self, session: Measuring, stack: ExitStack) -> None:
        self.session, self.stack = session, stack
        self.scratch: Any = None
        self.built: dict | None = None
        self.info: Any = None

    def measure(self, p: grid.Point, reps: range | None = None) -> None:
        s = self.session
        pending = s.pending([p], reps)
        if not pending:
            return
        if self.scratch is None:
            self.scratch = self.stack.enter_context(_scratch(s))
            copied(s)
        if self.built != p.build:
            self.info = self.scratch.build(
                s.stage.method, p.build, grid.label_of(p.build, {}), s.cfg.stage
            )
            self.built = p.build
            for w in self.scratch.warnings:
                s.warn(w)
        s.run_pending(self.scratch.target, pending, self.info)


def before_builds(session: Measuring) -> None:
    """Before a sweep's first build: scratch schemas an earlier process left are said, and the
    ground truth is read from the user's table (not the scratch copy)."""
    from ..build_sweep import leftover_schemas

    stale = leftover_schemas(session.kb)
    session.kb.rollback()
    if stale:
        session.warn(
            f"scratch schemas left by an earlier process: {', '.join(stale)} (drop them "
            "with DROP SCHEMA ... CASCADE when no sweep is running)"
        )
    session.ground_truth()


def copy_snapshot(session: Measuring) -> str | None:
    """The snapshot the scratch copy is taken under: the sweep's, which the exact answer read
    (:func:`before_builds`)."""
    cons = session.consistency
    snap = cons.snap if cons is not None and cons.one_snapshot else None
    return None if snap is None else snap.id


def rows_seen(session: Measuring) -> Any:
    """The version value of the rows the snapshot sees (None: no snapshot): a copy shared
    between sweeps (advise's) is reused only by a sweep whose snapshot sees the same rows. The
    rows are those the copy holds: every group's for a group's sweep (advise --group-by shares
    one copy and one index between its groups; a group's own rows would tell them apart)."""
    from ...table.copied_rows import copied_rows
    from .consistency import version_value

    cons = session.consistency
    if not (cons and cons.one_snapshot):
        return None
    return version_value(session.kb, copied_rows(session.target))


def copied(session: Measuring) -> None:
    """The scratch copy taken: the sweep's snapshot released (the points read the copy, which
    nothing writes; the exact answer read the same snapshot before it), VACUUM no longer held."""
    if session.consistency is not None:
        session.consistency.release()
