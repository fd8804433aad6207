"""What the vector stages share: the stage transaction (READ ONLY, settings by SET LOCAL, or
``--isolate-index``), the plan check, the per-query and batch loops, timing.

Subclasses (``registry.vector_kinds()``) set ``kind`` (``method``, the index's access method,
and ``guc_prefixes`` come from the kind's description in :mod:`evaluator.kinds.registry`),
``defaults`` (settings applied unless the user sets them) and may add ``trap_warnings``.

``--isolate-index``: when several ANN indexes sit on one column, the planner picks one; to
measure another, the stage drops the others inside its own transaction and rolls back at the
end. DROP INDEX takes an ACCESS EXCLUSIVE lock on the table for the whole stage (every reader of
the table waits), needs the table's owner, and cannot run in a READ ONLY transaction — the
alternative is one copy of the table per index.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg import sql

from ..core.errors import DatabaseError, InputError, PlanError, first_line, param
from ..core.vector_types import register_vector
from ..kinds import registry
from ..targets.catalog import serving_as
from . import (
    gucs,
    plan_check,
    planner_plan,
    refetch,
    statement_sql,
    store,
    timing,
    vector_sql,
)
from .base import ORDER_DISTANCE, SCORE_DISTANCE, BaseStage, StageContext

if TYPE_CHECKING:
    from ..targets.targets import Target

LOCK_TIMEOUT = "10s"
# what the timed statement is (run.timing_boundary, run.params["timed"]): with unique chunk ids,
# the application's ORDER BY distance LIMIT k itself, its rows ranked by (distance, chunk id) after
# the timing (vector_sql.application); when chunks have several rows, that statement wrapped in a
# sort of its k rows by (distance, chunk id) and their collapse to each chunk's best distance
TIMED = (
    "SELECT id, distance ... ORDER BY the bare distance operator LIMIT k, exactly as an "
    "application runs it; pgeval ranks the rows by (distance, chunk id) and applies the "
    "target's threshold after the timing"
)
TIMED_COLLAPSED = (
    "SELECT id, distance ... ORDER BY the bare distance operator LIMIT k, as an application "
    "runs it, re-sorted by (distance, chunk id) and collapsed per chunk over those k rows"
)


# ctx.extra's key of the catalog look-ups of a stage context (VectorStage._catalog)
_CATALOG = "_vector_catalog"
# ctx.extra[TRUSTED_PLAN] = {"index": name}: the steady probe's run (tuning/sweep/remeasure.py), whose
# configuration epoch (tuning/watch/epoch.py) is the one this index plan was checked under: no
# catalog look-up and no EXPLAIN; the statement, settings, timing and storage are every run's
TRUSTED_PLAN = "_trusted_plan"


def relation_oid(kb: Any, target: Target) -> int:
    return kb.execute(
        "SELECT to_regclass(%s)::oid", (target.table_sql().as_string(kb),)
    ).fetchone()[0]


class VectorStage(BaseStage):
    kind = "vector"
    method: str | None = None  # hnsw | ivfflat | diskann; None: exact
    score = SCORE_DISTANCE
    options = frozenset({"index", "overfetch"})
    needs_embedding = True
    # ANN stages measure their index: a sequential scan would silently turn them into exact
    # search (pgvector's costing prefers it on small tables, or when ef_search < LIMIT), so the
    # planner is told not to; --set enable_seqscan=on overrides, and the plan check still holds.
    defaults: dict[str, str] = {"enable_seqscan": "off"}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A kind's access method and settings families, as the registry describes it."""
        super().__init_subclass__(**kwargs)
        described = registry.kind(cls.kind)
        if described is not None:
            cls.method = described.index_method
            cls.guc_prefixes = described.guc_prefixes

    # ---- configuration -------------------------------------------------------------------
    def stage_settings(self, ctx: StageContext) -> dict[str, str]:
        if self.method is not None and planner_plan.mode(ctx) is not None:
            # the planner's own plan: none of the stage's planner settings, its mode pinned
            return planner_plan.settings(ctx, ctx.settings_for(self.guc_prefixes))
        settings = dict(self.defaults)
        settings.update(ctx.settings_for(self.guc_prefixes))
        return settings

    def trap_warnings(self, ctx: StageContext, effective: dict[str, str]) -> list[str]:
        return []

    def _check_dimension(self, ctx: StageContext) -> None:
        t = ctx.target
        if t is None:
            raise InputError(f"stage {ctx.stage} needs {param('target')}", field=param("target"))
        if not ctx.queries:
            raise InputError("the test set has no queries", field=param("testset"))
        dim = len(ctx.queries[0].embedding)  # type: ignore[arg-type]  # vector stages get embedded queries
        if t.dimension is not None and dim != t.dimension:
            raise InputError(
                f"embedder '{ctx.embedder}' gives {dim}-dimensional vectors but "
                f"target '{t.name}' searches {t.vector_type}({t.dimension}) "
                f"({t.qualified()}.{t.vector_column})",
                field=param("embedder"),
            )

    # ---- the stage transaction -------------------------------------------------------------
    def search_target(self, target: Target) -> Target:
        """The target as this kind searches it: cast to the kind's type (hnsw-halfvec)."""
        described = registry.kind(self.kind)
        cast = described.cast_type if described is not None else None
        if cast is None or target.searched_type == cast:
            return target
        if target.dimension is None:
            raise InputError(
                f"stage {self.kind} casts the vectors to {cast}(N): target '{target.name}' "
                "has no fixed dimension",
                field=param("stages"),
            )
        return replace(target, search_type=cast)

    def _catalog(self, ctx: StageContext) -> dict:
        """The extension checked and the table's indexes looked up (the index candidates of this
        kind, every ANN index, the schema), in a transaction of their own, rolled back. Once per
        stage context and connection: prepare() looks them up, run() in the same context reuses
        them (the run's plan check, in the run's own transaction, still sees an index dropped
        since)."""
        from .server_support import require

        kb, t = ctx.kb, ctx.target
        assert t is not None  # a stage with a table has a target
        key = (self.kind, t.qualified(), t.vector_column, t.search_type)
        cached = ctx.extra.get(_CATALOG)
        if cached is not None and cached["key"] == key and cached["kb"] is kb:
            # their settings exist in the session that applies them: loaded in the transaction
            # begin() goes on with (the stage's)
            gucs.load_libraries(kb)
            return cached
        require(kb, self.kind, field="stages")  # the extension, at the version the kind needs
        register_vector(kb)
        gucs.load_libraries(kb)
        oid = relation_oid(kb, t)
        gone = DatabaseError(
            f"stage {ctx.stage}: the target's table {t.qualified()} does not exist (any more)"
        )  # dropped or renamed since the target was added
        if oid is None:
            kb.rollback()
            raise gone
        all_ann = plan_check.ann_indexes(kb, oid)
        from ..targets.catalog import vector_indexes

        found_ix = vector_indexes(kb, t, (self.method,)) if self.method else []
        candidates = [i["name"] for i in found_ix]
        if not candidates and t.search_type and self.method:
            # the expression the stage searches, as the statement spells it: an index on it
            expr = t.vector_expr().as_string(kb)
            ops = registry.KINDS[self.kind].opclass(t.vector_type, t.distance)
            kb.rollback()
            raise InputError(
                f"stage {ctx.stage} ({self.kind}) needs a {self.method} index on {expr} with "
                f"{ops}, and {t.qualified()} has none: CREATE INDEX CONCURRENTLY ON "
                f"{t.qualified()} USING {self.method} (({expr}) {ops})",
                field=param("stages"),
            )
        row = kb.execute(
            "SELECT nspname FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.oid = %s",
            (oid,),
        ).fetchone()
        kb.rollback()  # the catalog look-ups above must not open the stage's transaction
        if row is None:  # dropped between the look-ups
            raise gone
        found = {
            "key": key,
            "kb": kb,  # (a connection of its own, a load client's, looks them up again)
            "all_ann": all_ann,
            "candidates": candidates,
            "schema": row[0],
            "indexes": found_ix,
        }
        ctx.extra[_CATALOG] = found
        return found

    def begin(self, ctx: StageContext) -> dict:
        """Open the stage's transaction on ``ctx.kb``; return {settings, dropped, candidates}."""
        assert ctx.target is not None  # a stage with a table has a target
        ctx.target = self.search_target(ctx.target)
        if ctx.target.statement is not None:
            statement_sql.refuse_unsupported(ctx.target, ctx.stage, self.kind, ctx.batch)
        if ctx.target.search_type and (ctx.batch or not ctx.target.unique_id):
            raise InputError(
                f"stage {ctx.stage} ({self.kind}) runs one statement per query on a table whose "
                f"id column is unique: not yet with {param('batch', True)} or several rows per chunk",
                field=param("stages"),
            )
        kb, t = ctx.kb, ctx.target
        if kb.info.transaction_status != 0:
            kb.rollback()
        trusted = ctx.extra.get(TRUSTED_PLAN)
        if trusted is not None and not ctx.isolate_index:
            register_vector(kb)
            gucs.load_libraries(kb)
            found: dict[str, Any] = {
                "all_ann": [trusted["index"]],
                "candidates": [trusted["index"]],
                "schema": None,
            }
        else:
            found = self._catalog(ctx)
        all_ann, candidates, schema = found["all_ann"], found["candidates"], found["schema"]
        dropped: list[str] = []
        wanted = ctx.option("index")
        parts = serving_as(found.get("indexes", []), wanted) if wanted else []
        if parts and parts != [wanted]:  # a partitioned index's partitions', a partial one's
            candidates, wanted = [n for n in candidates if n in parts], None  # per group
        if wanted and wanted not in candidates:
            raise InputError(
                f"index '{wanted}' is not a {self.method} index on "
                f"{t.qualified()}.{t.vector_column} for distance {t.distance} "
                f"(candidates: {', '.join(candidates) or 'none'})",
                field=param("options"),
            )
        if ctx.isolate_index and self.method:
            keep = {wanted} if wanted else set(candidates)
            others = [name for name in all_ann if name not in keep]
            kb.execute("SELECT set_config('lock_timeout', %s, true)", (LOCK_TIMEOUT,))
            for name in others:
                try:
                    kb.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, name)))
                except Exception as exc:
                    kb.rollback()
                    first = first_line(exc, "")
                    raise DatabaseError(
                        f"{param('isolate_index', True)} cannot drop index {name}: {first} (it "
                        "needs the table's owner; or keep each index on its own "
                        "copy of the table)"
                    ) from None
                dropped.append(name)
        elif not kb.read_only:  # (a READ ONLY connection's BEGIN said so already)
            kb.execute("SET TRANSACTION READ ONLY")
        settings = self.stage_settings(ctx)
        effective = gucs.apply_local(kb, settings)
        return {
            "settings": effective,
            "dropped": dropped,
            "candidates": candidates,
            "all_ann": all_ann,
            "wanted": wanted,
        }

    def check_plan(
        self,
        ctx: StageContext,
        tx: dict,
        statement: Any,
        params: dict,
        generic_statement: Any = None,
        generic_values: list | None = None,
    ) -> Any:
        """EXPLAIN (custom, then generic) inside the open transaction; return the index name.
        ``generic_values``: the parameters of ``generic_statement`` in ``$n`` order (servers
        before 16 need them to EXPLAIN EXECUTE a prepared statement)."""
        if self.method is not None and planner_plan.mode(ctx) is not None:
            generic = (
                None if generic_statement is None else (generic_statement, generic_values or [])
            )
            return planner_plan.check(ctx.kb, ctx, tx, self.method, (statement, params), generic)
        plan = plan_check.explain(ctx.kb, statement, params)
        if self.method is None:
            plan_check.check_exact(plan, stage=ctx.stage, all_ann=tx["all_ann"])
            index = None
        else:

            def check(p: Any) -> Any:
                # (ANN stages name their method)
                return plan_check.check_in(p, tx, stage=ctx.stage, method=self.method)  # type: ignore[arg-type]

            try:
                index = check(plan)
            except PlanError as exc:  # name the setting(s) that make the index serve the query
                if not tx["candidates"]:
                    raise
                found = plan_check.find_forcing(ctx.kb, statement, params, check, tx["settings"])
                raise PlanError(str(exc) + plan_check.forcing_hint(ctx.stage, found)) from None
        if generic_statement is not None and self.method is not None:
            gplan = plan_check.explain_generic(ctx.kb, generic_statement, generic_values or [])
            try:
                plan_check.check_in(gplan, tx, stage=ctx.stage, method=self.method, generic=True)
            except PlanError:
                ctx.extra.setdefault(f"{ctx.stage}.force_custom", True)
                ctx.kb.execute("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)")
                tx["settings"]["plan_cache_mode"] = "force_custom_plan"
                ctx.warn(
                    f"stage {ctx.stage}: the generic plan of the prepared statement does "
                    f"not use the index; running with plan_cache_mode=force_custom_plan"
                )
        return index

    # ---- Stage protocol --------------------------------------------------------------------
    def prepare(self, ctx: StageContext) -> None:
        self._check_dimension(ctx)
        if ctx.depth < 1:
            raise InputError(f"{param('depth')} must be >= 1", field=param("depth"))
        try:
            tx = self.begin(ctx)
            self._plan(ctx, tx)
            for w in self.trap_warnings(ctx, tx["settings"]):
                ctx.warn(w)
        finally:
            ctx.kb.rollback()

    def overfetch(self, ctx: StageContext) -> float:
        return refetch.overfetch(ctx)

    def sql_kw(self, ctx: StageContext) -> dict:
        """The keywords of :mod:`.vector_sql`'s statements for this stage in ``ctx``."""
        assert ctx.target is not None  # a stage with a table has a target
        kw: dict = {
            "exact": self.method is None,
            "overfetch": self.overfetch(ctx),
            "threshold": ctx.target.max_distance(),
        }
        described = registry.kind(self.kind)
        rerank = described.rerank_candidates if described is not None else None
        if rerank is not None:  # hnsw-bq: how many Hamming candidates to re-rank
            given = ctx.settings_for(self.guc_prefixes).get(rerank)
            kw["candidates"] = int(given) if given else None  # None: vector_sql's default
        return kw

    def _plan(self, ctx: StageContext, tx: Any, generic_check: bool = True) -> Any:
        assert ctx.target is not None  # a stage with a table has a target
        q0 = ctx.queries[0].embedding
        if ctx.batch:
            stmt, params = vector_sql.batch(ctx.target, ctx.depth, **self.sql_kw(ctx))
            check = dict(
                params,
                ids=[q.query_id for q in ctx.queries[:2]],
                vecs=[_f32(q.embedding) for q in ctx.queries[:2]],
            )
            return self.check_plan(ctx, tx, stmt, check), stmt, params
        stmt, params, _ = vector_sql.application(ctx.target, ctx.depth, **self.sql_kw(ctx))
        trusted = ctx.extra.get(TRUSTED_PLAN)
        if trusted is not None and not generic_check:  # (a run's check, not prepare's)
            return trusted["index"], stmt, params
        values = {**params, "q": np.asarray(q0, dtype=np.float32)}
        dollar = vector_sql.Dollar()
        generic = (  # (the planner's generic plan is the one a run measures: read every time)
            vector_sql.application(ctx.target, ctx.depth, dollar, **self.sql_kw(ctx))[0]
            if generic_check or planner_plan.mode(ctx) == "generic"
            else None
        )
        index = self.check_plan(
            ctx, tx, stmt, values, generic, [values[name] for name in dollar.names]
        )
        self._check_application_limit(ctx, tx, values)
        return index, stmt, params

    def _check_application_limit(self, ctx: StageContext, tx: dict, values: dict) -> None:
        """The planner's own plan (:mod:`.planner_plan`) of the application's LIMIT K, when the
        statement measured fetches more rows (a sampled row's own one, a deeper --depth)."""
        app = ctx.extra.get("app_limit")
        if self.method is None or planner_plan.mode(ctx) is None or "plan" not in tx or not app:
            return
        if int(app["k"]) >= ctx.depth:
            return
        assert ctx.target is not None  # a stage with a table has a target
        k = int(app["k"])
        stmt, params, _ = vector_sql.application(ctx.target, k, **self.sql_kw(ctx))
        dollar = vector_sql.Dollar()
        generic = vector_sql.application(ctx.target, k, dollar, **self.sql_kw(ctx))[0]
        at_k = {**values, **params}
        planner_plan.at_application_limit(
            ctx.kb,
            ctx,
            tx,
            self.method,
            k,
            (stmt, at_k),
            (generic, [at_k[n] for n in dollar.names]),
        )

    def run(self, ctx: StageContext, run_name: str) -> int:
        assert ctx.target is not None  # a stage with a table has a target
        tx = self.begin(ctx)
        try:
            # prepare() checked the generic plan; re-check the custom plan in this transaction
            # (--isolate-index drops happen per transaction)
            index, stmt, params = self._plan(ctx, tx, generic_check=False)
            if ctx.extra.get(f"{ctx.stage}.force_custom"):
                tx["settings"].update(
                    gucs.apply_local(ctx.kb, {"plan_cache_mode": "force_custom_plan"})
                )
            run_params = {
                "kind": self.kind,
                "role": self.role,
                "score": SCORE_DISTANCE,
                "metric": ctx.target.distance,
                "index": index,
                **({"plan": tx["plan"]} if "plan" in tx else {}),
                "method": self.method,
                "settings": tx["settings"],
                "isolated_from": tx["dropped"],
                "overfetch": self.overfetch(ctx),
                "batch": ctx.batch,
                "embedder": ctx.embedder,
                "target": ctx.target.name,
                "warnings": self.trap_warnings(ctx, tx["settings"]),
            }
            timed = TIMED if ctx.target.unique_id and not ctx.batch else TIMED_COLLAPSED
            if ctx.target.statement is not None:
                timed = statement_sql.TIMED
            run_params.update(timed=timed, timed_statement=stmt.as_string(ctx.kb))
            app_limit = (  # (a statement's LIMIT is the application's)
                None
                if ctx.target.statement is not None
                else self._application_limit(ctx, tx["settings"], run_params)
            )
            with store.run_scope(
                ctx,
                run_name,
                params=run_params,
                order_rule=(
                    f"{ORDER_DISTANCE}; ordered by the {ctx.target.search_type} distance (the "
                    "application's order), scores the full-precision distance"
                    if ctx.target.search_type
                    else ORDER_DISTANCE
                ),
                timing_boundary=timing.boundary(ctx, timed),
            ) as out:
                if ctx.batch:
                    self._run_batch(ctx, stmt, params, out)
                else:
                    self._run_each(ctx, stmt, params, out, app_limit)
            return out.run_id
        finally:
            ctx.kb.rollback()  # READ ONLY: nothing to keep; --isolate-index: restores indexes

    def _application_limit(
        self, ctx: StageContext, effective: dict, run_params: dict
    ) -> int | None:
        """The application's LIMIT for the measures at cut-off K (``ctx.extra["app_limit"]``:
        {"k": K, "rows": K, or K + 1 when the query's own chunk is dropped}), when the scan may
        emit rows out of distance order under these settings (the registry says when) and the
        stage fetches deeper: the rows the list's first K come from. Recorded in the run's
        params (``limits``): which LIMIT each cut-off's rows are those of."""
        app = ctx.extra.get("app_limit")
        described = registry.kind(self.kind)
        if not app or described is None or app["rows"] >= ctx.depth:
            return None
        names = list(described.reorders)
        shown = {
            **gucs.current(ctx.kb, names),
            **{k: effective[k] for k in names if k in effective},
        }
        if not described.may_reorder(shown):
            run_params["limits"] = {"k": app["k"], "rows_of_limit": ctx.depth, "reorders": False}
            return None
        tiered = ctx.target is not None and ctx.target.unique_id and not ctx.batch
        run_params["limits"] = {
            "k": app["k"],
            "rows_of_limit": app["rows"] if tiered else ctx.depth,
            "reorders": True,
        }
        if not tiered:
            ctx.warn(
                f"stage {ctx.stage}: the scan may emit rows out of distance order, and "
                f"{param('batch') if ctx.batch else 'several rows per chunk'} ranks them from "
                f"LIMIT {ctx.depth}: measures at cut-off {app['k']} may exceed what the "
                f"application's LIMIT {app['k']} returns"
            )
            return None
        return int(app["rows"])

    def _run_each(
        self, ctx: StageContext, stmt: Any, params: dict, out: Any, app_limit: int | None = None
    ) -> None:
        """One prepared statement per query. Several rows per chunk: a query whose rows
        collapse to fewer than ``--depth`` chunks while the scan returned every row it was asked
        for runs again with a larger LIMIT (:func:`refetch.grow`) until it has ``--depth``
        chunks or the scan is exhausted; the latency is the round trip of the statement whose
        rows are stored (the LIMIT an application would need for this query). Results past the
        target's threshold are dropped as the application drops them, and counted; a list that
        reached the threshold is not fetched again (a larger LIMIT only adds results past it)."""
        assert ctx.target is not None  # a vector stage has a target (prepare refuses none)
        kw = self.sql_kw(ctx)
        more = vector_sql.refetches(ctx.target, kw["exact"])
        first = refetch.fetch_limit(ctx.depth, kw["overfetch"]) if more else None
        timed = {first: timing.TimedStatement(ctx.kb, stmt, ctx.server_timing)}
        own_statement = ctx.target.statement is not None
        ranks_here, threshold = ctx.target.unique_id or own_statement, kw["threshold"]
        counts, limits, dropped = [], [], []
        if ctx.progress:
            ctx.progress.start(ctx.stage, len(ctx.queries))
        for q in ctx.queries:
            p = dict(params, q=_f32(q.embedding), **statement_sql.bound(ctx.target, q.query_id))
            limit = first
            while True:
                if limit not in timed:
                    timed[limit] = timing.TimedStatement(
                        ctx.kb,
                        vector_sql.per_query(ctx.target, ctx.depth, **kw, fetch=limit)[0],
                        ctx.server_timing,
                    )
                rows, ms, server_ms = timed[limit].execute(p)
                if own_statement:  # its columns by name
                    rows = statement_sql.projected(
                        timed[limit].cur.description, rows, ctx.target, ctx.kb, p["q"]
                    )
                if ranks_here:  # the application's statement: ranked and cut here, untimed
                    kept, lost = vector_sql.ranked_rows(rows, threshold, app_limit)
                    if own_statement:  # each chunk once
                        kept = statement_sql.first_per_chunk(kept)
                    if kept and len(kept[0]) == 3:  # a cast's order, full-precision distances
                        kept = [(r[0], r[2]) for r in kept]
                    break
                # r[3]: past the threshold (a fourth column only with a threshold)
                kept = [r for r in rows if not r[3]] if rows and len(rows[0]) > 3 else rows
                lost = len(rows) - len(kept)
                if (
                    not more
                    or limit is None
                    or len(rows) >= ctx.depth
                    or len(kept) < len(rows)
                    or (rows[0][2] if rows else 0) < limit
                ):
                    break
                limit = refetch.grow(limit)
            counts.append(len(kept))
            limits.append(limit)
            dropped.append(lost)
            out.add(
                q.query_id,
                kept if not kept or len(kept[0]) == 2 else [(r[0], r[1]) for r in kept],
                latency_ms=ms,
                server_ms=server_ms,
                rows_returned=len(kept),
            )
            if ctx.progress:
                ctx.progress.advance()
        out.params.update(rows_summary(counts, ctx.depth), **refetch.summary(limits, first))
        out.params.update(threshold_summary(ctx.target, dropped))

    def _run_batch(self, ctx: StageContext, stmt: Any, params: dict, out: Any) -> None:
        """One statement; rows stream in query by query (chunks of 2,000) and each finished
        query goes to the writer while the server searches the next ones. Several rows per
        chunk: the queries left short of ``--depth`` chunks while their scan returned every row
        asked for run again, together, with a larger LIMIT (as in :meth:`_run_each`)."""
        kw = self.sql_kw(ctx)
        more = vector_sql.refetches(ctx.target, kw["exact"])
        limit = refetch.fetch_limit(ctx.depth, kw["overfetch"]) if more else None
        first = limit
        if ctx.progress:
            ctx.progress.start(ctx.stage + " (batch)", len(ctx.queries))
        counts: dict[str, int] = {}
        limits: dict[str, int | None] = {}
        dropped: dict[str, int] = {}
        pending, ms = list(ctx.queries), 0.0
        while pending:
            p = dict(
                params, ids=[q.query_id for q in pending], vecs=[_f32(q.embedding) for q in pending]
            )
            seen: set[str] = set()
            short: set[str] = set()

            def finish(qid: Any, rows: Any, n: Any, limit: Any = limit, short: Any = short) -> None:
                rows.sort()
                if [r[0] for r in rows] != list(range(1, len(rows) + 1)):
                    raise RuntimeError(f"batch ranks of query '{qid}' are not 1..n")
                kept = [(c, d) for _, c, d, past in rows if not past]  # past the threshold
                if more and len(rows) < ctx.depth and n >= limit and len(kept) == len(rows):
                    short.add(qid)  # run again with a larger LIMIT
                    return
                out.add(qid, kept)
                counts[qid], limits[qid] = len(kept), limit
                dropped[qid] = len(rows) - len(kept)
                if ctx.progress:
                    ctx.progress.advance()

            t0 = time.perf_counter()
            for qid, items, raw in _by_query(ctx.kb.cursor().stream(stmt, p, size=2000), seen):
                finish(qid, items, raw)
            ms += (time.perf_counter() - t0) * 1000.0
            for q in pending:  # queries the filters left without any row
                if q.query_id not in seen:
                    finish(q.query_id, [], 0)
            pending = [q for q in pending if q.query_id in short]
            if pending:
                assert limit is not None  # only lists with several rows per chunk refetch
                limit = refetch.grow(limit)
                stmt = vector_sql.batch(ctx.target, ctx.depth, **kw, fetch=limit)[0]
        out.params.update(
            rows_summary([counts.get(q.query_id, 0) for q in ctx.queries], ctx.depth),
            **refetch.summary([limits.get(q.query_id) for q in ctx.queries], first),
            batch_ms=ms,
        )
        assert ctx.target is not None
        out.params.update(
            threshold_summary(ctx.target, [dropped.get(q.query_id, 0) for q in ctx.queries])
        )


def _by_query(rows: Iterable[tuple], seen: set[str]) -> Iterator[tuple[str, list[tuple], int]]:
    """The batch statement's rows (query id, chunk, distance, rows scanned, rank, past the
    threshold) as (query id, [(rank, chunk, distance, past)], rows scanned) per query, in the
    order they arrive; every query seen is added to ``seen``, and a query whose rows do not
    arrive together is an error."""
    current, raw = None, 0
    items: list[tuple] = []
    for qid, chunk, dist, n, rk, past in rows:
        if qid != current:
            if current is not None:
                yield current, items, raw
            if qid in seen:
                raise RuntimeError(f"batch rows of query '{qid}' arrived out of order")
            seen.add(qid)
            current, items, raw = qid, [], n
        items.append((rk, chunk, dist, past))
    if current is not None:
        yield current, items, raw


def _f32(vec: Any) -> np.ndarray:
    return np.asarray(vec, dtype=np.float32)


def rows_summary(counts: list[int], depth: int) -> dict:
    """Rows per query as stored (distinct chunks, at most depth): min, mean, how many short."""
    if not counts:
        return {"rows_returned_min": 0, "rows_returned_mean": 0.0, "queries_short": 0}
    return {
        "rows_returned_min": int(min(counts)),
        "rows_returned_mean": float(sum(counts)) / len(counts),
        "queries_short": int(sum(1 for c in counts if c < depth)),
    }


def threshold_summary(target: Target, dropped: list[int]) -> dict:
    """What the target's threshold dropped (run params; the stage report shows them): results
    in all, queries that lost at least one, the most one query lost."""
    if target.max_distance() is None:
        return {}
    # a max distance comes from the threshold, so target.threshold is set here
    return {
        "threshold": dict(target.threshold, max_distance=target.max_distance()),  # type: ignore[arg-type]
        "threshold_dropped": int(sum(dropped)),
        "threshold_queries": int(sum(1 for d in dropped if d)),
        "threshold_dropped_max": int(max(dropped, default=0)),
    }
