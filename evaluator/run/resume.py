"""Resumable experiments: `pgeval run resume NAME` finishes an experiment (or the experiment of a
run) interrupted by Ctrl-C, a killed process (`kill -9`) or a server restart — without running a
query twice and without leaving one out.

How a run stays exact across interruptions:

- the stage writer commits each query's results, timing and ``pgeval.run_progress`` row in one
  transaction (:mod:`evaluator.stages.store`): a query is wholly written or not at all;
- a live pipeline holds an advisory lock on its experiment (:func:`experiment_scope`: a
  transaction of its own, safe behind a pooler), so resume can tell a dead run from one that is
  still being written (a killed client's connections end, and its lock with them; a statement it
  had sent and that runs on is found by its application_name and ended);
- resume re-reads the configuration recorded with the experiment (stages, settings, options,
  depth, target definition, embeddings), recaptures the configuration fingerprint and refuses to
  go on when anything that defines the numbers changed (index, settings, data, server, test set);
- for each repetition and stage in order: a complete run is kept; an incomplete run continues
  with exactly its missing queries (a stage whose run records no per-query progress — a set-based
  merge, a batch statement — is run again from the start); a run never started is run;
- the resumed run must measure what it measured before (same index, settings, …); only
  ``--statement-timeout`` may change.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..core.canonical import canonical_json
from ..core.db import Database
from ..core.errors import Conflict, DatabaseError, InputError, NotFound, param
from .experiment_scope import acquire, commit, experiment_scope, unlock

if TYPE_CHECKING:
    from ..stages.base import StageContext

# run.params keys that do not define what a run measures (summaries, notes)
VOLATILE_PARAMS = {
    "warnings",
    "resumed",
    "rows_returned_min",
    "rows_returned_mean",
    "queries_short",
    "batch_ms",
    "fusion_ms",
    "rows",
    "fetch_limit_max",
    "queries_refetched",
}


# ---- one run continued -------------------------------------------------------------------------
def reopen_run(conn: Any, run_id: int, params: dict) -> int:
    """Continue run ``run_id`` (``running`` again, this process) after checking that the stage
    measures what the run measured: every defining key of ``params`` (index, settings, method, …)
    equal to the stored one; ``statement_timeout`` may differ."""
    name, stored = conn.execute(
        "SELECT name, params FROM pgeval.run WHERE run_id = %s", (run_id,)
    ).fetchone()
    for key, new in params.items():
        if key in VOLATILE_PARAMS:
            continue
        old = stored.get(key)
        if key == "settings":
            old = {k: v for k, v in (old or {}).items() if k != "statement_timeout"}
            new = {k: v for k, v in (new or {}).items() if k != "statement_timeout"}
        if canonical_json(old) != canonical_json(new):
            raise Conflict(
                f"run '{name}' was measured with {key} = {json.dumps(old, default=str)}"
                f" and would now continue with {json.dumps(new, default=str)}: "
                "resuming would mix two configurations (run the pipeline again under "
                f"a new {param('name')})"
            )
    conn.execute(
        "UPDATE pgeval.run SET status = 'running', finished_at = NULL, pid = %s, "
        "host = %s, heartbeat_at = now() WHERE run_id = %s",
        (os.getpid(), socket.gethostname(), run_id),
    )
    commit(conn)
    return run_id


def _reopener(run_id: int) -> Callable[[Any, dict], int]:
    """The stage's ``ctx.reopen``: :func:`reopen_run` of ``run_id`` on the connection the stage
    writes with."""

    def reopen(conn: Any, params: dict) -> int:
        return reopen_run(conn, run_id, params)

    return reopen


def done_queries(conn: Any, run_id: int) -> set[str]:
    rows = conn.execute(
        "SELECT query_id FROM pgeval.run_progress WHERE run_id = %s", (run_id,)
    ).fetchall()
    return {r[0] for r in rows}


def drop_unfinished(conn: Any, run_id: int) -> None:
    """Remove results and timings of queries without a progress row (a query interrupted while
    it was being added): resume writes them again, once."""
    for table in ("result_list", "query_timing"):
        conn.execute(
            f"DELETE FROM pgeval.{table} t WHERE t.run_id = %s AND NOT EXISTS (SELECT 1 "
            "FROM pgeval.run_progress p WHERE p.run_id = t.run_id AND "
            "p.query_id = t.query_id)",
            (run_id,),
        )
    commit(conn)


def note_resume(
    conn: Any, run_id: int, queries: int, depth: int, statement_timeout: str | None = None
) -> None:
    """Record the resume in run.params (when, how many queries, under which statement timeout)
    and recompute the per-run row summaries over all queries (the stage computed them over the
    queries it ran this time)."""
    from ..stages.vector_common import rows_summary

    params = conn.execute("SELECT params FROM pgeval.run WHERE run_id = %s", (run_id,)).fetchone()[
        0
    ]
    extra = {
        "resumed": (params.get("resumed") or [])
        + [
            {
                "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "queries": queries,
                "statement_timeout": statement_timeout,
            }
        ]
    }
    if "rows_returned_min" in params:
        counts = [
            r[0]
            for r in conn.execute(
                "SELECT rows_returned FROM pgeval.query_timing WHERE run_id = %s", (run_id,)
            )
        ]
        extra.update(rows_summary(counts, depth))
    conn.execute(
        "UPDATE pgeval.run SET params = params || %s::jsonb WHERE run_id = %s",
        (json.dumps(extra), run_id),
    )
    commit(conn)


# ---- the experiment -----------------------------------------------------------------------------
def find_experiment(conn: Any, name: str) -> dict:
    """The experiment named ``name``, or the experiment of the run named ``name``."""
    select = (
        "SELECT experiment_id, e.name, e.status, e.config, e.config_hash, e.fingerprint, "
        "e.testset_id, t.content_hash FROM pgeval.experiment e JOIN pgeval.testset t "
        "USING (testset_id) WHERE "
    )
    row = conn.execute(select + "e.name = %s", (name,)).fetchone()
    if row is None:
        run = conn.execute(
            "SELECT experiment_id FROM pgeval.run WHERE name = %s", (name,)
        ).fetchone()
        if run is None:
            raise NotFound(f"no experiment or run named '{name}' (see `pgeval run list`)")
        if run[0] is None:
            raise InputError(
                f"run '{name}' was imported, not produced by `pgeval run pipeline`:"
                f" import it again (with {param('replace', True)}) instead",
                field="RUN",
            )
        row = conn.execute(select + "e.experiment_id = %s", run).fetchone()
    keys = (
        "experiment_id",
        "name",
        "status",
        "config",
        "config_hash",
        "fingerprint",
        "testset_id",
        "testset_hash",
    )
    return dict(zip(keys, row))


def _check_fingerprint(kb: Any, exp: dict, target: Any, settings: dict, cache: Any = None) -> None:
    """Refuse to resume when the configuration fingerprint differs from the one recorded."""
    from ..table import config_diff
    from ..table import fingerprint as fpmod
    from .pipeline import capture_fingerprint

    cfg, old = exp["config"], exp["fingerprint"]
    if old is None or target is None:
        return
    checksum = (old.get("data") or {}).get("checksum") is not None
    fp = capture_fingerprint(kb, target, settings, cfg, checksum=checksum, cache=cache)
    kb.rollback()
    if fpmod.config_hash(fp) == exp["config_hash"]:
        return
    diff = config_diff.compare(old, fp, "then", "now")
    what = "; ".join(
        f"{d.key}: {config_diff.show_value(d.a)} -> {config_diff.show_value(d.b)}"
        for d in diff.differences[:3]
    )
    raise Conflict(
        f"the configuration of experiment '{exp['name']}' changed since it started "
        f"({what or 'fingerprint differs'}): its runs would mix two configurations "
        f"(run the pipeline again under a new {param('name')})"
    )


def resume_experiment(
    database: Database,
    name: str,
    *,
    statement_timeout: str | None = None,
    progress_factory: Callable[..., Any] | None = None,
    on_warning: Callable[..., Any] | None = None,
) -> Any:
    """Finish experiment ``name`` (or the experiment of run ``name``); return a PipelineResult
    whose runs carry ``action``: kept, resumed, restarted or ran."""
    from ..core.install import ensure_installed
    from ..kinds import registry
    from ..stages import gucs
    from ..stages.base import run_name
    from ..table.data_checksum import ChecksumCache
    from . import pipeline

    with database.connect() as results:
        ensure_installed(results)
        exp = find_experiment(results, name)
        results.rollback()
        name, exp_id, cfg = exp["name"], exp["experiment_id"], exp["config"]
        if exp["testset_hash"] != cfg.get("testset_hash"):
            raise Conflict(
                f"test set '{cfg.get('testset')}' changed since experiment '{name}' "
                "started: its runs would mix two test sets"
            )
        stages = [(s["name"], s["kind"], registry.get(s["kind"])) for s in cfg["stages"]]
        for rep in range(1, int(cfg.get("repeat", 1)) + 1):  # refuse before any work
            for sname, _, _ in stages:
                own_run(results, exp, run_name(name, sname, rep))
        done = _all_complete(results, exp, stages, run_name)
        if done is not None:  # nothing to resume: nothing is touched
            pipeline.add_summaries(results, done)
            return pipeline.PipelineResult(name, exp_id, exp["config_hash"], done, [])
        target = _stored_target(cfg)
        with database.connect(results=False, read_only=not cfg.get("isolate_index")) as kb:
            settings = dict(cfg.get("settings") or {})
            gucs.validate(kb, {k: v for k, v in settings.items() if k != "statement_timeout"})
            kb.rollback()
            _check_fingerprint(kb, exp, target, settings, ChecksumCache(database=database))
            if statement_timeout is not None:
                settings = gucs.with_statement_timeout(kb, settings, statement_timeout)
                kb.rollback()
            base = _base_context(results, kb, exp, stages, target, settings)
            with _lock(results, exp_id, name, on_warning):
                contexts = pipeline.prepare_contexts(base, stages, cfg.get("options") or {})
                if target is not None:  # exact stages from the stored ground truth, as it ran
                    from ..ground_truth.exact_stage import offer

                    exact = {n: contexts[n] for n, k, _ in stages if k == "exact"}
                    offer(exact, cfg, (exp["fingerprint"] or {}).get("data"), settings)
                warnings: list[str] = []
                for c in contexts.values():
                    pipeline.add_warnings(c, warnings, on_warning)
                _mark_running(results, exp_id)
                with experiment_scope(results, exp_id, name, on_warning):

                    def resume_one(stage: Any, ctx: Any, rep: int, previous: Any) -> Any:
                        run_id, action = _resume_stage(
                            results, stage, ctx, exp, rep, previous, progress_factory
                        )
                        return run_id, {"action": action}

                    runs = pipeline.run_repetitions(
                        name,
                        stages,
                        contexts,
                        int(cfg.get("repeat", 1)),
                        warnings,
                        on_warning,
                        resume_one,
                    )
                pipeline.add_summaries(results, runs)
    return pipeline.PipelineResult(name, exp_id, exp["config_hash"], runs, warnings)


def _stored_target(cfg: dict) -> Any:
    """The target as the experiment recorded it (None: its stages read no table)."""
    from ..targets import targets

    if not cfg.get("target"):
        return None
    return targets.Target.from_spec(
        cfg["target"]["name"], {k: v for k, v in cfg["target"].items() if k != "name"}
    )


def _base_context(
    results: Any, kb: Any, exp: dict, stages: list, target: Any, settings: dict
) -> Any:
    """The stage context the experiment ran with (its queries and embeddings loaded again)."""
    from ..providers.embedders import storage
    from .pipeline import experiment_context

    cfg, tid = exp["config"], exp["testset_id"]
    queries = (
        storage.load(results, tid, cfg["embedder"])
        if any(s.needs_embedding for _, _, s in stages)
        else storage.testset_queries(results, tid)
    )
    results.rollback()
    experiment = (exp["name"], exp["experiment_id"])
    return experiment_context(results, kb, cfg, target, tid, experiment, settings, queries)


def _mark_running(results: Any, exp_id: int) -> None:
    results.execute(
        "UPDATE pgeval.experiment SET status = 'running', finished_at "
        "= NULL WHERE experiment_id = %s",
        (exp_id,),
    )
    results.commit()


def _all_complete(
    results: Any, exp: dict, stages: Any, run_name: Callable[[str, str, int], str]
) -> list[dict] | None:
    """The runs of a complete experiment (every stage of every repetition complete), else None."""
    wanted = [
        (run_name(exp["name"], s, rep), s, k, rep)
        for rep in range(1, int(exp["config"].get("repeat", 1)) + 1)
        for s, k, _ in stages
    ]
    rows = dict(
        results.execute(
            "SELECT name, run_id FROM pgeval.run WHERE name = ANY(%s) AND "
            "status = 'complete' AND experiment_id = %s AND testset_id = %s",
            ([w[0] for w in wanted], exp["experiment_id"], exp["testset_id"]),
        ).fetchall()
    )
    results.rollback()
    if exp["status"] != "complete" or len(rows) != len(wanted):
        return None
    return [
        {"run": n, "run_id": rows[n], "stage": s, "kind": k, "repetition": rep, "action": "kept"}
        for n, s, k, rep in wanted
    ]


def own_run(results: Any, exp: dict, rname: str) -> tuple | None:
    """(run_id, status, params) of the experiment's run ``rname``, or None when it has none of
    that name. A run of that name that belongs to another experiment or test set (an import, a
    run of another experiment) is never adopted: Conflict naming it."""
    from .pipeline import foreign_run_message

    row = results.execute(
        "SELECT r.run_id, r.status, r.params, r.experiment_id, r.testset_id, e.name, t.name "
        "FROM pgeval.run r JOIN pgeval.testset t USING (testset_id) LEFT JOIN pgeval.experiment e "
        "USING (experiment_id) WHERE r.name = %s",
        (rname,),
    ).fetchone()
    results.rollback()
    if row is None:
        return None
    if row[3] != exp["experiment_id"] or row[4] != exp["testset_id"]:
        raise Conflict(foreign_run_message(rname, row[5], row[6], exp["name"]))
    return row[:3]


@contextmanager
def _lock(
    results: Any, exp_id: int, name: str, on_warning: Callable[..., Any] | None = None
) -> Iterator[Any]:
    """Hold the experiment from before its stages are prepared (refusing at once when a live
    process has it, waiting when the process is gone but its session still holds it:
    :func:`acquire`); experiment_scope takes the same lock once more (they nest)."""
    acquire(results, exp_id, name, on_warning)
    try:
        yield
    finally:
        unlock(results, exp_id)


def _resume_stage(
    results: Any,
    stage: Any,
    ctx: StageContext,
    exp: dict,
    rep: int,
    previous: dict,
    progress_factory: Callable[..., Any] | None,
) -> tuple[int, str]:
    from ..stages import store
    from ..stages.base import run_name
    from . import pipeline

    rname = run_name(exp["name"], ctx.stage, rep)
    row = own_run(results, exp, rname)

    def run(c: Any) -> Any:
        return pipeline.execute_stage(
            stage,
            c,
            exp["experiment_id"],
            rep,
            previous,
            exp["fingerprint"] or {},
            progress_factory,
        )

    if row is None:
        return run(ctx), "ran"
    run_id, status, params = row
    if status == "complete":
        return run_id, "kept"
    done = done_queries(results, run_id)
    results.rollback()
    # no per-query progress (or an exact run copied from the stored ground truth, one
    # statement): start the stage over
    if not done or (params or {}).get("batch") or ctx.extra.get("ground_truth"):
        results.execute("DELETE FROM pgeval.run WHERE run_id = %s", (run_id,))
        results.commit()
        return run(ctx), "restarted"
    drop_unfinished(results, run_id)
    missing = [q for q in ctx.queries if q.query_id not in done]
    if missing:
        sub = replace(ctx, queries=missing, reopen=_reopener(run_id))
        run_id = run(sub)
        ctx.warnings[:] = sub.warnings
    else:  # every query written; the process died before marking the run complete
        if store.missing_queries(results, run_id):
            raise DatabaseError(f"run '{rname}' lacks queries that the test set no longer has")
        store.finish_run(results, run_id, "complete")
    note_resume(results, run_id, len(missing), ctx.depth, ctx.settings.get("statement_timeout"))
    return run_id, f"resumed ({len(missing)} of {len(ctx.queries)} queries)"
