"""Recall over time (`pgeval watch`, docs/watch.md): :mod:`.probe` (one probe: a one-point sweep at
the production setting, recorded in pgeval.probe), :mod:`.groups` (one probe per group, all
recorded or none), :mod:`.record` (the probe's row, written in one transaction, and its history
read back from pgeval.probe_history), :mod:`.advice` (what crossed, since when, what changed, and
the remedy measured on the same queries), :mod:`.epoch` (the kept sweep
measured again under an unchanged configuration epoch: tuning/sweep/remeasure.py). The
configuration (:mod:`.config`, :data:`WATCH_DEFAULTS`) loads alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import WATCH_DEFAULTS, WatchConfig

if TYPE_CHECKING:
    from .groups import run_probes
    from .probe import ProbeResult, run_probe

__all__ = ["WATCH_DEFAULTS", "ProbeResult", "WatchConfig", "run_probe", "run_probes"]


def __getattr__(name: str) -> Any:
    """The probes (which load sweeps) when first asked for: the configuration loads alone."""
    if name == "run_probes":
        from .groups import run_probes

        return run_probes
    if name in ("ProbeResult", "run_probe"):
        from . import probe

        return getattr(probe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
