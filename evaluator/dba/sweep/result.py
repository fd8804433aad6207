"""What a sweep measured: :class:`Measured`, one point read from SQL, and :class:`SweepResult`,
the sweep as `pgeval sweep --format json` prints it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    row: dict = field(repr=False, compare=False, default_factory=dict)  # the summary's row

    @classmethod
    def of(cls, sweep_id: int, row: dict, index: str | None = None) -> Measured:
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
            p50_ms=row["p50_ms"],
            p95_ms=row["p95_ms"],
            p95_sd=row["p95_sd"],
            p95_low=row.get("p95_low"),
            p95_high=row.get("p95_high"),
            p99_ms=row["p99_ms"],
            qps=row["qps"],
            rows_mean=row["rows_mean"],
            rows_min=row["rows_min"],
            build_ms=row["build_ms"],
            index_bytes=row["index_bytes"],
            index=row.get("index") if index is None else index,
            row=row,
        )

    def value(self, setting: str) -> int | None:
        """The point's value of ``setting`` (a find's work setting) as a number."""
        v = self.settings.get(setting)
        return None if v is None else int(v)

    def figures(self) -> dict[str, Any]:
        """The figures a design's row shows (advise): :func:`figures` of its summary row."""
        return figures(self.row)


def figures(point: dict[str, Any]) -> dict[str, Any]:
    """The figures a design's row shows (advise), from a row of SQL's per-point summary (or a
    group's worst point, with the same keys): None where the row has none."""
    return {
        "recall": point.get("index_recall"),
        "p50_ms": point.get("p50_ms"),
        "p95_ms": point.get("p95_ms"),
        "p95_sd": point.get("p95_sd"),
        "p95_low": point.get("p95_low"),
        "p95_high": point.get("p95_high"),
        "p99_ms": point.get("p99_ms"),
        "qps": point.get("qps"),
        "rows": point.get("rows_mean"),
        "index_bytes": point.get("index_bytes"),
        "build_ms": point.get("build_ms"),
    }


@dataclass
class SweepResult:
    name: str
    sweep_id: int
    experiment_id: int
    k: int
    target_recall: float
    resumed: bool
    measured: int = 0
    reused: int = 0
    kept: int = 0  # already in this sweep (resume)
    points: list[dict] = field(default_factory=list)
    recommendation: dict | None = None
    warnings: list[str] = field(default_factory=list)
    measures: list[str] = field(default_factory=list)
    config_hash: str | None = None  # of the sweep's base configuration (exact stage)
    filters: dict = field(default_factory=dict)
    testset: str | None = None
    queries: dict | None = None  # the query source (no judgements), else None
    judged: bool = True  # the queries have graded judgements
    ground_truth: dict | None = None  # computed | reused (None: every point was kept)
    # the configuration changed since the sweep of this name was measured: {"sweep": the name
    # its earlier points are kept under, "changes": [{"key", "then", "now"}], "message"}
    previous: dict | None = None
    finds: list[dict] = field(default_factory=list)  # --find: one per combination of the others
    # the server that answered (fingerprint's server part: host, port, in recovery, version)
    server: dict = field(default_factory=dict)
    # the sampled rows' bias measured on copies, in the index and held out (dba/sweep/held_out.py)
    held_out: dict | None = None
    # how every recall was measured against the rows its statements saw (.consistency)
    consistency: dict | None = None
    # the queries are rows of the index they search (sampled rows, none held out): each recall
    # an upper bound for the application's queries (testset.query_source.SAMPLED_BIAS)
    sampled: bool = False

    def as_dict(self) -> dict:
        """What `pgeval sweep --format json` prints."""
        from ...testset.query_source import SAMPLED_BIAS, label
        from .text import held_out_line, recommendation_line

        said = label(self.queries, held_out=not self.sampled)
        return {
            "sweep": self.name,
            "experiment_id": self.experiment_id,
            "k": self.k,
            "config_hash": self.config_hash,
            "filters": self.filters,
            "target_recall": self.target_recall,
            "resumed": self.resumed,
            "previous": self.previous,
            "find": {**self.finds[0], "queries": said} if len(self.finds) == 1 else None,
            "finds": [{**f, "queries": said} for f in self.finds],
            "server": self.server,
            "measured": self.measured,
            "reused": self.reused,
            "kept": self.kept,
            "testset": self.testset,
            "queries": self.queries,
            "queries_label": said,
            "notes": [
                n
                for n in (
                    SAMPLED_BIAS if self.sampled else None,
                    held_out_line(self.held_out, self.k),
                )
                if n
            ],
            "held_out": self.held_out,
            "consistency": self.consistency,
            "judgements": self.judged,
            "ground_truth": self.ground_truth,
            "recommendation": self.recommendation and {**self.recommendation, "queries": said},
            "recommendation_line": recommendation_line(self),
            "points": [{**p, "queries": said} for p in self.points],
            "warnings": self.warnings,
        }

    def point(self, number: int | None) -> Measured | None:
        """Point ``number`` of :attr:`points` (None: not among them)."""
        row = next((p for p in self.points if p["point"] == number), None)
        return None if row is None else Measured.of(self.sweep_id, row)
