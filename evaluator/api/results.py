"""The types the API's methods return and hand to their callbacks, by one name each, for the
annotations of a front end (the command line imports them here, never around the API)."""

from __future__ import annotations

from ..measure.metrics import Evaluation
from ..measure.stage_report import StageReport
from ..reporting.compare import Comparison
from ..reporting.compare_many import MultiComparison
from ..reporting.gate import GateResult
from ..run.groups import GroupPipelineResult
from ..run.pipeline import PipelineResult
from ..run.tune.result import TuneResult
from ..table.config_diff import Diff
from ..table.health import Finding
from ..table.warmup import PassStats, WarmupReport
from ..targets.groups import Group
from ..tuning.advise import AdviseResult
from ..tuning.advise.plan import Design
from ..tuning.sweep import SweepResult
from ..tuning.sweep.grid import Point
from ..tuning.sweep.groups import GroupSweepResult
from ..tuning.watch import ProbeResult

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
