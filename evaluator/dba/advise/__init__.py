"""`pgeval advise`: which index design to have, built how, queried how — one stored sweep per
design x build (``sweep --build ... --find ...`` on a scratch copy), then one recommendation
within the budgets, with the DDL and settings to apply it (docs/advise.md)."""

from .plan import AdviseConfig
from .run import AdviseResult, run_advise

__all__ = ["AdviseConfig", "AdviseResult", "run_advise"]
