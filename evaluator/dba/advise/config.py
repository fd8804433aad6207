"""`pgeval advise`'s configuration and its defaults, :data:`ADVISE_DEFAULTS`, nowhere else: the
command's option defaults and the API's keyword defaults read them (as ``SWEEP_DEFAULTS`` and
``PIPELINE_DEFAULTS`` for sweeps and pipelines). A module of its own, light to import (the API
reads it when it is loaded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...stages import gucs


@dataclass
class AdviseConfig:
    target: str
    testset: str = ""
    queries: Any = None  # testset.query_source.QuerySource (instead of testset)
    target_recall: float = 0.95
    designs: tuple[str, ...] = ()  # (): the registry's default designs the server supports
    build: tuple[str, ...] = ()  # ("hnsw:m=8,16", ...)
    settings: dict[str, str] = field(default_factory=dict)  # --set, every point of every design
    max_p95_ms: float | None = None
    max_index_mb: float | None = None
    max_build_s: float | None = None
    concurrency: int = 1
    k: int = 10
    repeat: int = 1
    # each design's found setting measured until it has this many repetitions: the finalists'
    # p95 (its spread and its interval) compared beyond its noise
    final_rounds: int = 3
    find_max: int | None = None
    embedder: str | None = None
    checksum: bool = True
    statement_timeout: str | None = gucs.DEFAULT_STATEMENT_TIMEOUT
    maintenance_work_mem: str | None = None
    build_timeout_s: float = 1800
    fresh: bool = False  # measure every point again (each design's sweep replaced)
    # --group-by: every design measured per group of this column (None: the target's own
    # group_by, resolved by run_advise; "" : the whole table)
    group_by: str | None = None
    max_groups: int = 10  # target.groups.DEFAULT_MAX_GROUPS (tests/test_advise_plan.py)
    # --group-by: the sampled queries each group is measured with (None: --sample-queries N
    # spread over the groups measured, :func:`evaluator.targets.groups.spread`)
    group_queries: int | None = None
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
# the measuring, building and find options, the same fields in both configurations
SWEPT = tuple(
    "testset queries k repeat final_rounds concurrency target_recall find_max embedder checksum "
    "statement_timeout maintenance_work_mem build_timeout_s fresh".split()
)

# what `pgeval advise` does without options (the CLI's option defaults and the API's)
ADVISE_DEFAULTS = AdviseConfig(target="")
