"""The types the API's methods return and hand to their callbacks, by one name each, for the
annotations of a front end (the command line imports them here, never around the API)."""

from __future__ import annotations

from ..dba.advise import AdviseResult
from ..dba.advise.plan import Design
from ..dba.config_diff import Diff
from ..dba.health import Finding
from ..dba.sweep import SweepResult
from ..dba.sweep.grid import Point
from ..dba.sweep.groups import GroupSweepResult
from ..dba.warmup import PassStats, WarmupReport
from ..dba.watch import ProbeResult
from ..measure.metrics import Evaluation
from ..measure.stage_report import StageReport
from ..reporting.compare import Comparison
from ..reporting.compare_many import MultiComparison
from ..reporting.gate import GateResult
from ..run.groups import GroupPipelineResult
from ..run.pipeline import PipelineResult
from ..run.tune.result import TuneResult
from ..targets.groups import Group

__all__ = [
    "AdviseResult",
    "Comparison",
    "Design",
    "Diff",
    "Evaluation",
    "Finding",
    "GateResult",
    "Group",
    "GroupPipelineResult",
    "GroupSweepResult",
    "MultiComparison",
    "PassStats",
    "PipelineResult",
    "Point",
    "ProbeResult",
    "StageReport",
    "SweepResult",
    "TuneResult",
    "WarmupReport",
]
