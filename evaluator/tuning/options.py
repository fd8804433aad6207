"""The option groups of the tuning commands, each declared once as a small frozen dataclass:
:class:`~evaluator.tuning.sweep.config.SweepConfig`, ``AdviseConfig`` and ``WatchConfig`` compose
those they take (as bases: every field read as ``cfg.k``, every configuration built from keywords,
as before). A function that needs one group takes it (``cfg: Building``); a configuration
built from another takes the groups they share with :func:`taken` (advise's sweep of a design:
the query source, measuring, building and find options as advise has them). The command line
declares the same groups' flags once, in ``cli/flags.py``; the defaults here are the API's and
the command line's (``SWEEP_DEFAULTS``, ``ADVISE_DEFAULTS``, ``WATCH_DEFAULTS``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..stages.gucs import DEFAULT_STATEMENT_TIMEOUT

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")


@dataclass(frozen=True, kw_only=True)
class Queries:
    """The query source: a stored test set, or query vectors (``queries``: a
    :class:`~evaluator.testset.query_source.QuerySource`, stored as a query set named as its
    test set)."""

    testset: str = ""
    queries: Any = None


@dataclass(frozen=True, kw_only=True)
class Measuring:
    """What every measurement takes: recall's cut-off, the settings applied at every point
    (``--set``) and the statement timeout on the knowledge base (None: the server's)."""

    k: int = 10
    settings: dict[str, str] = field(default_factory=dict)
    statement_timeout: str | None = DEFAULT_STATEMENT_TIMEOUT


@dataclass(frozen=True, kw_only=True)
class Sweeping(Measuring):
    """How a stored sweep measures its points beyond a probe: repetitions, client connections,
    the queries' embedder, the table's checksum in its fingerprint, and ``fresh`` (every point
    measured again, the stored sweep replaced)."""

    repeat: int = 3
    concurrency: int = 1
    embedder: str | None = None
    checksum: bool = True
    fresh: bool = False


@dataclass(frozen=True, kw_only=True)
class Building:
    """Index builds on a scratch copy: ``maintenance_work_mem`` (None: sized to the index,
    :mod:`evaluator.tuning.build_sweep`) and the seconds before a build is cancelled."""

    maintenance_work_mem: str | None = None
    build_timeout_s: float = 1800


@dataclass(frozen=True, kw_only=True)
class Finding:
    """The cheapest setting reaching ``target_recall``: the largest value a find tries (None:
    ``find.DEFAULT_MAX``) and the repetitions its value found is measured until (None:
    ``repeat``'s)."""

    target_recall: float = 0.95
    find_max: int | None = None
    final_rounds: int | None = None


@dataclass(frozen=True, kw_only=True)
class Budgets:
    """What a recommendation must stay within (None: no bound)."""

    max_p95_ms: float | None = None
    max_index_mb: float | None = None
    max_build_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class Grouping:
    """Measured per group of a column (a tenant), as the application scopes it: ``group_by``
    (None: the target's own; "": the whole table), at most ``max_groups`` of them
    (``targets.groups.DEFAULT_MAX_GROUPS``, ``tests/test_advise_plan.py``)."""

    group_by: str | None = None
    max_groups: int = 10
    # the sampled queries each group is measured with (None: --sample-queries N spread over
    # the groups measured, :func:`evaluator.targets.groups.spread`)
    group_queries: int | None = None


def taken(cfg: C, source: Any, *groups: type) -> C:
    """``cfg`` with the fields of ``groups`` (option groups both compose) as ``source`` has
    them: one configuration's groups replaced by another's."""
    return replace(cfg, **{f.name: getattr(source, f.name) for g in groups for f in fields(g)})
