"""`pgeval advise`: which index design to have, built how, queried how — one stored sweep per
design x build (``sweep --build ... --find ...`` on a scratch copy), then one recommendation
within the budgets, with the DDL and settings to apply it (docs/advise.md).

The configuration (:mod:`.config`) loads alone; the run (:mod:`.run`, which loads sweeps) when
first asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import ADVISE_DEFAULTS, AdviseConfig

if TYPE_CHECKING:
    from .run import AdviseResult, run_advise

__all__ = ["ADVISE_DEFAULTS", "AdviseConfig", "AdviseResult", "run_advise"]


def __getattr__(name: str) -> Any:
    if name in ("AdviseResult", "run_advise"):
        from . import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
