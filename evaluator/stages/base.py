"""The stage framework: what every stage runner gets (:class:`StageContext`) and must do
(:class:`Stage`). One module per stage kind; :mod:`evaluator.kinds.registry` maps kind -> class;
:mod:`evaluator.stages.store` writes pgeval.run / pgeval.result / pgeval.query_timing.

Conventions every stage follows (METRICS.md is the contract; these make it concrete):

- **Run names**: ``{experiment}.{stage}.{repetition}``, e.g. ``exp1.hnsw.2`` (:func:`run_name`).
  A run belongs to its experiment (``pgeval.run.experiment_id``) and carries ``stage`` (the stage
  name in the pipeline, usually its kind) and ``repetition`` (1..N).
- **Ranks** are 1..n, produced by a deterministic SQL ``ORDER BY score-expression, chunk_id``:
  ``ORDER BY distance, chunk_id`` for distances, ``ORDER BY score DESC, chunk_id`` for
  similarities. The rule is written in ``pgeval.run.order_rule`` (:data:`ORDER_DISTANCE`,
  :data:`ORDER_SIMILARITY`). The chunk id is the table's id as text ``COLLATE "C"``
  (:func:`evaluator.core.ids.as_text`): ties break in byte order whatever the table's collation.
- **Duplicates** (several rows of the knowledge base mapping to one chunk id) are collapsed to the
  chunk's best score, hence its best rank, before ranking.
- **Scores**: vector stages (``registry.vector_kinds()``) store in ``result.score`` the exact
  distance computed by the operator of the target's metric (lower is better; ``<#>`` gives the
  *negative* inner product). ``run.params`` then has ``"score": "distance"`` and
  ``"metric": "cosine" | "l2" | "ip"``, so index recall can compare an ANN stage's distances with
  the exact stage's K-th distance. Keyword, fusion and rerank stages store higher-is-better
  scores and ``"score": "similarity"`` (bm25 scores from pg_textsearch are negated on the way in
  so that higher is better, or stored as distance with ``"score": "distance"`` — say which).
- **Depth**: a stage stores at most ``ctx.depth`` chunks per query (``run.depth``).
- **Settings**: GUCs are applied with ``SET LOCAL`` inside the stage's transaction on ``ctx.kb``
  (READ ONLY, except ``--isolate-index``), validated first (:mod:`evaluator.stages.gucs`), and
  recorded in ``run.params["settings"]``. Nothing leaks to the session.
- **Timing**: one ``pgeval.query_timing`` row per query with the boundary named in
  ``run.timing_boundary`` (:data:`BOUNDARY_ROUND_TRIP` ...). Batch mode writes no per-query
  latency (only ``run.params["batch_ms"]``).
- **Status**: a run is created ``running`` and marked ``complete`` only after its results are
  written; a failure marks it ``failed`` (:func:`evaluator.stages.store.run_scope`).
- **Earlier stages**: ``ctx.previous`` maps the names of the stages that already ran in this
  experiment and repetition to their run ids (merge reads its inputs from there; rerank its
  candidates).

A stage is a class with a ``kind`` and ``run(ctx, run_name) -> run_id``; ``prepare(ctx)`` runs
for every stage before the first query of the experiment, so that configuration errors
(dimension mismatch, unknown GUC, wrong index) stop the pipeline before anything is measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.errors import param
from ..testset.query import Query

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

    from ..targets.targets import Target

ORDER_DISTANCE = "distance ascending, ties by chunk id ascending (best distance per chunk)"
ORDER_SIMILARITY = "score descending, ties by chunk id ascending (best score per chunk)"

BOUNDARY_ROUND_TRIP = "client round trip (prepared statement: execute + fetch, one per query)"
BOUNDARY_SERVER = "server execution (EXPLAIN ANALYZE execution time, a second execution)"
BOUNDARY_BATCH = "batch: one set-based statement for all queries (no per-query latency)"
BOUNDARY_NONE = "none (no query executed by pgeval)"

SCORE_DISTANCE = "distance"
SCORE_SIMILARITY = "similarity"


def run_name(experiment: str, stage: str, repetition: int) -> str:
    """``{experiment}.{stage}.{repetition}``."""
    return f"{experiment}.{stage}.{repetition}"


class Progress(Protocol):
    """Progress of one stage: :mod:`evaluator.run.pipeline` passes a rich bar; tests pass None."""

    def start(self, description: str, total: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def finish(self) -> None: ...


@dataclass
class StageContext:
    """Everything a stage needs. Built by :mod:`evaluator.run.pipeline` once per stage run."""

    kb: psycopg.Connection  # knowledge base: read-only transactions (autocommit off)
    results: psycopg.Connection  # where schema pgeval lives (may be another database)
    target: Target | None  # evaluator.targets.targets.Target (None for stages that need none)
    testset: str
    testset_id: int
    experiment: str | None  # experiment name (None outside a pipeline)
    experiment_id: int | None
    repetition: int = 1
    stage: str = ""  # the stage's name in the pipeline (usually its kind)
    depth: int = 100
    settings: dict[str, str] = field(default_factory=dict)  # validated GUC -> value (all stages)
    options: dict[str, str] = field(default_factory=dict)  # this stage's --opt STAGE:KEY=VALUE
    queries: list[Query] = field(default_factory=list)
    embedder: str | None = None  # label of the query embeddings in ``queries``
    batch: bool = False
    server_timing: bool = False  # also record EXPLAIN ANALYZE execution time per query
    isolate_index: bool = False  # drop other vector indexes inside the (rolled back) txn
    progress: Progress | None = None
    previous: dict[str, int] = field(default_factory=dict)  # stage name -> run_id (same rep.)
    warnings: list[str] = field(default_factory=list)  # collected, printed by the caller
    extra: dict[str, Any] = field(default_factory=dict)  # free slot for stage-to-stage data
    # `pgeval run resume` (evaluator.run.resume): continue the interrupted run instead of creating
    # one; called with the results connection and the stage's params, returns the run's id
    reopen: Callable[[Any, dict], int] | None = None
    # the run-file reader of `pgeval run import` (evaluator.run.runs.import_run), which the
    # import stage attaches to the experiment: given by the pipeline, as run/ sits above stages/
    import_run: Callable[..., Any] | None = None

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def option(self, key: str, default: Any = None, cast: Callable[[str], Any] = str) -> Any:
        """This stage's option ``key`` cast with ``cast``; InputError naming --opt when bad."""
        from ..core.errors import InputError

        if key not in self.options:
            return default
        raw = self.options[key]
        try:
            return cast(raw)
        except (TypeError, ValueError):
            raise InputError(
                f"option {self.stage}:{key}={raw!r} is not a valid "
                f"{getattr(cast, '__name__', 'value')}",
                field=param("options"),
            ) from None

    def previous_roles(self) -> dict[int, Any]:
        """{run id: its role (``pgeval.stage_role``)} of the earlier stages' runs."""
        rows = self.results.execute(
            "SELECT run_id, pgeval.stage_role(stage, params) FROM pgeval.run "
            "WHERE run_id = ANY(%s)",
            (list(self.previous.values()),),
        ).fetchall()
        self.results.rollback()
        return dict(rows)

    def settings_for(self, prefixes: tuple[str, ...]) -> dict[str, str]:
        """The settings that apply to a stage: its extension's GUCs (``prefixes``, e.g.
        ``("hnsw.",)``) plus every core planner GUC (names without a dot)."""
        return {
            k: v
            for k, v in self.settings.items()
            if "." not in k or any(k.startswith(p) for p in prefixes)
        }


@runtime_checkable
class Stage(Protocol):
    """A stage runner. Register the class in :mod:`evaluator.kinds.registry`."""

    kind: str  # "exact", "hnsw", "ivfflat", "diskann", "bm25", "merge", ...
    score: str  # SCORE_DISTANCE or SCORE_SIMILARITY
    needs_embedding: bool  # the pipeline loads query embeddings when any stage needs them
    guc_prefixes: tuple[str, ...]  # extension GUCs this stage applies, e.g. ("hnsw.",)

    def prepare(self, ctx: StageContext) -> None:
        """Check configuration before any query of the experiment runs (raise errors.*)."""

    def run(self, ctx: StageContext, run_name: str) -> int:
        """Run every query, write pgeval.run/result/query_timing, return the run id."""


class BaseStage:
    """Defaults for :class:`Stage` implementations (subclass and override)."""

    kind = "base"
    score = SCORE_SIMILARITY
    needs_embedding = False
    guc_prefixes: tuple[str, ...] = ()
    # the keys of ``--opt STAGE:KEY=VALUE`` it reads, declared once: any other key is refused
    # before anything runs (:meth:`refuse_options`, from `run.configure.pipeline_config`)
    options: frozenset[str] = frozenset()

    @classmethod
    def refuse_options(cls, stage: str, keys: Any) -> None:
        """InputError naming the first of ``keys`` that is not one of :attr:`options`."""
        from ..core.errors import InputError

        known = ", ".join(sorted(cls.options)) or "none"
        for key in sorted(keys):
            if key not in cls.options:
                raise InputError(
                    f"unknown option {stage}:{key} (known: {known})", field=param("options")
                )

    @property
    def role(self) -> str:
        """What the kind is in a pipeline (exact, ann, keyword, merge, rerank, path, import), as
        :mod:`evaluator.kinds.registry` describes it; recorded in each run's params, where
        SQL's stage roles read it."""
        from ..kinds.registry import kind

        described = kind(self.kind)
        return described.role if described is not None else "path"

    def prepare(self, ctx: StageContext) -> None:
        return None

    def run(self, ctx: StageContext, run_name: str) -> int:  # pragma: no cover - abstract
        raise NotImplementedError
