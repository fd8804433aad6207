"""One design x build measured: its stored sweep (``sweep --build ... --find ...``: the index built
on a scratch copy) read back as one row of the advise; with a group column, one sweep per group
(:func:`evaluator.tuning.sweep.groups.run_groups`) on one index over every group, the design's row
at the least setting at which every group reaches the target, with the worst group beside it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...core.errors import PlanError
from ...measure.operating_points import Measured, figures
from ..options import taken
from ..sweep import SweepConfig, SweepResult
from ..sweep.groups import GroupSweepResult, run_groups
from ..sweep.session import NOTHING_KNOWN, Callbacks, Known, Session
from .config import SWEPT
from .outcome import Figures, Groups, Measurement, Outcome, PointRef
from .plan import AdviseConfig, Design

Warn = Callable[[str], None]
OnFind = Callable[[Design, Any, Any], None] | None


def in_place(cfg: AdviseConfig, design: Design, target: str) -> dict[str, Any] | None:
    """The table's index a design is measured through, on the advised target's own table
    (a sample's copy has none of the table's ANN indexes: there it is built)."""
    return design.in_place if target == cfg.target else None


def config(cfg: AdviseConfig, design: Design, target: str) -> SweepConfig:
    """The sweep of one design x build on ``target``: built on a scratch copy (or, an index the
    table has, measured through it on the table: :func:`in_place`), its work setting found, at
    the application's LIMIT."""
    existing = in_place(cfg, design, target)
    return replace(
        taken(SweepConfig(target=target, stage=design.kind), cfg, *SWEPT),
        build=() if existing else tuple(f"{k}={v}" for k, v in design.build.items()),
        index=existing["name"] if existing else None,
        settings={**cfg.settings, **design.fixed},
        depth=cfg.k,  # the application's LIMIT
        find=design.find,
        find_min=design.find_min if design.find_min > 1 else None,
    )


def known(
    database: Any,
    cfg: AdviseConfig,
    design: Design,
    target: str,
    query_set: tuple[str, dict] | None = None,
) -> Known:
    """What every design's sweep on ``target`` shares, measured once: its query set (given:
    ``query_set``) and data."""
    return Session.measure_known(database, config(cfg, design, target), query_set)


def design_row(
    database: Any,
    cfg: AdviseConfig,
    design: Design,
    target: str,
    column: str | None,
    warn: Warn,
    on_find: OnFind,
    known: Known = NOTHING_KNOWN,
) -> tuple[Outcome, SweepResult]:
    """(the design's outcome, a sweep of it: the query source and test set it ran on); ``known``:
    the target's query set and data, measured once for every design (:func:`known`)."""
    scfg = config(cfg, design, target)
    found = None if on_find is None else (lambda p, r: on_find(design, p, r))
    existing = in_place(cfg, design, target)
    if column is None:
        try:
            calls = Callbacks(on_warning=warn, on_find=found)
            res = Session.run(database, scfg, known=known, callbacks=calls)
        except PlanError as exc:  # the planner serves the statement with another index
            if existing is None:
                raise
            warn(
                f"{design.label}: the table's {existing['name']} is its build but not what "
                f"the planner uses for its statement ({exc}): measured on a scratch copy instead"
            )
            unplaced = replace(design, in_place=None)
            row, res = design_row(database, cfg, unplaced, target, column, warn, on_find, known)
            return replace(row, in_place_refused=existing["name"]), res
        return _placed(_row(design, res, {} if existing else design.build), existing), res
    counts: Counter[str] = Counter()

    def on_point(point: Any, rep: int, how: str) -> None:
        counts.update((how,))

    grouped = run_groups(
        database,
        scfg,
        column,
        max_groups=cfg.max_groups,
        group_queries=cfg.group_queries,  # (the sample spread over the groups: _spread)
        on_warning=warn,
        builds=True,
        # measured in place: each group also with the prepared statement's generic plan
        generic=existing is not None,
        on_find=found,
        on_point=on_point,
    )
    if not grouped.sweeps:
        failed = "; ".join(f"{g}: {why}" for g, why in grouped.failed.items())
        raise_no_group(design, failed)
    measured = _group_row(design, grouped)
    measured = replace(measured, counts=(counts["measured"], counts["reused"], counts["kept"]))
    return _placed(measured, existing), next(iter(grouped.sweeps.values()))


def _placed(measured: Measurement, existing: dict[str, Any] | None) -> Outcome:
    """A design's outcome, measured through the table's index ``existing``: its name, oid and
    size (a sweep without a build records no size; nothing was built: no build time)."""
    if existing is None:
        return Outcome(measured)
    built = replace(measured.figures, index_bytes=existing["bytes"], build_ms=None)
    return Outcome(replace(measured, figures=built), in_place=dict(existing))


def raise_no_group(design: Design, failed: str) -> None:
    raise PlanError(f"{design.label}: no group could be measured ({failed})")


def _at(design: Design, res: SweepResult) -> tuple[Measured | None, int | None]:
    """The point a design is shown at, by its number in the sweep: the sweep's own
    recommendation (the cheapest setting reaching R, pgeval.sweep_recommendation), else the
    best value its find tried; and that value."""
    found, ops = res.finds[0], res.operating_points
    at = ops.cheapest()
    if found["reached"] and at is not None:
        return at, at.value(design.find)
    value = found["value"] if found["reached"] else (found["best"] or [None])[0]
    if value is None:
        return None, None
    return ops.at(design.find, value), value


UNMEASURED = "the interval's upper end is above every value measured: raise --find-max"
GROUPED = "--low-end applies to ungrouped designs: shown at the value every group reaches"


def low_end(row: Outcome, res: SweepResult, design: Design, target: float) -> Outcome:
    """``--low-end``: the design shown at the upper end of its setting's 95 % interval
    (``setting_interval.high``: the value reaching ``target`` in 97.5 % of resamples of the
    queries), a value its find measured: the outcome's setting and figures are that point's
    and ``reached`` whether its recall reaches ``target``. Its ``low_end``: ``value`` (None:
    not shown there, ``why``) and ``found``, the least value reaching the target. The build's
    figures (index size, build time) are the row's: one index for every value."""
    m = row.measurement
    found = m.setting.get(design.find)
    if m.groups is not None:  # grouped: as found, said so
        return replace(row, low_end={"value": None, "found": found, "why": GROUPED})
    iv = m.setting_interval or {}
    if not m.reached:
        why = "no value reached the target"
        return replace(row, low_end={"value": None, "found": found, "why": why})
    high = iv.get("high")
    at = None if high is None else res.operating_points.at(design.find, int(high))
    if at is None:
        unmet = replace(m, reached=False)
        return replace(
            row, measurement=unmet, low_end={"value": None, "found": found, "why": UNMEASURED}
        )
    build = {"index_bytes": m.figures.index_bytes, "build_ms": m.figures.build_ms}
    shown = replace(
        m,
        figures=Figures.of({**at.figures(), **build}),
        setting={**m.setting, design.find: at.value(design.find)},
        point=at.label,
        index=at.index,
        at=PointRef(at.sweep_id, at.point),
        reached=at.reaches(target),
    )
    return replace(row, measurement=shown, low_end={"value": at.value(design.find), "found": found})


def _row(design: Design, res: SweepResult, built: dict[str, str]) -> Measurement:
    """The design's figures at the cheapest setting reaching R, else at the best its find
    tried (:func:`_at`); ``built``: the sweep's build of its points ({}: the table's index)."""
    found = res.finds[0]
    at, value = _at(design, res)
    return Measurement(
        design=design.kind,
        build=design.build,
        setting={design.find: value, **design.fixed},
        figures=Figures.of(at.figures() if at is not None else figures({})),
        reached=bool(found["reached"]),
        sweep=res.name,
        point=at.label if at is not None else None,
        at=None if at is None else PointRef(at.sweep_id, at.point),
        index=None if at is None else at.index,  # the index the point's plan used
        # repetitions of points: measured now, reused from other sweeps, kept from this one
        counts=(res.measured, res.reused, res.kept),
        find_path=found["path"],
        # the found value's 95 % interval over resamples of the queries (None: not reached)
        setting_interval=found.get("interval") if found["reached"] else None,
        # every value the find measured: what the plot draws per design
        points=[
            {"value": m.settings.get(design.find), "recall": m.recall, "p95_ms": m.p95_ms}
            for m in res.operating_points.points
            if m.build == built and m.settings
        ],
    )


def _binding_interval(finds: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The 95 % interval of the largest value a group found: the group the setting is for."""
    reached = [f for f in finds.values() if f.get("reached") and f.get("interval")]
    if not reached:
        return None
    return dict(max(reached, key=lambda f: f["value"])["interval"])


def _worst_of(points: list[Measured]) -> dict[str, Any]:
    """One point as its worst group sees it, with the summary's keys: the lowest recall, rows
    and QPS, the highest latencies (the build's figures are every group's: one index)."""

    def pick(key: str, f: Callable[..., Any]) -> Any:
        values = [getattr(p, key) for p in points if getattr(p, key) is not None]
        return f(values) if values else None

    least = {"recall": "index_recall", "qps": "qps", "rows_mean": "rows_mean"}
    most = ("p50_ms", "p95_ms", "p95_sd", "p95_low", "p95_high", "p99_ms")
    return {
        **{key: pick(attr, min) for attr, key in least.items()},
        **{key: pick(key, max) for key in (*most, "index_bytes", "build_ms")},
    }


def _group_row(design: Design, grouped: GroupSweepResult) -> Measurement:
    """The design at the least setting at which every group reaches R (SQL's
    pgeval.sweeps_recommendation over the groups' sweeps), else at the point whose worst group
    comes closest; the worst group and every group at that point beside it."""
    at = grouped.at or {}
    number = at.get("point")
    at_point = (res.operating_points.point(number) for res in grouped.sweeps.values())
    present = [m for m in at_point if m is not None]
    groups = [
        {
            k: g.get(k)
            for k in ("group", "rows", "share", "queries", "recall", "reached", "p95_ms")
            + ("served_by", "generic")
        }
        for g in grouped.groups
    ]
    worst = groups[0] if groups else None
    value = (at.get("settings") or {}).get(design.find)
    worst_sweep = grouped.sweeps[str(worst["group"])] if worst else None
    return Measurement(
        design=design.kind,
        build=design.build,
        setting={design.find: None if value is None else int(value), **design.fixed},
        figures=Figures.of(figures(_worst_of(present))),
        # (a group not measured is not known to reach it: the design does not count as reaching)
        reached=grouped.recommendation is not None and not grouped.failed,
        sweep=worst_sweep.name if worst_sweep else None,
        point=at.get("label"),
        at=(
            PointRef(worst_sweep.sweep_id, number)
            if worst_sweep is not None and number is not None
            else None
        ),
        index=None,
        counts=(0, 0, 0),
        find_path={g: f.get("path") for g, f in grouped.finds.items()},
        # the interval of the group whose own value binds (the largest found)
        setting_interval=_binding_interval(grouped.finds),
        points=[
            {
                "value": (p["settings"] or {}).get(design.find),
                "recall": p["worst_recall"],
                "p95_ms": p["p95_ms"],
            }
            for p in grouped.points
            if p["settings"]
        ],
        groups=Groups(
            sweeps={g: res.name for g, res in grouped.sweeps.items()},
            worst_group=None
            if worst is None
            else {"group": worst["group"], "rows": worst["rows"], "recall": worst["recall"]},
            groups=groups,
            missing=[g["group"] for g in groups if not g["reached"]],
            skipped=grouped.skipped,
            failed=grouped.failed,
            chosen=grouped.chosen,
            # each group's own least value reaching R (None: it reached none)
            found={
                g: f.get("value") if f.get("reached") else None for g, f in grouped.finds.items()
            },
        ),
    )
