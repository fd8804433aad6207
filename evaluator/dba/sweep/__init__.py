"""Parameter sweeps (`pgeval sweep`): :mod:`.grid` (the grid), :mod:`.runner` (the loop through
the stage framework), :mod:`.store` (pgeval.sweep / pgeval.sweep_point), :mod:`.load`
(throughput under N clients), :mod:`.plot` (recall against p95 latency, Pareto front)."""

from .config import SweepConfig
from .result import SweepResult
from .runner import run_sweep

__all__ = ["SweepConfig", "SweepResult", "run_sweep"]
