"""What a sweep measured, typed, and the questions asked of it: :class:`Measured`, one point as
SQL computed it, and :class:`OperatingPoints`, every point of a sweep read once from its summary
(``pgeval.sweep_summary``), answering the point by number or at a setting's value, the points
reaching a target, the cheapest reaching it and the Pareto front (faiss's ``OperatingPoints``).

A target is reached by one rule, :func:`reaches`: a recall reaches it within
:data:`REACH_TOLERANCE` (a mean of per-query ratios is a float sum, which may land a few
units in the last place under the target). SQL judges with the same tolerance (``pgeval.reaches``,
sql/016_reaches.sql; a test keeps the two equal)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.db import dict_rows

REACH_TOLERANCE = 1e-12  # SQL's pgeval.reach_tolerance()
_LATENCIES = ("p50_ms", "p95_ms", "p95_sd", "p95_low", "p95_high", "p99_ms", "qps")
# a point's fields named and valued as in its summary row
_ROWS = ("rows_mean", "rows_min", "build_ms", "index_bytes", "index", "plan_mode", "served_by")
_AS_STORED = _LATENCIES + _ROWS


def reaches(recall: float | None, target: float) -> bool:
    """Whether ``recall`` reaches ``target`` (None: not measured, so not known to reach it)."""
    return recall is not None and recall >= target - REACH_TOLERANCE


@dataclass(frozen=True)
class Measured:
    """One point of a sweep, as SQL computed it (``pgeval.sweep_summary``, over the point's
    repetitions; the index from its runs' parameters): recall against exact search, latencies,
    throughput, rows returned, the index the plan used and, under a build, the index built."""

    sweep_id: int
    point: int
    label: str
    settings: dict
    build: dict
    repetitions: int
    recall: float | None  # mean index recall@K over the repetitions
    recall_sd: float | None
    recall_min: float | None  # the lowest and highest of the repetitions' recalls
    recall_max: float | None
    p50_ms: float | None
    p95_ms: float | None
    p95_sd: float | None
    p95_low: float | None  # the p95's 95 % interval (order statistics of the pooled latencies)
    p95_high: float | None
    p99_ms: float | None
    qps: float | None
    rows_mean: float | None  # rows returned per query (the application's LIMIT K)
    rows_min: int | None
    build_ms: float | None  # the build's (a scratch copy's index), else None
    index_bytes: int | None
    index: str | None  # the index the plan used (the runs' ``params.index``)
    plan_mode: str | None  # the planner's plan measured (its mode), else None
    served_by: str | None  # what served that plan
    metrics: dict  # measure -> mean over the repetitions (qrels measures; {} without)
    pareto: bool  # on the Pareto front of recall against p95 (SQL's sweep_summary)
    row: dict = field(repr=False, compare=False, default_factory=dict)  # the summary's row

    @classmethod
    def of(cls, sweep_id: int, row: dict) -> Measured:
        """The point of ``row``, one row of ``pgeval.sweep_summary(sweep_id)``."""
        return cls(
            sweep_id=sweep_id,
            point=row["point"],
            label=row["label"],
            settings=dict(row["settings"] or {}),
            build=dict(row["build"] or {}),
            repetitions=int(row["repetitions"] or 0),
            recall=row["index_recall"],
            recall_sd=row["index_recall_sd"],
            recall_min=row.get("index_recall_min"),
            recall_max=row.get("index_recall_max"),
            **{k: row.get(k) for k in _AS_STORED},
            metrics=dict(row.get("metrics") or {}),
            pareto=bool(row.get("pareto")),
            row=row,
        )

    def value(self, setting: str) -> int | None:
        """The point's value of ``setting`` (a find's work setting) as a number."""
        v = self.settings.get(setting)
        return None if v is None else int(v)

    def reaches(self, target: float) -> bool:
        """Whether the point's recall reaches ``target`` (:func:`reaches`)."""
        return reaches(self.recall, target)

    def figures(self) -> dict[str, Any]:
        """The figures a design's row shows (advise): :func:`figures` of its summary row."""
        return figures(self.row)


def figures(point: dict[str, Any]) -> dict[str, Any]:
    """The figures a design's row shows (advise), from a row of SQL's per-point summary (or a
    group's worst point, with the same keys): None where the row has none."""
    return {
        "recall": point.get("index_recall"),
        **{k: point.get(k) for k in _LATENCIES},
        "rows": point.get("rows_mean"),
        "index_bytes": point.get("index_bytes"),
        "build_ms": point.get("build_ms"),
    }


@dataclass(frozen=True)
class OperatingPoints:
    """Every point of one sweep as measured, in the sweep's order, and the target it was
    measured for; ``recommendation``: SQL's answer to "the cheapest point reaching the target"
    (``pgeval.sweep_recommendation``: the least work, latency only between points of equal
    work and beyond its spread; ``why`` names the rule), None when no point reaches it or the
    caller asked for none."""

    target: float
    points: tuple[Measured, ...] = ()
    recommendation: dict | None = None

    @classmethod
    def of(
        cls, sweep_id: int, rows: list[dict], target: float, recommendation: dict | None = None
    ) -> OperatingPoints:
        """The points of ``rows`` (``pgeval.sweep_summary(sweep_id)``'s, as :func:`points`
        reads them) and SQL's recommendation among them."""
        return cls(target, tuple(Measured.of(sweep_id, r) for r in rows), recommendation)

    def point(self, number: int | None) -> Measured | None:
        """Point ``number`` (None: not among them)."""
        return next((m for m in self.points if m.point == number), None)

    def at(self, setting: str, value: Any) -> Measured | None:
        """The first point at which ``setting`` is ``value`` (compared as text: a setting's
        value is stored as the text it was set to); None: not measured there."""
        return next((m for m in self.points if str(m.settings.get(setting)) == str(value)), None)

    def reaching(self, target: float | None = None) -> list[Measured]:
        """The points whose recall reaches ``target`` (default: the sweep's)."""
        goal = self.target if target is None else target
        return [m for m in self.points if m.reaches(goal)]

    def cheapest(self) -> Measured | None:
        """The cheapest point reaching the target, by SQL's rule (:attr:`recommendation`)."""
        return None if self.recommendation is None else self.point(self.recommendation["point"])

    def best(self) -> Measured | None:
        """The point of highest recall (the first of equals), None when none has one."""
        measured = [m for m in self.points if m.recall is not None]
        return max(measured, key=lambda m: m.recall or 0.0, default=None)

    def pareto(self) -> list[Measured]:
        """The Pareto front of recall against p95 (SQL's ``sweep_summary.pareto``: no other
        point has recall >= and p95 <= with one of them strictly better), by p95."""
        return sorted((m for m in self.points if m.pareto), key=lambda m: m.p95_ms or 0.0)


_SUMMARY = """
SELECT s.*, u.*, iv.low AS p95_low, iv.high AS p95_high
  FROM pgeval.sweep_summary(%(sweep)s) s
  LEFT JOIN LATERAL pgeval.sweep_point_p95_interval(%(sweep)s, s.point) iv ON true
 CROSS JOIN LATERAL (
     SELECT min(r.params ->> 'index') AS index, min(r.params -> 'plan' ->> 'mode') AS plan_mode,
            string_agg(DISTINCT r.params -> 'plan' ->> 'served_by', '; ') AS served_by,
            string_agg(DISTINCT (r.params #>> '{plan,at_limit,limit}') || ': '
                       || (r.params #>> '{plan,at_limit,served_by}'), '; ') AS served_at_limit
       FROM pgeval.sweep_point sp JOIN pgeval.run r ON r.run_id = sp.run_id
      WHERE sp.sweep_id = %(sweep)s AND sp.point = s.point) u
"""


def summary(conn: Any, sweep_id: int, point: int | None = None) -> list[dict]:
    """The sweep's points as SQL summarises them (``point``: that one only), each with the index
    its runs' plans used (``index``)."""
    where = "" if point is None else " WHERE s.point = %(point)s"
    return dict_rows(conn, _SUMMARY + where, {"sweep": sweep_id, "point": point})


def points(conn: Any, sweep_id: int) -> list[dict]:
    """:func:`summary` with each point's per-query index recall tail (``recall_tail``: p5, p10,
    min, the queries at 0 and the exact neighbours missed; SQL's pgeval.sweep_recall_distribution
    and pgeval.sweep_recall_misses), for a sweep's result."""
    from .recall_distribution import sweep_tails

    tails = sweep_tails(conn, sweep_id)
    return [{**p, "recall_tail": tails.get(p["point"])} for p in summary(conn, sweep_id)]


def point(conn: Any, sweep_id: int, number: int) -> Measured | None:
    """Point ``number`` of the sweep, as measured (None: not measured)."""
    rows = summary(conn, sweep_id, number)
    return Measured.of(sweep_id, rows[0]) if rows else None


def stored_points(conn: Any, sweep_id: int, target: float) -> OperatingPoints:
    """The stored points of sweep ``sweep_id`` (``pgeval.sweep_summary``), read back."""
    return OperatingPoints.of(sweep_id, points(conn, sweep_id), target)
