"""`pgeval advise`'s configuration and its defaults, :data:`ADVISE_DEFAULTS`, nowhere else: the
command's option defaults and the API's keyword defaults read them (as ``SWEEP_DEFAULTS`` and
``PIPELINE_DEFAULTS`` for sweeps and pipelines). A module of its own, light to import (the API
reads it when it is loaded)."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import Budgets, Building, Finding, Grouping, Queries, Sweeping


@dataclass(frozen=True, kw_only=True)
class AdviseConfig(Queries, Sweeping, Building, Finding, Budgets, Grouping):
    """`pgeval advise`'s options: the groups of :mod:`evaluator.tuning.options` (those of a sweep,
    :data:`SWEPT`, taken by each design's sweep as they are) and advise's own."""

    target: str
    designs: tuple[str, ...] = ()  # (): the registry's default designs the server supports
    build: tuple[str, ...] = ()  # ("hnsw:m=8,16", ...)
    repeat: int = 1
    # each design's found setting measured until it has this many repetitions: the finalists'
    # p95 (its spread and its interval) compared beyond its noise
    final_rounds: int = 3
    sample_rows: int | None = None  # screen on this many rows (None: chosen by advise)
    # the design built in full after screening: built CONCURRENTLY on the table, measured there
    confirm_on_table: bool = False
    # advise's own time for that build: a challenger whose build on the table's rows is estimated
    # over it is not built (said, with what builds it); None: no bound. With no index in place
    # the best screened design is built whatever its estimate (nothing else gives an answer)
    max_confirm_s: float | None = 600.0
    role: str | None = None  # settings as ALTER ROLE role IN DATABASE ... (else ALTER DATABASE)
    # a design reaches the target only where its recall's 95 % interval lies above it
    low_end: bool = False


# what each design's sweep takes from advise as it is (measure.config): the query source and
# the measuring, building and find options; a design's sweep sets the rest (its stage, build,
# settings and LIMIT)
SWEPT = (Queries, Sweeping, Building, Finding)

# what `pgeval advise` does without options (the CLI's option defaults and the API's)
ADVISE_DEFAULTS = AdviseConfig(target="")
