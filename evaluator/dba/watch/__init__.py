"""Recall over time (`pgeval watch`, docs/watch.md): :mod:`.probe` (one probe: a one-point sweep at
the production setting, recorded in pgeval.probe), :mod:`.groups` (one probe per group, all
recorded or none), :mod:`.record` (the probe's row, written in one transaction, and its history
read back from pgeval.probe_history), :mod:`.advice` (what crossed, since when, what changed, and
the remedy measured on the same queries), :mod:`.epoch` and :mod:`.steady` (the kept sweep
measured again under an unchanged configuration epoch)."""

from .groups import run_probes
from .probe import ProbeResult, WatchConfig, run_probe

__all__ = ["ProbeResult", "WatchConfig", "run_probe", "run_probes"]
