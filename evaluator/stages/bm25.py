"""``bm25``: the keyword path. pg_textsearch's BM25 index where the target's text column has one,
else PostgreSQL full-text search (``ts_rank_cd``), stated in ``run.params`` ("method", "note").

Stored scores are higher-is-better ("score": "similarity"): pg_textsearch's negative BM25 score
is negated; ts_rank_cd is stored as it is. Rows that a sequential scan returns with score 0 (no
match) are dropped (see :mod:`evaluator.stages.bm25_sql`).

Options (``--opt bm25:KEY=VALUE``):

- ``method``: ``auto`` (default: pg_textsearch when an index exists, else full-text search),
  ``pg_textsearch`` (an error without a BM25 index) or ``fts``.
- ``column``: the text column (default: the target's ``--text-column``); e.g. a pre-segmented
  column for Chinese (see :mod:`evaluator.providers.segmenters`).
- ``index``: which BM25 index when the column has several.
- ``segmenter``: ``none`` | ``whitespace`` | ``bigram`` | ``jieba`` — applied to each query text
  before it is sent (segment the column the same way).
- ``config``: full-text configuration (default: the server's ``default_text_search_config``);
  ``tsvector``: a stored tsvector column to rank instead of ``to_tsvector(config, column)``;
  ``normalization``: ts_rank_cd's normalization bit mask (default 0).
"""

from __future__ import annotations

import time

from psycopg import sql

from ..providers import segmenters
from ..core.errors import DatabaseError, InputError
from . import bm25_sql, gucs, store, timing
from .base import ORDER_SIMILARITY, SCORE_SIMILARITY, BaseStage, StageContext

METHODS = ("auto", "pg_textsearch", "fts")
FTS_NOTE = ("PostgreSQL full-text search (ts_rank_cd over a tsvector), not BM25: no IDF and no "
            "length saturation; install pg_textsearch and create a bm25 index for BM25")


class Bm25Stage(BaseStage):
    kind = "bm25"
    score = SCORE_SIMILARITY
    needs_text = True
    guc_prefixes = ("pg_textsearch.",)

    # ---- configuration -----------------------------------------------------------------------
    def resolve(self, ctx: StageContext) -> dict:
        """What the stage will run: method, column, index, configuration, segmenter."""
        t = ctx.target
        if t is None:
            raise InputError(f"stage {ctx.stage} needs --target", field="--target")
        column = ctx.option("column") or getattr(t, "text_segmented_column", None) or t.text_column
        if not column:
            raise InputError(f"stage {ctx.stage} needs a text column: give the target "
                             f"--text-column, or --opt {ctx.stage}:column=COLUMN", field="--opt")
        method = (ctx.option("method") or "auto").lower()
        if method not in METHODS:
            raise InputError(f"option {ctx.stage}:method={method!r}: one of {', '.join(METHODS)}",
                             field="--opt")
        segmenter = segmenters.check(ctx.option("segmenter")
                                     or getattr(t, "segmenter", None), "--opt")
        kb = ctx.kb
        # (the SELECTs without FROM below return one row: fetchone() is never None)
        oid = kb.execute("SELECT to_regclass(%s)::oid", (t.table_sql().as_string(kb),)).fetchone()[0]  # type: ignore[index]  # one row, always
        if oid is None:   # dropped or renamed since the target was added
            raise DatabaseError(f"stage {ctx.stage}: the target's table {t.qualified()} does not "
                                "exist (any more)")
        cols: dict[str, str] = dict(kb.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                               "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
                               (oid,)).fetchall())
        if column not in cols:
            raise InputError(f"column '{column}' does not exist in {t.qualified()}", field="--opt")
        has_ext = kb.execute("SELECT EXISTS (SELECT 1 FROM pg_extension "
                             "WHERE extname = 'pg_textsearch')").fetchone()[0]  # type: ignore[index]  # one row, always
        indexes = bm25_sql.bm25_indexes(kb, oid, column) if has_ext else []
        wanted = ctx.option("index")
        if wanted:
            indexes = [i for i in indexes if i["name"] == wanted]
            if not indexes:
                raise InputError(f"'{wanted}' is not a pg_textsearch bm25 index on "
                                 f"{t.qualified()}.{column}", field="--opt")
        plan = {"column": column, "segmenter": segmenter}
        if method in ("auto", "pg_textsearch") and indexes:
            idx = indexes[0]
            plan.update(method="pg_textsearch", index=idx["name"], index_ref=idx["ref"],
                        text_config=idx["text_config"])
            if len(indexes) > 1:
                ctx.warn(f"stage {ctx.stage}: several bm25 indexes on {column}; using "
                         f"{idx['name']} (choose with --opt {ctx.stage}:index=NAME)")
            return plan
        if method == "pg_textsearch":
            why = ("the pg_textsearch extension is not installed" if not has_ext else
                   f"no bm25 index on {t.qualified()}.{column}")
            raise InputError(f"stage {ctx.stage}: {why} (CREATE INDEX ... USING bm25 ({column}) "
                             "WITH (text_config='english'), or --opt "
                             f"{ctx.stage}:method=fts)", field="--opt")
        tsv = ctx.option("tsvector")
        if tsv and cols.get(tsv) != "tsvector":
            raise InputError(f"'{tsv}' is not a tsvector column of {t.qualified()}", field="--opt")
        gin = bm25_sql.fts_indexes(kb, oid, column, tsv)
        # no configuration given: the one of a GIN index on the column, so that it serves
        config = ctx.option("config") or next(
            (g["text_config"] for g in gin if g["text_config"]), None) or kb.execute(
            "SELECT current_setting('default_text_search_config')").fetchone()[0]  # type: ignore[index]  # one row, always
        try:
            with kb.transaction():
                config = kb.execute("SELECT %s::regconfig::text", (config,)).fetchone()[0]  # type: ignore[index]  # one row, always
        except Exception:
            raise InputError(f"'{config}' is not a text search configuration of this server",
                             field="--opt") from None
        why = ("the pg_textsearch extension is not installed" if not has_ext else
               f"no bm25 index on {t.qualified()}.{column}") if method == "auto" else "asked for"
        plan.update(method="fts", text_config=config, tsvector=tsv,
                    normalization=ctx.option("normalization", 0, int),
                    note=f"{FTS_NOTE} ({why})")
        if method == "auto":
            ctx.warn(f"stage {ctx.stage}: {why}; ranking with PostgreSQL full-text search "
                     "(ts_rank_cd), not BM25")
        serving = [g["name"] for g in gin if tsv or g["text_config"] == config]
        plan["fts_index"] = serving[0] if serving else None
        if not serving:
            plan["index_hint"] = bm25_sql.fts_index_sql(t, column, tsv, config, kb)
            what = tsv or f"to_tsvector('{config}', {column})"
            ctx.warn(f"stage {ctx.stage}: no GIN index on {what}: every query scans the whole "
                     f"table; create one: {plan['index_hint']}")
        return plan

    def statement(self, ctx: StageContext, plan: dict, batch: bool):
        assert ctx.target is not None   # a stage with a table has a target
        q = bm25_sql.batch_text() if batch else sql.Placeholder("q")
        if plan["method"] == "pg_textsearch":
            body, params = bm25_sql.textsearch(ctx.target, plan["column"], ctx.depth, q)
            params["idx"] = plan["index_ref"]
        else:
            body, params = bm25_sql.fulltext(ctx.target, plan["column"], plan["tsvector"],
                                             plan["text_config"], ctx.depth, q,
                                             plan["normalization"])
        wrap = bm25_sql.batch if batch else bm25_sql.per_query
        return wrap(body, plan["method"]), params

    def begin(self, ctx: StageContext) -> dict:
        kb = ctx.kb
        if kb.info.transaction_status != 0:
            kb.rollback()
        kb.execute("SET TRANSACTION READ ONLY")
        return gucs.apply_local(kb, ctx.settings_for(self.guc_prefixes))

    def _texts(self, ctx: StageContext, plan: dict) -> dict[str, str]:
        return {q.query_id: segmenters.segment(q.text, plan["segmenter"])
                for q in ctx.queries if q.text and q.text.strip()}

    def prepare(self, ctx: StageContext) -> None:
        if ctx.depth < 1:
            raise InputError("--depth must be >= 1", field="--depth")
        try:
            plan = self.resolve(ctx)
            texts = self._texts(ctx, plan)
            if ctx.queries and not texts:
                raise InputError(f"stage {ctx.stage}: no query of test set '{ctx.testset}' has "
                                 "text to search for", field="--stages")
            self.begin(ctx)
            stmt, params = self.statement(ctx, plan, False)
            sample = next(iter(texts.values()), "")
            ctx.kb.execute(sql.SQL("EXPLAIN ") + stmt, {**params, "q": sample})
        finally:
            ctx.kb.rollback()

    # ---- running -----------------------------------------------------------------------------
    def run(self, ctx: StageContext, run_name: str) -> int:
        assert ctx.target is not None   # a stage with a table has a target
        plan = self.resolve(ctx)
        texts = self._texts(ctx, plan)
        missing = [q.query_id for q in ctx.queries if q.query_id not in texts]
        if missing:
            ctx.warn(f"stage {ctx.stage}: {len(missing)} queries have no text and get no result "
                     f"(first: '{missing[0]}')")
        settings = self.begin(ctx)
        try:
            stmt, params = self.statement(ctx, plan, ctx.batch)
            scan = self._scan(ctx, plan, texts) if not ctx.batch else None
            if plan.get("fts_index") and scan == "sequential scan":
                ctx.warn(f"stage {ctx.stage}: the planner scans the whole table rather than use "
                         f"GIN index {plan['fts_index']} (a small table, or run ANALYZE)")
            run_params = {"kind": self.kind, "score": SCORE_SIMILARITY, **plan,
                          "scan": scan, "settings": settings, "batch": ctx.batch,
                          "target": ctx.target.name, "queries_without_text": len(missing)}
            run_params.pop("index_ref", None)
            negate = plan["method"] == "pg_textsearch"
            with store.run_scope(ctx, run_name, params=run_params, order_rule=ORDER_SIMILARITY,
                                 timing_boundary=timing.boundary(ctx)) as out:
                if ctx.batch:
                    self._run_batch(ctx, stmt, params, texts, negate, out)
                else:
                    self._run_each(ctx, stmt, params, texts, negate, out)
            return out.run_id
        finally:
            ctx.kb.rollback()

    def _scan(self, ctx: StageContext, plan, texts) -> str:
        """How the planner serves the first query: 'index NAME' or 'sequential scan'."""
        from . import plan_check

        stmt, params = self.statement(ctx, plan, False)
        p = plan_check.explain(ctx.kb, stmt, {**params, "q": next(iter(texts.values()), "")})
        scans = plan_check.index_scans(p)
        return f"index {scans[0][1]}" if scans else "sequential scan"

    def _run_each(self, ctx: StageContext, stmt, params, texts, negate, out) -> None:
        timed = timing.TimedStatement(ctx.kb, stmt, ctx.server_timing)
        if ctx.progress:
            ctx.progress.start(ctx.stage, len(ctx.queries))
        for q in ctx.queries:
            qtext = texts.get(q.query_id)
            if qtext is None:
                out.add(q.query_id, [], latency_ms=0.0, rows_returned=0)
            else:
                rows, ms, server_ms = timed.execute(dict(params, q=qtext))
                out.add(q.query_id, [(r[0], -r[1] if negate else r[1]) for r in rows],
                        latency_ms=ms, server_ms=server_ms, rows_returned=rows[0][2] if rows else 0)
            if ctx.progress:
                ctx.progress.advance()

    def _run_batch(self, ctx: StageContext, stmt, params, texts, negate, out) -> None:
        ids = [q.query_id for q in ctx.queries if q.query_id in texts]
        p = dict(params, ids=ids, texts=[texts[i] for i in ids])
        if ctx.progress:
            ctx.progress.start(ctx.stage + " (batch)", len(ctx.queries))
        t0 = time.perf_counter()
        rows = ctx.kb.execute(stmt, p).fetchall()
        ms = (time.perf_counter() - t0) * 1000.0
        by_query: dict[str, list] = {}
        for qid, chunk, score, _n in rows:
            by_query.setdefault(qid, []).append((chunk, -score if negate else score))
        for q in ctx.queries:
            out.add(q.query_id, by_query.get(q.query_id, []))
            if ctx.progress:
                ctx.progress.advance()
        out.params["batch_ms"] = ms
