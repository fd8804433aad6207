"""A design's outcome in an advise, as frozen values: what its sweep measured where
(:class:`Measurement`, grouped: :class:`Groups`), how it was placed and measured again
(:class:`Outcome`'s own fields), its screening (:class:`Screening`), what the sample predicts
of it (:class:`OnSample`), its recall's margin (:class:`Margin`) and the verdict against the
budgets (:class:`Verdict`). Each step of advise returns a new outcome
(``dataclasses.replace``); none writes keys. :meth:`Outcome.as_dict` is the row the JSON shows
(``pgeval advise --format json``'s ``designs``), key for key; an outcome reads as that row too
(a read-only mapping), for the reports and the rules."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class Figures:
    """A point's figures as the design's row shows them (``operating_points.figures``)."""

    recall: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p95_sd: float | None = None
    p95_low: float | None = None
    p95_high: float | None = None
    p99_ms: float | None = None
    qps: float | None = None
    rows: float | None = None
    index_bytes: float | None = None
    build_ms: float | None = None

    @classmethod
    def of(cls, figures: Mapping[str, Any]) -> Figures:
        return cls(**figures)

    def as_dict(self) -> dict[str, Any]:
        return _fields(self)


@dataclass(frozen=True)
class PointRef:
    """A measured point by its sweep and number (``at``: what the recall margin reads)."""

    sweep_id: int
    point: int

    def as_dict(self) -> dict[str, Any]:
        return _fields(self)


@dataclass(frozen=True)
class Groups:
    """A grouped design: every group's sweep, the worst group and every group at the point."""

    sweeps: dict[str, str]
    worst_group: dict[str, Any] | None
    groups: list[dict[str, Any]]
    missing: list[Any]
    skipped: Any
    failed: dict[str, str]
    chosen: Any
    found: dict[str, Any]


@dataclass(frozen=True)
class Measurement:
    """What a design's sweep measured, at the point it is shown at (the cheapest setting
    reaching the target, else the best its find tried)."""

    design: str
    build: dict[str, Any]
    setting: dict[str, Any]
    figures: Figures
    reached: bool
    sweep: str | None
    point: str | None  # the point's label
    at: PointRef | None
    index: str | None  # the index the point's plan used (ungrouped)
    counts: tuple[int, int, int]  # repetitions measured now, reused, kept
    find_path: Any
    setting_interval: dict[str, Any] | None
    points: list[dict[str, Any]]  # every value the find measured: what the plot draws
    groups: Groups | None = None

    def as_dict(self) -> dict[str, Any]:
        counts = dict(zip(("measured", "reused", "kept"), self.counts, strict=True))
        head = {
            "design": self.design,
            "build": self.build,
            "setting": self.setting,
            **self.figures.as_dict(),
            "reached": self.reached,
            "sweep": self.sweep,
        }
        at = None if self.at is None else self.at.as_dict()
        g = self.groups
        if g is None:
            return {
                **head,
                **{"point": self.point, "at": at, "index": self.index, **counts},
                "find_path": self.find_path,
                "setting_interval": self.setting_interval,
                "points": self.points,
            }
        return {
            **head,
            **{"sweeps": g.sweeps, "point": self.point, "at": at, "worst_group": g.worst_group},
            **{"groups": g.groups, "groups_missing": g.missing, "groups_skipped": g.skipped},
            **{"groups_failed": g.failed, "groups_chosen": g.chosen},
            "find_path": self.find_path,
            "setting_interval": self.setting_interval,
            **{"found": g.found, "points": self.points, **counts},
        }


@dataclass(frozen=True)
class Screening:
    """A design measured at the table's size after its screening: the sample's figures and
    the gap between the two settings, in words."""

    screened: dict[str, Any]
    gap: str


@dataclass(frozen=True)
class OnSample:
    """A design measured on the sample only: why it was not built in full, and what its
    figures on the table are predicted to be."""

    dropped: str | None
    on_table: str
    predicted: dict[str, Any] | None


@dataclass(frozen=True)
class Margin:
    """How far the recall may move with another sample of as many queries (:mod:`.margin`)."""

    recall_queries: int | None
    recall_margin: float | None


@dataclass(frozen=True)
class Verdict:
    """What the build needs and where the design stands against the budgets."""

    maintenance_work_mem: str | None
    fits_shared_buffers: bool | None
    over_budget: dict[str, float]


@dataclass(frozen=True)
class Outcome(Mapping[str, Any]):
    """One design's outcome: its measurement and each step's value after it (None: the step
    did not apply, and the row has no key for it)."""

    measurement: Measurement
    in_place: dict[str, Any] | None = None  # the table's index it was measured through
    in_place_refused: str | None = None  # the table's index the planner did not use
    low_end: dict[str, Any] | None = None  # --low-end: where it is shown, and why
    queries: str | None = None  # what its queries were (sampled rows, held-out rows, ...)
    built_on_table: dict[str, Any] | None = None  # --confirm-on-table's build
    measured_where: str | None = None
    upper_bound: dict[str, Any] | None = None  # in place with sampled rows: that figure
    held_out_build: dict[str, Any] | None = None  # its held-out build did not fit
    screening: Screening | None = None
    measured_on: str | None = None  # "table" or "sample"
    on_sample: OnSample | None = None
    margin: Margin | None = None
    verdict: Verdict | None = None

    def as_dict(self) -> dict[str, Any]:
        """The design's row as the JSON shows it."""
        return dict(self._row)

    @cached_property
    def _row(self) -> dict[str, Any]:
        given = {k: v for k in _GIVEN if (v := getattr(self, k)) is not None}
        on = {} if self.measured_on is None else {"measured_on": self.measured_on}
        return {
            **self.measurement.as_dict(),
            "in_place": self.in_place,
            **given,
            **_fields(self.screening),
            **on,
            **_fields(self.on_sample),
            **_fields(self.margin),
            **_fields(self.verdict),
        }

    def __getitem__(self, key: str) -> Any:
        return self._row[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)

    @property
    def figures(self) -> Figures:
        return self.measurement.figures


# an outcome's own fields the row has a key for where they are given, in the row's order
_GIVEN = (
    "in_place_refused",
    "low_end",
    "queries",
    "built_on_table",
    "measured_where",
    "upper_bound",
    "held_out_build",
)


def _fields(value: Any) -> dict[str, Any]:
    """A value's fields, in order, as the row's keys ({}: None, the step did not apply)."""
    return {} if value is None else {f.name: getattr(value, f.name) for f in fields(value)}
