"""The Python API: what the command line does, callable from a notebook or a script.

    import evaluator.api as pgeval

    pg = pgeval.connect()                       # the embedded server (or a DSN: connect("postgresql://..."))
    pg.init()
    pg.load_testset("cases.jsonl", name="kb-v1")
    pg.add_target("kb", table="chunks", id_column="chunk_id", vector_column="embedding")
    res = pg.run_pipeline(testset="kb-v1", target="kb", stages="exact,hnsw",
                          settings={"hnsw.ef_search": 40}, repeat=1)
    report = pg.stage_report(res.experiment)    # a StageReport; report.as_dict() is the JSON
    sw = pg.sweep(sample_queries=300, target="kb", stage="hnsw",   # no test set: query vectors
                  params={"hnsw.ef_search": [10, 20, 40, 80]})    # sampled from the table

Every method returns a dataclass (with ``as_dict()`` giving what ``--format json`` prints) or plain
dicts and lists; the figures are the command line's, read from the same SQL. Errors are the typed
errors of :mod:`evaluator.core.errors`; their messages name this API's parameters (``testset``,
``settings``, ``replace=True``), not the command line's options.
"""

from __future__ import annotations

import functools
import io
import re
from dataclasses import dataclass
from pathlib import Path

from .core.db import Database
from .core.errors import InputError, PgevalError

__all__ = ["Pgeval", "connect"]

# command-line option -> parameter of this API, where the name is not the option's own
_PARAMS = {
    "set": "settings",
    "opt": "options",
    "param": "params",
    "format": "format",
    "output": "format",
    "target": "target",
    "plot": "plot",
}
_FLAGS = {
    "replace",
    "allow-partial",
    "strict",
    "fresh",
    "batch",
    "server-timing",
    "isolate-index",
    "per-query",
    "by-type",
    "flagged",
    "plans",
}
_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


def _param(option: str) -> str:
    """'--id-column' -> 'id_column'; '--set' -> 'settings'."""
    name = option[2:] if option.startswith("--") else option
    return _PARAMS.get(name, name.replace("-", "_"))


def _in_message(match: re.Match) -> str:
    name = match.group(1)
    if name == "no-checksum":
        return "`checksum=False`"
    if name in _FLAGS:
        return f"`{_param(name)}=True`"
    return f"`{_param(name)}`"


def _renamed(exc: PgevalError) -> PgevalError:
    """The same error with the command line's option names replaced by this API's parameters."""
    if isinstance(exc, InputError):
        field = exc.field
        if field is not None and (field.startswith("--") or field.isupper()):
            field = _param(field.lower())
        return InputError(
            _OPTION.sub(_in_message, exc.detail), file=exc.file, line=exc.line, field=field
        )
    new = type(exc)(_OPTION.sub(_in_message, str(exc)))
    return new


def _api(method):
    """Errors of ``method`` name parameters, not options."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except PgevalError as exc:
            raise _renamed(exc) from None

    return wrapper


def _list(values, what: str) -> list[int] | None:
    if values is None:
        return None
    if isinstance(values, int):
        return [values]
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        raise InputError(f"'{values}' is not a list of cut-offs", field=what) from None


@dataclass
class Pgeval:
    """A connection to pgeval's database (the knowledge base and, unless ``results_dsn`` says
    otherwise, the results). Cheap: every method opens and closes its own connections."""

    database: Database

    # ---- setup ---------------------------------------------------------------------------------
    @_api
    def init(self):
        """Create or upgrade schema pgeval (`pgeval init`); returns the InitReport."""
        from .core.install import init

        return init(self.database)

    @_api
    def load_testset(
        self,
        path: str | Path,
        name: str,
        *,
        format: str | None = None,
        queries: str | Path | None = None,
        grade_map=None,
        replace: bool = False,
    ):
        """Load a test set file (JSONL, CSV, TREC qrels, BEIR folder) under ``name``; returns the
        LoadReport (`pgeval testset load`)."""
        from .testset import load

        with self.database.connect(autocommit=True) as conn:
            return load(
                conn,
                str(path),
                name,
                fmt=format,
                queries=None if queries is None else str(queries),
                grade_map=grade_map,
                replace=replace,
            )

    @_api
    def testsets(self) -> list[dict]:
        """The stored test sets with their counts (`pgeval testset list`)."""
        from .testset import list_testsets

        with self.database.connect(autocommit=True) as conn:
            return list_testsets(conn)

    @_api
    def add_target(
        self,
        name: str,
        *,
        table: str | None = None,
        schema: str | None = None,
        id_column: str | None = None,
        vector_column: str | None = None,
        text_column: str | None = None,
        distance: str | None = None,
        where: dict[str, str] | None = None,
        dimension: int | None = None,
        dimension_column: str | None = None,
        preset: str | None = None,
        knowledge_base_id: str | None = None,
        replace: bool = False,
    ):
        """Check a knowledge-base table in the catalog and store it as target ``name``
        (`pgeval target add`); returns an AddedTarget (target, vector indexes, warnings)."""
        from .target.add import add_target

        return add_target(
            self.database,
            name,
            table=table,
            schema=schema,
            id_column=id_column,
            vector_column=vector_column,
            text_column=text_column,
            distance=distance,
            where=where,
            dimension=dimension,
            dimension_column=dimension_column,
            preset=preset,
            knowledge_base_id=knowledge_base_id,
            replace=replace,
        )

    # ---- runs ----------------------------------------------------------------------------------
    @_api
    def run_pipeline(
        self,
        testset: str | None = None,
        stages: str | None = None,
        *,
        sample_queries: int | None = None,
        seed: int | None = None,
        queries_sql: str | None = None,
        queries_file: str | Path | None = None,
        target: str | None = None,
        settings=None,
        options=None,
        depth: int = 100,
        repeat: int = 3,
        embedder: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        api_key_env: str | None = None,
        reranker: str | None = None,
        name: str | None = None,
        batch: bool = False,
        server_timing: bool = False,
        isolate_index: bool = False,
        statement_timeout: str | None = "5min",
        checksum: bool = True,
        on_warning=None,
        progress_factory=None,
    ):
        """Run the stages (``"exact,hnsw"``; ``NAME=KIND`` allowed) ``repeat`` times as one
        experiment (`pgeval run pipeline`) on the queries of ``testset`` or, in its place, of a
        query-vector source: ``sample_queries=N`` (``seed=S``), ``queries_sql`` or
        ``queries_file`` (exactly one). ``settings``: ``{"hnsw.ef_search": 40}`` or
        ``["hnsw.ef_search=40"]``; ``options``: ``{"merge": {"k": 60}}`` or ``["merge:k=60"]``.
        Returns a PipelineResult (experiment, config_hash, runs, warnings)."""
        from .run.configure import pipeline_config
        from .run.pipeline import run_pipeline

        source = _source(testset, sample_queries, seed, queries_sql, queries_file)
        if not stages:
            raise InputError("`stages` required (e.g. stages='exact,hnsw')", field="stages")
        cfg = pipeline_config(
            testset=testset,
            stages=stages,
            target=target,
            settings=settings,
            options=options,
            depth=depth,
            repeat=repeat,
            embedder=embedder,
            base_url=base_url,
            dimensions=dimensions,
            api_key_env=api_key_env,
            reranker=reranker,
            name=name,
            batch=batch,
            server_timing=server_timing,
            isolate_index=isolate_index,
            statement_timeout=statement_timeout,
            checksum=checksum,
            queries=source,
        )
        return run_pipeline(
            self.database, cfg, progress_factory=progress_factory, on_warning=on_warning
        )

    @_api
    def resume(self, name: str, *, statement_timeout: str | None = None, on_warning=None):
        """Finish an interrupted experiment (`pgeval run resume`); returns a PipelineResult."""
        from .run.resume import resume_experiment

        return resume_experiment(
            self.database, name, statement_timeout=statement_timeout, on_warning=on_warning
        )

    @_api
    def import_run(
        self,
        path: str | Path,
        testset: str,
        name: str,
        *,
        format: str | None = None,
        replace: bool = False,
    ):
        """Import a TREC or JSONL run file (`pgeval run import`); returns the ImportReport."""
        from .run.runs import import_run

        with self.database.connect() as conn:
            return import_run(conn, str(path), testset, name, format, replace=replace)

    @_api
    def export_run(self, name: str, format: str = "trec", out: str | Path | None = None):
        """Write run ``name`` as TREC or JSONL (`pgeval run export`): to the file ``out``
        (atomically; returns the lines written), else returned as a string."""
        from .run.runs import export_to

        if out is not None:
            return export_to(self.database, name, format, str(out))
        buf = io.StringIO()
        export_to(self.database, name, format, None, buf)
        return buf.getvalue()

    @_api
    def runs(self, testset: str | None = None, experiment: str | None = None) -> list[dict]:
        """The stored runs (`pgeval run list`)."""
        from .run.runs import list_runs

        with self.database.connect(autocommit=True) as conn:
            return list_runs(conn, testset, experiment)

    @_api
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
        params=None,
        build=None,
        settings=None,
        k: int = 10,
        depth: int | None = None,
        repeat: int = 3,
        concurrency: int = 1,
        target_recall: float = 0.95,
        find: str | None = None,
        find_max: int | None = None,
        embedder: str | None = None,
        name: str | None = None,
        fresh: bool = False,
        index: str | None = None,
        isolate_index: bool = False,
        checksum: bool = True,
        statement_timeout: str | None = "5min",
        maintenance_work_mem: str | None = None,
        build_timeout: float = 1800,
        on_warning=None,
        on_point=None,
    ):
        """Recall against exact search and latency over a grid (`pgeval sweep`) on the queries
        of ``testset`` or of a query-vector source (``sample_queries=N``, ``seed=S``,
        ``queries_sql``, ``queries_file``: exactly one). ``params`` and ``build``:
        ``{"hnsw.ef_search": [10, 20, 40]}`` or ``["hnsw.ef_search=10,20,40"]``;
        ``maintenance_work_mem`` None sizes it to the index; ``find="hnsw.ef_search"`` finds the
        cheapest value reaching ``target_recall`` (``find_max``: the largest tried). Returns a
        SweepResult (points, recommendation with its ``why``, ``finds``, ...)."""
        from .dba.sweep import SweepConfig, run_sweep
        from .run.configure import settings_items
        from .stages import gucs

        source = _source(testset, sample_queries, seed, queries_sql, queries_file)
        if not target:
            raise InputError("`target` required", field="target")
        if not stage:
            raise InputError("`stage` required (e.g. stage='hnsw')", field="stage")
        cfg = SweepConfig(
            testset=testset or "",  # a query source names its query set
            queries=source,
            target=target,
            stage=stage,
            params=_grid(params),
            build=_grid(build),
            settings=gucs.parse(settings_items(settings)),
            k=k,
            depth=depth,
            repeat=repeat,
            concurrency=concurrency,
            target_recall=target_recall,
            find=find,
            find_max=find_max,
            embedder=embedder,
            name=name,
            fresh=fresh,
            isolate_index=isolate_index,
            index=index,
            checksum=checksum,
            statement_timeout=statement_timeout,
            maintenance_work_mem=maintenance_work_mem,
            build_timeout_s=build_timeout,
        )
        return run_sweep(self.database, cfg, on_point=on_point, on_warning=on_warning)

    @_api
    def advise(
        self,
        target: str,
        testset: str | None = None,
        *,
        sample_queries: int | None = None,
        seed: int | None = None,
        queries_sql: str | None = None,
        queries_file: str | Path | None = None,
        target_recall: float = 0.95,
        designs=None,
        build=None,
        settings=None,
        max_p95_ms: float | None = None,
        max_index_mb: float | None = None,
        max_build_s: float | None = None,
        concurrency: int = 1,
        k: int = 10,
        repeat: int = 1,
        find_max: int | None = None,
        embedder: str | None = None,
        checksum: bool = True,
        statement_timeout: str | None = "5min",
        maintenance_work_mem: str | None = None,
        build_timeout: float = 1800,
        fresh: bool = False,
        on_design=None,
        on_warning=None,
    ):
        """Which index design to have, built how, queried how (`pgeval advise`): one stored
        sweep per design x build (``designs``: ANN stage kinds, default every one the server
        supports; ``build``: ``["hnsw:m=8,16"]``), each finding the cheapest setting reaching
        ``target_recall``, then the recommendation within the budgets (``max_p95_ms``,
        ``max_index_mb``, ``max_build_s``) with its DDL and settings SQL. Returns an
        AdviseResult; ``as_dict()`` is what ``--format json`` prints."""
        from .dba.advise import AdviseConfig, run_advise
        from .run.configure import settings_items
        from .stages import gucs

        source = _source(testset, sample_queries, seed, queries_sql, queries_file)
        cfg = AdviseConfig(
            target=target,
            testset=testset or "",
            queries=source,
            target_recall=target_recall,
            designs=tuple([designs] if isinstance(designs, str) else designs or ()),
            build=_grid(build),
            settings=gucs.parse(settings_items(settings)),
            max_p95_ms=max_p95_ms,
            max_index_mb=max_index_mb,
            max_build_s=max_build_s,
            concurrency=concurrency,
            k=k,
            repeat=repeat,
            find_max=find_max,
            embedder=embedder,
            checksum=checksum,
            statement_timeout=statement_timeout,
            maintenance_work_mem=maintenance_work_mem,
            build_timeout_s=build_timeout,
            fresh=fresh,
        )
        return run_advise(self.database, cfg, on_design=on_design, on_warning=on_warning)

    # ---- numbers -------------------------------------------------------------------------------
    @_api
    def metrics(
        self,
        run: str,
        *,
        measures: list[str] | None = None,
        k=None,
        ndcg_k=None,
        mrr_k=None,
        rel: int = 1,
        per_query: bool = False,
        by_type: bool = False,
        flagged: bool = False,
        plans: bool = False,
        domain_discount: float = 0.0,
        min_score: float | None = None,
        strict: bool = False,
        allow_partial: bool = False,
    ):
        """Means over valid queries of run ``run`` (`pgeval metrics`). ``measures``: names such
        as ``["recall@10", "ndcg@10"]``, else the ones the cut-offs ``k``, ``ndcg_k``, ``mrr_k``
        ask for (default: the command's). Returns an Evaluation (``summary``, ``levels``,
        ``counts``, ``per_query``, ``by_type``, ``flagged``, ``plans``)."""
        from .measure.metrics import evaluate_in, measures_for

        if measures is None:
            measures = measures_for(_list(k, "k"), _list(ndcg_k, "ndcg_k"), _list(mrr_k, "mrr_k"))
        return evaluate_in(
            self.database,
            run,
            list(measures),
            rel=rel,
            domain_discount=domain_discount,
            with_per_query=per_query,
            with_by_type=by_type,
            with_flagged=flagged or plans,
            strict=strict,
            allow_partial=allow_partial,
            min_score=min_score,
            plans=plans,
        )

    @_api
    def stage_report(
        self,
        experiment: str,
        *,
        k: int = 10,
        rel: int = 1,
        repetition: int | str | None = None,
        worst: int = 10,
        strict: bool = False,
        allow_partial: bool = False,
    ):
        """The stages of ``experiment`` side by side and the loss attribution
        (`pgeval stage-report`); ``repetition`` None means all (means and spread). Returns a
        StageReport; ``as_dict()`` is what ``--format json`` prints."""
        from .measure.stage_report import report

        return report(
            self.database,
            experiment,
            k=k,
            rel=rel,
            repetition=repetition,
            worst=worst,
            allow_partial=allow_partial,
            strict=strict,
        )

    @_api
    def compare(
        self,
        baseline: str,
        candidate: str,
        *,
        measures: list[str] | None = None,
        rel: int = 1,
        alpha: float = 0.05,
        permutations: int = 10_000,
        seed: int = 0,
        top: int = 10,
        moved_by: str | None = None,
        allow_partial: bool = False,
    ):
        """Candidate against baseline (runs, experiments or saved JSON reports), query by query,
        with significance (`pgeval compare`); returns a Comparison."""
        from .reporting.compare import compare_specs

        return compare_specs(
            self.database,
            baseline,
            candidate,
            measures=measures,
            rel=rel,
            allow_partial=allow_partial,
            alpha=alpha,
            permutations=permutations,
            seed=seed,
            top=top,
            moved_by=moved_by,
        )

    @_api
    def gate(
        self,
        baseline: str,
        candidate: str,
        rules: str | Path | None = None,
        *,
        rel: int = 1,
        allow_partial: bool = False,
    ):
        """The release gate (`pgeval gate`): a GateResult whose ``passed`` says whether every
        applicable rule passed (nothing is raised on failure). ``rules``: a TOML file, None for
        the built-in rules."""
        from .reporting.gate import gate

        return gate(self.database, baseline, candidate, rules, rel=rel, allow_partial=allow_partial)


def _source(testset, sample_queries, seed, queries_sql, queries_file):
    """The query-vector source of the keywords (None: ``testset``); exactly one is given."""
    from .testset.query_source import from_options

    return from_options(
        testset=testset,
        sample=sample_queries,
        seed=seed,
        queries_sql=queries_sql,
        queries_file=None if queries_file is None else str(queries_file),
    )


def _grid(values) -> tuple:
    """``{"hnsw.ef_search": [10, 20]}`` -> ``("hnsw.ef_search=10,20",)``; a list passes."""
    if values is None:
        return ()
    if isinstance(values, dict):
        return tuple(
            f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
            for k, v in values.items()
        )
    if isinstance(values, str):
        return (values,)
    return tuple(values)


def connect(
    dsn: str | None = None, *, datadir: str | Path | None = None, results_dsn: str | None = None
) -> Pgeval:
    """pgeval on the database ``dsn``; without one, resolved as the command line does
    (``PGEVAL_DSN``, the libpq ``PG*`` variables, else the embedded server in ``datadir``, started
    on first use). Nothing connects until a method is called."""
    return Pgeval(Database.resolve(dsn, None if datadir is None else str(datadir), results_dsn))
