"""What a sweep measured: :class:`SweepResult`, the sweep as `pgeval sweep --format json` prints
it; its points, typed, as :class:`evaluator.measure.operating_points.OperatingPoints`."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...measure.operating_points import OperatingPoints


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
    # the sampled rows' bias measured on copies, in the index and held out (tuning/sweep/held_out.py)
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

    @property
    def operating_points(self) -> OperatingPoints:
        """:attr:`points`, typed, and the recommendation among them."""
        return OperatingPoints.of(
            self.sweep_id, self.points, self.target_recall, self.recommendation
        )
