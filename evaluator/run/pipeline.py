"""`pgeval run pipeline`: one experiment = the stages in order under one configuration, repeated
``repeat`` times; every run linked to the experiment (pgeval.experiment.config holds everything:
stages, settings, depth, embedder and dimension, target spec and filters, options).

Order of work — nothing is written until the whole configuration checks out:
1. resolve the test set and target; parse stages, settings (pg_settings) and options;
2. make sure query embeddings exist for the embedder (computed and stored once when missing);
3. ``prepare`` every stage (dimension check, plan check with EXPLAIN, trap warnings);
4. insert the experiment, then for each repetition run the stages in order, each stage seeing
   the run ids of the earlier stages of the same repetition in ``ctx.previous``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from ..core.db import Database
from ..core.errors import Conflict, InputError, param
from ..core.install import ensure_installed
from ..core.warnings_once import once
from ..kinds import registry
from ..stages import gucs
from ..stages.base import StageContext, run_name
from ..testset.catalog import resolve_testset
from .configure import PipelineConfig
from .experiment_scope import experiment_scope
from .runs import import_run


@dataclass
class PipelineResult:
    experiment: str
    experiment_id: int
    config_hash: str
    runs: list[dict]
    warnings: list[str]

    def as_dict(self) -> dict:
        """What `pgeval run pipeline --format json` prints: the runs under the experiment."""
        return {
            "experiment": self.experiment,
            "config_hash": self.config_hash,
            "warnings": self.warnings,
            "rows": self.runs,
        }


def default_name(testset: str, target: str | None) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{testset}-{target or 'pipeline'}-{stamp}"


def stage_queries(
    results: Any,
    testset: str,
    tid: int,
    stages: Any,
    embedder: str | None = None,
    embedder_options: dict | None = None,
    on_embed: Callable[..., Any] | None = None,
) -> Any:
    """(queries, embedder label, dimension) of the test set for ``stages`` ((name, kind, stage)
    triples): embedded by ``embedder`` (default precomputed) when a stage needs them."""
    from ..providers.embedders import parse, storage

    if not any(s.needs_embedding for _, _, s in stages):
        return storage.testset_queries(results, tid), None, None
    emb = parse(embedder or "precomputed", **(embedder_options or {}))
    rep = storage.ensure(results, testset, emb, on_batch=on_embed)
    return storage.load(results, tid, emb.label), emb.label, rep.dimension


def _claim_name(results: Any, cfg: PipelineConfig, stages: Any) -> str:
    """The experiment's name: ``--name`` (refused when an experiment or a run of it exists), else
    a default one."""
    name = cfg.name or default_name(cfg.testset, cfg.target)
    if (
        cfg.name
        and results.execute("SELECT 1 FROM pgeval.experiment WHERE name = %s", (name,)).fetchone()
    ):
        raise Conflict(f"an experiment named '{name}' exists (choose another {param('name')})")
    if cfg.name:  # a run it did not create is never adopted: refuse before any work
        refuse_taken_runs(results, name, [n for n, _, _ in stages], cfg.repeat)
    results.rollback()
    return name


def _experiment_config(
    cfg: PipelineConfig,
    testset_hash: str,
    stages: Any,
    settings: dict,
    options: dict,
    label: str | None,
    dim: int | None,
    target: Any,
    qinfo: dict | None,
) -> dict:
    """What the experiment row records as its configuration (and the fingerprint hashes); the
    live services its stages call are added once the stages are prepared."""
    config = {
        "testset": cfg.testset,
        "testset_hash": testset_hash,
        "stages": [{"name": n, "kind": k} for n, k, _ in stages],
        "settings": settings,
        "options": options,
        "depth": cfg.depth,
        "repeat": cfg.repeat,
        "embedder": label,
        "dimension": dim,
        "target": None if target is None else {"name": target.name, **target.spec()},
        "filters": None if target is None else target.filter_literals(),
        "batch": cfg.batch,
        "server_timing": cfg.server_timing,
        "isolate_index": cfg.isolate_index,
    }
    if qinfo is not None:
        config["queries"] = qinfo
    return config


def capture_fingerprint(
    kb: Any, target: Any, settings: dict, config: dict, *, checksum: bool, cache: Any
) -> dict:
    """The configuration fingerprint (evaluator/table/fingerprint.py) of an experiment recorded as
    ``config`` on ``target``: catalog + ``config`` (the pipeline's, and resume's check)."""
    from ..table import fingerprint as fpmod

    return fpmod.capture(
        kb,
        target,
        settings=settings,
        embedder=config.get("embedder"),
        dimension=config.get("dimension"),
        testset_hash=config.get("testset_hash"),
        testset_name=config.get("testset"),
        checksum=checksum,
        cache=cache,
        extra=config,
    )


def _fingerprint(
    database: Database,
    results: Any,
    kb: Any,
    checksum: bool,
    target: Any,
    settings: dict,
    config: dict,
) -> dict:
    """The configuration fingerprint: catalog + ``config``; ``config`` alone for stages that
    read no knowledge-base table (import, merge of imports)."""
    from ..table import fingerprint as fpmod
    from ..table.data_checksum import ChecksumCache

    if target is not None:
        cache = ChecksumCache(results, database)
        return capture_fingerprint(kb, target, settings, config, checksum=checksum, cache=cache)
    hashed, shown = fpmod.measurement(config)
    return {
        "fingerprint_version": fpmod.FINGERPRINT_VERSION,
        "testset": {"hash": config["testset_hash"]},
        "measurement": hashed,
        "info": {"testset": config["testset"], "config": shown},
    }


def experiment_context(
    results: Any,
    kb: Any,
    config: dict,
    target: Any,
    tid: int,
    experiment: tuple[str, int | None],
    settings: dict,
    queries: list,
) -> StageContext:
    """The context every stage's own starts from, as the experiment's ``config`` records it
    (the pipeline's, and resume's from the stored one); ``experiment``: (name, id or None).
    Sampled queries: one row more, their own chunk dropped."""
    base = StageContext(
        kb=kb,
        results=results,
        target=target,
        testset=config["testset"],
        testset_id=tid,
        experiment=experiment[0],
        experiment_id=experiment[1],
        depth=config["depth"],
        settings=settings,
        queries=queries,
        embedder=config.get("embedder"),
        batch=config.get("batch", False),
        server_timing=config.get("server_timing", False),
        isolate_index=config.get("isolate_index", False),
    )
    if (config.get("queries") or {}).get("own_chunk_removed"):
        base = replace(base, depth=config["depth"] + 1, extra={"exclude_own": True})
    return base


def run_pipeline(
    database: Database,
    cfg: PipelineConfig,
    *,
    progress_factory: Callable[..., Any] | None = None,
    on_warning: Callable[..., Any] | None = None,
    on_embed: Callable[..., Any] | None = None,
) -> PipelineResult:
    """Run ``cfg``; ``progress_factory(stage, repetition)`` returns a Progress (or None)."""
    from ..table import fingerprint as fpmod
    from ..targets import targets

    if cfg.depth < 1:
        raise InputError(f"{param('depth')} must be >= 1", field=param("depth"))
    if cfg.repeat < 1:
        raise InputError(f"{param('repeat')} must be >= 1", field=param("repeat"))
    parsed = registry.parse_stages(cfg.stages)
    stages = [(name, kind, registry.get(kind)) for name, kind in parsed]
    gucs.check_stages(cfg.settings, [name for name, _ in parsed])  # STAGE:GUC=VALUE
    options = {name: dict(v) for name, v in cfg.options.items()}
    qinfo = None
    if cfg.queries is not None:  # query vectors without judgements: a query set
        from ..ground_truth.exact_stage import query_set

        cfg, qinfo = query_set(database, cfg)
    # least privilege: no transaction on the knowledge base writes (but --isolate-index's drops)
    with (
        database.connect() as results,
        database.connect(results=False, read_only=not cfg.isolate_index) as kb,
    ):
        ensure_installed(results)  # schema pgeval at this pgeval's revision
        tid, testset_hash = resolve_testset(results, cfg.testset)
        target = targets.load(results, cfg.target) if cfg.target else None
        if target is not None and cfg.group is not None:
            target = target.scoped(*cfg.group)
        # the target's own settings (a preset's: WeKnora's ef_search, ...) unless --set says
        settings = gucs.validate(kb, {**(target.settings if target else {}), **cfg.settings})
        settings = gucs.with_statement_timeout(kb, settings, cfg.statement_timeout)
        kb.rollback()
        queries, label, dim = stage_queries(
            results, cfg.testset, tid, stages, cfg.embedder, cfg.embedder_options, on_embed
        )
        name = _claim_name(results, cfg, stages)
        config = _experiment_config(
            cfg, testset_hash, stages, settings, options, label, dim, target, qinfo
        )
        base = experiment_context(results, kb, config, target, tid, (name, None), settings, queries)
        contexts = prepare_contexts(base, stages, options)
        warnings = [w for c in contexts.values() for w in c.warnings]
        for w in warnings:
            if on_warning:
                on_warning(w)
        services = {n: c.extra["service"] for n, c in contexts.items() if "service" in c.extra}
        if services:  # live services (stages/service.py): URL, preset, body, paths; no key
            config["services"] = services
        fingerprint = _fingerprint(database, results, kb, cfg.checksum, target, settings, config)
        kb.rollback()
        if target is not None:
            from ..ground_truth.exact_stage import offer

            exact = {n: contexts[n] for n, k, _ in stages if k == "exact"}
            offer(exact, config, fingerprint.get("data"), settings)
        config_hash = fpmod.config_hash(fingerprint)
        exp_id, name = _insert_experiment(
            results,
            name,
            cfg.name is None,
            (tid, cfg.target, json.dumps(config), config_hash, json.dumps(fingerprint)),
            stage_names=[n for n, _, _ in stages],
            repeat=cfg.repeat,
        )
        for ctx in contexts.values():
            ctx.experiment = name
        with experiment_scope(results, exp_id, name, on_warning):  # lock; failed/complete
            runs = run_repetitions(
                name,
                stages,
                contexts,
                cfg.repeat,
                warnings,
                on_warning,
                lambda stage, ctx, rep, previous: (
                    execute_stage(stage, ctx, exp_id, rep, previous, fingerprint, progress_factory),
                    {},
                ),
            )
        add_summaries(results, runs)
    return PipelineResult(name, exp_id, config_hash, runs, warnings)


def run_repetitions(
    experiment: str,
    stages: Any,
    contexts: dict[str, StageContext],
    repeat: int,
    warnings: list[str],
    on_warning: Callable[..., Any] | None,
    run_stage: Any,
) -> list[dict]:
    """The one repetition x stage loop (pipeline and resume): for each repetition, the stages in
    order, each seeing the run ids of the earlier stages of its repetition (``previous``).
    ``run_stage(stage, ctx, rep, previous)`` returns (run id, extra keys of the run's row)."""
    runs: list[dict] = []
    for rep in range(1, repeat + 1):
        previous: dict[str, int] = {}
        for sname, kind, stage in stages:
            run_id, extra = run_stage(stage, contexts[sname], rep, previous)
            previous[sname] = run_id
            runs.append(
                {
                    "run": run_name(experiment, sname, rep),
                    "run_id": run_id,
                    "stage": sname,
                    "kind": kind,
                    "repetition": rep,
                    **extra,
                }
            )
            add_warnings(contexts[sname], warnings, on_warning)
    return runs


def stage_run_names(experiment: str, stage_names: list[str], repeat: int) -> list[str]:
    """The names of every run experiment ``experiment`` will create."""
    return [run_name(experiment, s, rep) for rep in range(1, repeat + 1) for s in stage_names]


def taken_runs(
    results: Any, experiment: str, stage_names: list[str], repeat: int
) -> list[tuple[str, str | None, str]]:
    """(name, experiment or None, test set) of existing runs bearing a name that experiment
    ``experiment`` would give one of its stage runs."""
    rows = results.execute(
        "SELECT r.name, e.name, t.name FROM pgeval.run r JOIN pgeval.testset t USING (testset_id)"
        " LEFT JOIN pgeval.experiment e USING (experiment_id) WHERE r.name = ANY(%s) "
        "ORDER BY r.run_id",
        (stage_run_names(experiment, stage_names, repeat),),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def foreign_run_message(run: str, owner: str | None, testset: str, experiment: str) -> str:
    whose = (
        f"a run of experiment '{owner}'" if owner else "an imported run"
    ) + f" of test set '{testset}'"
    return (
        f"run '{run}' exists ({whose}) and experiment '{experiment}' would write one of its "
        f"stage runs under that name: a run is never adopted by an experiment that did not "
        f"create it (choose another --name, or delete that run: `pgeval run delete {run}`)"
    )


def refuse_taken_runs(results: Any, experiment: str, stage_names: list[str], repeat: int) -> None:
    taken = taken_runs(results, experiment, stage_names, repeat)
    if taken:
        raise Conflict(foreign_run_message(*taken[0], experiment))


def _insert_experiment(
    results: Any,
    name: str,
    auto: bool,
    values: tuple,
    *,
    stage_names: Sequence[str] = (),
    repeat: int = 1,
) -> tuple[int, str]:
    """Insert the experiment row (committed). A default name taken meanwhile by a concurrent
    pipeline (or whose stage run names are taken) gets a suffix (-2, -3, ...); a name the user
    chose is a Conflict."""
    for attempt in range(1, 1000):
        candidate = name if attempt == 1 else f"{name}-{attempt}"
        if auto and taken_runs(results, candidate, list(stage_names), repeat):
            results.rollback()
            continue
        row = results.execute(
            "INSERT INTO pgeval.experiment (name, testset_id, target, config, config_hash, "
            "fingerprint) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING "
            "RETURNING experiment_id",
            (candidate, *values),
        ).fetchone()
        results.commit()
        if row is not None:
            return row[0], candidate
        if not auto:
            break
    raise Conflict(f"an experiment named '{name}' exists (choose another {param('name')})")


def prepare_contexts(base: StageContext, stages: Any, options: dict) -> dict[str, StageContext]:
    """One context per stage (its options, the run-file reader the import stage calls), each
    stage's ``prepare`` run: configuration errors stop everything before the first query."""
    contexts = {}
    for sname, _kind, stage in stages:
        ctx = replace(
            base,
            stage=sname,
            options=options.get(sname, {}),
            warnings=[],
            extra=dict(base.extra),
            previous={},
            settings=gucs.scope(base.settings, sname),
            import_run=import_run,
        )
        stage.prepare(ctx)
        contexts[sname] = ctx
    return contexts


def execute_stage(
    stage: Any,
    ctx: StageContext,
    exp_id: int,
    rep: int,
    previous: dict,
    fingerprint: dict,
    progress_factory: Callable[..., Any] | None = None,
) -> int:
    """Run one stage of repetition ``rep``; return its run id."""
    from ..table import fingerprint as fpmod

    ctx.experiment_id, ctx.repetition = exp_id, rep
    ctx.previous = dict(previous)
    ctx.extra["fingerprint"] = {**fingerprint, "stage": ctx.stage}
    ctx.extra["config_hash"] = fpmod.config_hash(ctx.extra["fingerprint"])
    ctx.progress = progress_factory(ctx.stage, rep) if progress_factory else None
    assert ctx.experiment is not None  # set above: a pipeline stage runs in an experiment
    run_id = stage.run(ctx, run_name(ctx.experiment, ctx.stage, rep))
    if ctx.progress:  # only a stage that ended shows a full bar (not one interrupted)
        ctx.progress.finish()
    return run_id


def add_warnings(
    ctx: StageContext, warnings: list[str], on_warning: Callable[..., Any] | None = None
) -> None:
    warn = once(warnings, on_warning)
    for w in ctx.warnings:
        warn(w)


def add_summaries(conn: Any, runs: list[dict]) -> None:
    """Add queries, rows, latency p50/p95 (nearest rank) and rows-returned minimum to ``runs``;
    a keyword stage that fell back to full-text search has its kind labelled so."""
    from ..measure import stage_method

    for r in runs:
        params = conn.execute(
            "SELECT params FROM pgeval.run WHERE run_id = %s", (r["run_id"],)
        ).fetchone()[0]
        r["kind"] = stage_method.label(r["kind"], r["kind"], params)
        row = conn.execute(
            """SELECT (SELECT n_queries FROM pgeval.run WHERE run_id = %(r)s),
                      (SELECT n_rows FROM pgeval.run WHERE run_id = %(r)s),
                      pgeval.nearest_rank(array_agg(latency_ms), 0.5),
                      pgeval.nearest_rank(array_agg(latency_ms), 0.95),
                      min(rows_returned)
                 FROM pgeval.query_timing WHERE run_id = %(r)s""",
            {"r": r["run_id"]},
        ).fetchone()
        r.update(
            queries=row[0], results=row[1], p50_ms=row[2], p95_ms=row[3], min_rows_returned=row[4]
        )
    conn.rollback()
