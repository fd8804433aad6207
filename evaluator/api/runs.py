"""The API's run methods: pipelines, resume, run files, sweeps (`pgeval run ...`, `sweep`)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..core.errors import InputError, param
from ._keywords import query_source

if TYPE_CHECKING:
    from ..core.db import Database
    from ..run.configure import PipelineConfig
    from ..run.groups import GroupPipelineResult
    from ..run.pipeline import PipelineResult
    from ..run.runs import ImportReport
    from ..run.tune.result import TuneResult
    from ..targets.groups import Group
    from ..tuning.sweep import SweepConfig, SweepResult
    from ..tuning.sweep.grid import Point
    from ..tuning.sweep.groups import GroupSweepResult
    from ..tuning.sweep.shapes import ShapeSweepResult

# the query-vector source of a method's keywords: sample_queries, seed, queries_sql, queries_file
_Source = tuple[int | None, int | None, str | None, str | Path | None]


class RunMethods:
    database: Database

    def run_pipeline(
        self,
        testset: str | None = None,
        stages: str | None = None,
        *,
        sample_queries: int | None = None,
        seed: int | None = None,
        queries_sql: str | None = None,
        queries_file: str | Path | None = None,
        on_warning: Callable[[str], None] | None = None,
        progress_factory: Callable[[str, int], Any] | None = None,
        **options: Any,
    ) -> PipelineResult:
        """Run the stages (``"exact,hnsw"``; ``NAME=KIND`` allowed) ``repeat`` times as one
        experiment (`pgeval run pipeline`) on the queries of ``testset`` or, in its place, of a
        query-vector source: ``sample_queries=N`` (``seed=S``), ``queries_sql`` or
        ``queries_file`` or ``captured`` (a set of `pgeval queries capture`; exactly one).
        ``options`` are the command's other options by their names, defaults as the command's
        (``evaluator.run.configure.PIPELINE_DEFAULTS``):
        ``target``, ``settings`` (``{"hnsw.ef_search": 40}`` or ``["hnsw.ef_search=40"]``),
        ``options`` (``{"merge": {"k": 60}}`` or ``["merge:k=60"]``), ``depth``, ``repeat``,
        ``embedder``, ``base_url``, ``dimensions``, ``api_key_env``, ``reranker``, ``name``,
        ``batch``, ``server_timing``, ``isolate_index``, ``statement_timeout``, ``checksum``.
        Returns a PipelineResult (experiment, config_hash, runs, warnings; ``as_dict()``)."""
        from ..run.pipeline import run_pipeline

        cfg = _pipeline(testset, stages, (sample_queries, seed, queries_sql, queries_file), options)
        return run_pipeline(
            self.database, cfg, progress_factory=progress_factory, on_warning=on_warning
        )

    def run_pipeline_groups(
        self,
        testset: str | None = None,
        stages: str | None = None,
        *,
        group_by: str,
        max_groups: int | None = None,
        group_queries: int | None = None,
        k: int = 10,
        sample_queries: int | None = None,
        seed: int | None = None,
        queries_sql: str | None = None,
        queries_file: str | Path | None = None,
        on_group: Callable[[int, int, Group], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        progress_factory: Callable[[str, int], Any] | None = None,
        **options: Any,
    ) -> GroupPipelineResult:
        """The pipeline once per group of column ``group_by`` (`pgeval run pipeline
        --group-by`): each of the ``max_groups`` largest and smallest groups searched as the
        application scopes it (``WHERE group_by = value``), rows of it as queries
        (``sample_queries`` spread over the groups, or ``group_queries`` each), one experiment
        ``NAME/column=value`` per group. Returns a GroupPipelineResult: per group and ANN stage,
        recall@``k``, short lists and p95, worst group first (``as_dict()``). ``options`` as
        :meth:`run_pipeline`'s."""
        from ..run.groups import DEFAULT_MAX_GROUPS, run_pipeline_groups

        cfg = _pipeline(testset, stages, (sample_queries, seed, queries_sql, queries_file), options)
        return run_pipeline_groups(
            self.database,
            cfg,
            group_by,
            k=k,
            max_groups=max_groups or DEFAULT_MAX_GROUPS,
            group_queries=group_queries,
            on_group=on_group,
            on_warning=on_warning,
            progress_factory=progress_factory,
        )

    def resume(
        self,
        name: str,
        *,
        statement_timeout: str | None = None,
        on_warning: Callable[[str], None] | None = None,
        progress_factory: Callable[[str, int], Any] | None = None,
    ) -> PipelineResult:
        """Finish an interrupted experiment (`pgeval run resume`); returns a PipelineResult."""
        from ..run.resume import resume_experiment

        return resume_experiment(
            self.database,
            name,
            statement_timeout=statement_timeout,
            on_warning=on_warning,
            progress_factory=progress_factory,
        )

    def import_run(
        self,
        path: str | Path,
        testset: str,
        name: str,
        *,
        format: str | None = None,
        replace: bool = False,
        on_progress: Callable[[int, int, str], None] | None = None,
        score: str | None = None,
    ) -> ImportReport:
        """Import a TREC or JSONL run file (`pgeval run import`); returns the ImportReport.
        ``on_progress(done, total, phase)`` as the file is read; ``score``: "distance" or
        "similarity" (None: what the file says, docs/pipeline.md "Score direction")."""
        from ..run.runs import import_run

        with self.database.connect() as conn:
            return import_run(
                conn,
                str(path),
                testset,
                name,
                format,
                replace=replace,
                on_progress=on_progress,
                score=score,
            )

    def export_run(
        self,
        name: str,
        format: str = "trec",
        out: str | Path | None = None,
        *,
        stream: IO[str] | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> int | str:
        """Write run ``name`` as TREC or JSONL (`pgeval run export`): to the file ``out``
        (atomically) or the text stream ``stream``, returning the lines written; else returned
        as a string. ``on_note``: told when a TREC file's scores are ranks."""
        from ..run.runs import export_to

        if out is not None or stream is not None:
            where = None if out is None else str(out)
            return export_to(self.database, name, format, where, stream, on_note)
        buf = io.StringIO()
        export_to(self.database, name, format, None, buf, on_note)
        return buf.getvalue()

    def tune(
        self,
        experiment: str,
        stage: str,
        grid: list[str] | None = None,
        *,
        metric: str = "ndcg@10",
        folds: int = 5,
        seed: int = 0,
        repetition: int = 1,
        rel: int = 1,
        jobs: int = 2,
        name: str | None = None,
        store: bool = True,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> TuneResult:
        """Tune the merge or rerank ``stage`` of ``experiment`` on its stored lists
        (`pgeval tune`): ``grid`` as ``["merge:k=10,60", "merge:weights=[1,0.5],[1,1]"]``
        (None: the default grid), every configuration measured in SQL, the choice
        cross-validated over ``folds``; the in-sample pick stored as run ``name`` (default
        ``EXPERIMENT.STAGE.tuned``) unless ``store`` is False. ``on_progress(done, total)``."""
        from ..run.tune.tune import tune

        return tune(
            self.database,
            experiment,
            stage,
            list(grid or []),
            metric=metric,
            folds=folds,
            seed=seed,
            repetition=repetition,
            rel=rel,
            jobs=jobs,
            name=name,
            store=store,
            on_progress=on_progress,
        )

    def runs(self, testset: str | None = None, experiment: str | None = None) -> list[dict]:
        """The stored runs (`pgeval run list`)."""
        from ..run.runs import list_runs

        with self.database.connect(autocommit=True) as conn:
            return list_runs(conn, testset, experiment)

    def delete_run(self, name: str) -> tuple[str, bool] | None:
        """Delete run ``name`` (`pgeval run delete`); returns (experiment, is a sweep) when the
        run belonged to an experiment, which is now incomplete, else None."""
        from ..run.runs import delete_run

        with self.database.connect() as conn:
            return delete_run(conn, name)

    def delete_experiment_runs(self, experiment: str) -> dict:
        """Delete experiment ``experiment``, every run of it and their results (`pgeval run
        delete --experiment`); returns ``{"experiment", "runs", "sweeps_interrupted"}``."""
        from ..run.runs import delete_experiment

        with self.database.connect() as conn:
            return delete_experiment(conn, experiment)

    def sweep(
        self,
        testset: str | None = None,
        target: str | None = None,
        stage: str | None = None,
        *,
        sample_queries: int | None = None,
        seed: int | None = None,
        queries_sql: str | None = None,
        queries_file: str | Path | None = None,
        on_warning: Callable[[str], None] | None = None,
        on_point: Callable[[Point, int, str], None] | None = None,
        on_start: Callable[[int, int, int], None] | None = None,
        on_ground_truth: Callable[[int, int | None], None] | None = None,
        on_find: Callable[[Point, float | None], None] | None = None,
        **options: Any,
    ) -> SweepResult:
        """Recall against exact search and latency over a grid (`pgeval sweep`) on the queries
        of ``testset`` or of a query-vector source (``sample_queries=N``, ``seed=S``,
        ``queries_sql``, ``queries_file``: exactly one). ``options`` are the command's other
        options by their names, defaults as the command's
        (``evaluator.tuning.sweep.configure.SWEEP_DEFAULTS``): ``params`` and ``build``
        (``{"hnsw.ef_search": [10, 20, 40]}`` or ``["hnsw.ef_search=10,20,40"]``), ``settings``,
        ``k``, ``depth``, ``repeat``, ``concurrency``, ``target_recall``, ``find``
        (``"hnsw.ef_search"``: the cheapest value reaching ``target_recall``), ``find_max``,
        ``embedder``, ``name``, ``fresh``, ``index``, ``plan`` (``"custom"`` or ``"generic"``:
        the planner's own plan measured, whatever serves it), ``isolate_index``, ``checksum``,
        ``statement_timeout``, ``maintenance_work_mem`` (None sizes it to the index),
        ``build_timeout`` (seconds). The callbacks are those of
        :class:`evaluator.tuning.sweep.session.Callbacks`. Returns a SweepResult (points, recommendation
        with its ``why``, ``finds``, ...; ``as_dict()``)."""
        from ..tuning.sweep.session import Callbacks, Session

        cfg = _sweep(
            testset, target, stage, (sample_queries, seed, queries_sql, queries_file), options
        )
        calls = Callbacks(on_warning, on_point, on_ground_truth, on_find, on_start)
        return Session.run(self.database, cfg, callbacks=calls)

    def group_column(
        self, target: str | None, group_by: str | None = None, group_queries: int | None = None
    ) -> str | None:
        """The column a sweep or pipeline of ``target`` groups by: ``group_by``, else the
        target's own (`target add --group-by`), else None (the whole table, or no target: then
        ``group_queries``, queries per group, is refused)."""
        from ..targets.groups import column_for, ungrouped

        column = column_for(self.database, target, group_by) if target else None
        if column is None:
            ungrouped(group_queries)
        return column

    def sweep_groups(
        self,
        testset: str | None = None,
        target: str | None = None,
        stage: str | None = None,
        *,
        group_by: str,
        max_groups: int | None = None,
        group_queries: int | None = None,
        sample_queries: int | None = None,
        seed: int | None = None,
        queries_sql: str | None = None,
        queries_file: str | Path | None = None,
        on_group: Callable[[int, int, Group, str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        on_point: Callable[[Point, int, str], None] | None = None,
        **options: Any,
    ) -> GroupSweepResult:
        """Recall per group of column ``group_by`` (`pgeval sweep --group-by`): each of the
        ``max_groups`` largest and smallest groups searched as the application scopes it
        (``WHERE group_by = value``), ``sample_queries`` spread over the groups (or
        ``group_queries`` each), exact ground truth within the group, one stored sweep per
        group; the point where the worst group reaches ``target_recall``; with ``find``, the kind's
        iterative scans searched as settings too (``scan_modes``: each mode's least value,
        ``scan_mode`` the least work across them, ``unreachable`` the groups none brings to the
        target), else groups that miss measured again with the kind's iterative scan. ``options`` as
        :meth:`sweep`'s. Returns a GroupSweepResult (``groups`` worst first, ``points``,
        ``recommendation``; ``as_dict()``)."""
        from ..tuning.sweep.groups import DEFAULT_MAX_GROUPS, run_groups

        cfg = _sweep(
            testset, target, stage, (sample_queries, seed, queries_sql, queries_file), options
        )
        return run_groups(
            self.database,
            cfg,
            group_by,
            max_groups=max_groups or DEFAULT_MAX_GROUPS,
            group_queries=group_queries,
            on_group=on_group,
            on_warning=on_warning,
            on_point=on_point,
        )

    def sweep_shapes(
        self,
        target: str | None = None,
        stage: str | None = None,
        *,
        captured: str,
        on_shape: Callable[..., None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        on_point: Callable[[Point, int, str], None] | None = None,
        **options: Any,
    ) -> ShapeSweepResult:
        """Each shape of captured set ``captured`` measured as the application sent it
        (`pgeval sweep --captured SET`): its own statement, LIMIT and per-query values, its exact
        twin the ground truth, one stored sweep per shape; per shape recall, p95 and share of
        the searches sent, the recall weighted by those shares, and the verdict (with ``find``:
        the value every shape reaches the target at, or the shapes that reach it nowhere).
        ``options`` as :meth:`sweep`'s. Returns a ShapeSweepResult (``as_dict()``)."""
        from ..tuning.sweep.shapes import run_shapes

        source = tuple(options.pop(o, None) for o in _SOURCE)  # (another source is refused)
        cfg = _sweep(None, target, stage, source, {**options, "captured": captured})
        return run_shapes(
            self.database, cfg, on_shape=on_shape, on_warning=on_warning, on_point=on_point
        )

    def sweep_plot(self, result: SweepResult, path: str | Path, *, title: str) -> Path:
        """Write the PNG of ``result`` (a SweepResult): recall@K against p95 latency with the
        Pareto front and the recommendation (`pgeval sweep --plot`); returns its path."""
        from ..tuning.sweep import plot

        return plot.write(path, result.operating_points, k=result.k, title=title)


def _pipeline(
    testset: str | None, stages: str | None, source: _Source, options: dict[str, Any]
) -> PipelineConfig:
    """The pipeline's configuration of :meth:`RunMethods.run_pipeline`'s keywords (``source``:
    sample_queries, seed, queries_sql, queries_file)."""
    from ..run.configure import pipeline_config

    queries = query_source(
        testset, *source, captured=options.pop("captured", None), window=options.pop("window", None)
    )
    if not stages:
        raise InputError(
            f"{param('stages')} required (e.g. stages='exact,hnsw')", field=param("stages")
        )
    return pipeline_config(testset=testset, stages=stages, queries=queries, **options)


_SOURCE = ("sample_queries", "seed", "queries_sql", "queries_file")


def _sweep(
    testset: str | None,
    target: str | None,
    stage: str | None,
    source: _Source,
    options: dict[str, Any],
) -> SweepConfig:
    """The sweep's configuration of :meth:`RunMethods.sweep`'s keywords."""
    from ..tuning.sweep.configure import sweep_config

    queries = query_source(
        testset, *source, captured=options.pop("captured", None), window=options.pop("window", None)
    )
    if not target:
        raise InputError(f"{param('target')} required", field=param("target"))
    if not stage:
        raise InputError(f"{param('stage')} required (e.g. stage='hnsw')", field=param("stage"))
    return sweep_config(testset=testset, queries=queries, target=target, stage=stage, **options)
