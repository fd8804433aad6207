"""Parameter sweeps (`pgeval sweep`), measured through one object, :class:`.session.Session`
(opened, run, reopened); the rest of pgeval imports only the package's public modules
(tests/test_architecture.py): :mod:`.session`, :mod:`.config`, :mod:`.configure`, :mod:`.result`,
:mod:`.grid`, :mod:`.groups`, :mod:`.text`, :mod:`.plot` (its points: measure/operating_points)."""

from .config import SweepConfig
from .result import SweepResult
from .runner import run_sweep

__all__ = ["SweepConfig", "SweepResult", "run_sweep"]
