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
- ``overfetch``: rows asked for per chunk wanted when chunks have several rows (default 2; the
  LIMIT doubles while a query is short of ``--depth`` chunks, see
  :mod:`evaluator.stages.refetch`).

What is timed (``run.timing_boundary``, ``run.params["timed"]`` and ``["timed_statement"]``):
the statement an application runs. With pg_textsearch that is the ids in index order; the
scores are looked up afterwards, untimed, for the returned chunks only (a projected score would
run pg_textsearch's standalone scorer once per row inside the timed statement).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..core.errors import DatabaseError, InputError, param
from ..providers import segmenters
from ..targets.catalog import column_types
from . import bm25_sql, gucs, refetch, store, timing
from .base import ORDER_SIMILARITY, SCORE_SIMILARITY, BaseStage, StageContext
from .vector_common import relation_oid, rows_summary

if TYPE_CHECKING:
    from ..targets.targets import Target

METHODS = ("auto", "pg_textsearch", "fts")
BLOCK = 1000  # queries timed back to back before their untimed score look-ups
TIMED = {
    "pg_textsearch": "the ids in index order (SELECT id ... ORDER BY column <@> to_bm25query(q, "
    "index) LIMIT k, no score projected, as an application runs it); the scores "
    "of the returned chunks are computed apart, untimed",
    "fts": "the ranked rows (SELECT id, ts_rank_cd(...) ... WHERE tsvector @@ query ORDER BY rank "
    "DESC LIMIT k), collapsed per chunk",
}
FTS_NOTE = (
    "PostgreSQL full-text search (ts_rank_cd over a tsvector), not BM25: no IDF and no "
    "length saturation; install pg_textsearch and create a bm25 index for BM25"
)


class Bm25Stage(BaseStage):
    kind = "bm25"
    score = SCORE_SIMILARITY
    options = frozenset(
        {"column", "method", "segmenter", "index", "tsvector", "config"}
        | {"normalization", "overfetch"}
    )
    guc_prefixes = ("pg_textsearch.",)

    # ---- configuration -----------------------------------------------------------------------
    def resolve(self, ctx: StageContext) -> dict:
        """What the stage will run: method, column, index, configuration, segmenter."""
        t = ctx.target
        if t is None:
            raise InputError(f"stage {ctx.stage} needs {param('target')}", field=param("target"))
        column, method, segmenter = self._options(ctx, t)
        oid, cols = self._columns(ctx, t, column)
        has_ext, indexes = self._bm25_indexes(ctx, t, oid, column)
        plan = {"column": column, "segmenter": segmenter}
        if t.id_column not in cols:
            raise InputError(
                f"column '{t.id_column}' does not exist in {t.qualified()}",
                field=param("id_column"),
            )
        id_type = cols[t.id_column]
        if method in ("auto", "pg_textsearch") and indexes:
            idx = indexes[0]
            plan.update(
                method="pg_textsearch",
                index=idx["name"],
                index_ref=idx["ref"],
                text_config=idx["text_config"],
                id_type=id_type,
            )
            if len(indexes) > 1:
                ctx.warn(
                    f"stage {ctx.stage}: several bm25 indexes on {column}; using "
                    f"{idx['name']} (choose with --opt {ctx.stage}:index=NAME)"
                )
            return plan
        if method == "pg_textsearch":
            why = (
                "the pg_textsearch extension is not installed"
                if not has_ext
                else f"no bm25 index on {t.qualified()}.{column}"
            )
            raise InputError(
                f"stage {ctx.stage}: {why} (CREATE INDEX ... USING bm25 ({column}) "
                f"WITH (text_config='english'), or {param('options')} "
                f"{ctx.stage}:method=fts)",
                field=param("options"),
            )
        return self._fts_plan(ctx, t, plan, method, has_ext, oid, cols)

    def _options(self, ctx: StageContext, t: Target) -> tuple[str, str, Any]:
        """(column, method, segmenter) from the stage's options and the target."""
        column = ctx.option("column") or getattr(t, "text_segmented_column", None) or t.text_column
        if not column:
            raise InputError(
                f"stage {ctx.stage} needs a text column: give the target "
                f"{param('text_column')}, or {param('options')} {ctx.stage}:column=COLUMN",
                field=param("options"),
            )
        method = (ctx.option("method") or "auto").lower()
        if method not in METHODS:
            raise InputError(
                f"option {ctx.stage}:method={method!r}: one of {', '.join(METHODS)}",
                field=param("options"),
            )
        segmenter = segmenters.check(
            ctx.option("segmenter") or getattr(t, "segmenter", None), param("options")
        )
        return column, method, segmenter

    def _columns(self, ctx: StageContext, t: Target, column: str) -> tuple[int, dict[str, str]]:
        """(the table's oid, its columns and their types); the text column must be one."""
        kb = ctx.kb
        oid = relation_oid(kb, t)
        if oid is None:  # dropped or renamed since the target was added
            raise DatabaseError(
                f"stage {ctx.stage}: the target's table {t.qualified()} does not exist (any more)"
            )
        cols = {name: types[1] for name, types in column_types(kb, oid).items()}
        if column not in cols:
            raise InputError(
                f"column '{column}' does not exist in {t.qualified()}", field=param("options")
            )
        return oid, cols

    def _bm25_indexes(
        self, ctx: StageContext, t: Target, oid: int, column: str
    ) -> tuple[bool, list[dict]]:
        """(pg_textsearch installed, its bm25 indexes on the column: the one ``index`` names)."""
        kb = ctx.kb
        has_ext = kb.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_textsearch')"
        ).fetchone()[0]  # type: ignore[index]  # one row, always
        indexes = bm25_sql.bm25_indexes(kb, oid, column) if has_ext else []
        wanted = ctx.option("index")
        if wanted:
            indexes = [i for i in indexes if i["name"] == wanted]
            if not indexes:
                raise InputError(
                    f"'{wanted}' is not a pg_textsearch bm25 index on {t.qualified()}.{column}",
                    field=param("options"),
                )
        return has_ext, indexes

    def _fts_plan(
        self,
        ctx: StageContext,
        t: Target,
        plan: dict,
        method: str,
        has_ext: bool,
        oid: int,
        cols: dict[str, str],
    ) -> dict:
        """The full-text search fallback (ts_rank_cd): configuration, tsvector, GIN index."""
        kb, column = ctx.kb, plan["column"]
        tsv = ctx.option("tsvector")
        if tsv and cols.get(tsv) != "tsvector":
            raise InputError(
                f"'{tsv}' is not a tsvector column of {t.qualified()}", field=param("options")
            )
        gin = bm25_sql.fts_indexes(kb, oid, column, tsv)
        # no configuration given: the one of a GIN index on the column, so that it serves
        config = (
            ctx.option("config")
            or next((g["text_config"] for g in gin if g["text_config"]), None)
            or kb.execute("SELECT current_setting('default_text_search_config')").fetchone()[0]  # type: ignore[index]  # one row, always
        )
        try:
            with kb.transaction():
                config = kb.execute("SELECT %s::regconfig::text", (config,)).fetchone()[0]  # type: ignore[index]  # one row, always
        except Exception:
            raise InputError(
                f"'{config}' is not a text search configuration of this server",
                field=param("options"),
            ) from None
        why = (
            (
                "the pg_textsearch extension is not installed"
                if not has_ext
                else f"no bm25 index on {t.qualified()}.{column}"
            )
            if method == "auto"
            else "asked for"
        )
        plan.update(
            method="fts",
            text_config=config,
            tsvector=tsv,
            normalization=ctx.option("normalization", 0, int),
            note=f"{FTS_NOTE} ({why})",
        )
        if method == "auto":
            ctx.warn(
                f"stage {ctx.stage}: {why}; ranking with PostgreSQL full-text search "
                "(ts_rank_cd), not BM25"
            )
        serving = [g["name"] for g in gin if tsv or g["text_config"] == config]
        plan["fts_index"] = serving[0] if serving else None
        if not serving:
            plan["index_hint"] = bm25_sql.fts_index_sql(t, column, tsv, config, kb)
            what = tsv or f"to_tsvector('{config}', {column})"
            ctx.warn(
                f"stage {ctx.stage}: no GIN index on {what}: every query scans the whole "
                f"table; create one: {plan['index_hint']}"
            )
        return plan

    def first_limit(self, ctx: StageContext) -> int:
        """The first LIMIT: ``--depth``, or over-fetched when chunks have several rows."""
        return refetch.fetch_limit(ctx.depth, refetch.overfetch(ctx))

    def statement(
        self, ctx: StageContext, plan: dict, batch: bool, limit: int | None = None
    ) -> Any:
        """The timed statement (LIMIT ``limit``, default :meth:`first_limit`)."""
        q = bm25_sql.batch_text() if batch else sql.Placeholder("q")
        limit = limit or self.first_limit(ctx)
        if plan["method"] == "pg_textsearch":
            body, params = bm25_sql.textsearch(ctx.target, plan["column"], limit, q)
            params["idx"] = plan["index_ref"]
        else:
            body, params = bm25_sql.fulltext(
                ctx.target,
                plan["column"],
                plan["tsvector"],
                plan["text_config"],
                limit,
                q,
                plan["normalization"],
            )
        wrap = bm25_sql.batch if batch else bm25_sql.per_query
        return wrap(body, plan["method"]), params

    def begin(self, ctx: StageContext) -> dict:
        kb = ctx.kb
        if kb.info.transaction_status != 0:
            kb.rollback()
        kb.execute("SET TRANSACTION READ ONLY")
        return gucs.apply_local(kb, ctx.settings_for(self.guc_prefixes))

    def _texts(self, ctx: StageContext, plan: dict) -> dict[str, str]:
        return {
            q.query_id: segmenters.segment(q.text, plan["segmenter"])
            for q in ctx.queries
            if q.text and q.text.strip()
        }

    def prepare(self, ctx: StageContext) -> None:
        if ctx.depth < 1:
            raise InputError(f"{param('depth')} must be >= 1", field=param("depth"))
        try:
            plan = self.resolve(ctx)
            texts = self._texts(ctx, plan)
            if ctx.queries and not texts:
                raise InputError(
                    f"stage {ctx.stage}: no query of test set '{ctx.testset}' has "
                    "text to search for",
                    field=param("stages"),
                )
            self.begin(ctx)
            stmt, params = self.statement(ctx, plan, False)
            sample = next(iter(texts.values()), "")
            ctx.kb.execute(sql.SQL("EXPLAIN ") + stmt, {**params, "q": sample})
        finally:
            ctx.kb.rollback()

    # ---- running -----------------------------------------------------------------------------
    def run(self, ctx: StageContext, run_name: str) -> int:
        assert ctx.target is not None  # a stage with a table has a target
        plan = self.resolve(ctx)
        texts = self._texts(ctx, plan)
        missing = [q.query_id for q in ctx.queries if q.query_id not in texts]
        if missing:
            ctx.warn(
                f"stage {ctx.stage}: {len(missing)} queries have no text and get no result "
                f"(first: '{missing[0]}')"
            )
        settings = self.begin(ctx)
        try:
            stmt, params = self.statement(ctx, plan, ctx.batch)
            scan = self._scan(ctx, plan, texts) if not ctx.batch else None
            if plan.get("fts_index") and scan == "sequential scan":
                ctx.warn(
                    f"stage {ctx.stage}: the planner scans the whole table rather than use "
                    f"GIN index {plan['fts_index']} (a small table, or run ANALYZE)"
                )
            run_params = {
                "kind": self.kind,
                "role": self.role,
                "score": SCORE_SIMILARITY,
                **plan,
                "scan": scan,
                "settings": settings,
                "batch": ctx.batch,
                "target": ctx.target.name,
                "queries_without_text": len(missing),
            }
            run_params.pop("index_ref", None)
            run_params.pop("id_type", None)
            run_params.update(timed=TIMED[plan["method"]], timed_statement=stmt.as_string(ctx.kb))
            with store.run_scope(
                ctx,
                run_name,
                params=run_params,
                order_rule=ORDER_SIMILARITY,
                timing_boundary=timing.boundary(ctx, TIMED[plan["method"]]),
            ) as out:
                fetch = _Fetch(self, ctx, plan, params)
                if ctx.batch:
                    self._run_batch(ctx, fetch, texts, out)
                else:
                    self._run_each(ctx, fetch, texts, out)
            return out.run_id
        finally:
            ctx.kb.rollback()

    def _scan(self, ctx: StageContext, plan: Any, texts: Any) -> str:
        """How the planner serves the first query: 'index NAME' or 'sequential scan'."""
        from . import plan_check

        stmt, params = self.statement(ctx, plan, False)
        p = plan_check.explain(ctx.kb, stmt, {**params, "q": next(iter(texts.values()), "")})
        scans = plan_check.index_scans(p)
        return f"index {scans[0][1]}" if scans else "sequential scan"

    def _run_each(self, ctx: StageContext, fetch: _Fetch, texts: Any, out: Any) -> None:
        """Per block of queries: first every timed statement, back to back (with its larger
        LIMITs where a query is short), then the untimed score look-ups of the block. A score
        look-up between two timed statements would slow the next one down (pg_textsearch's
        standalone scorer displaces what the index scan keeps warm: measured, about 2x the p50
        on Cranfield), which no application pays."""
        counts, limits = [], []
        if ctx.progress:
            ctx.progress.start(ctx.stage, len(ctx.queries))
        for start in range(0, len(ctx.queries), BLOCK):
            fetched: list[tuple] = []
            for q in ctx.queries[start : start + BLOCK]:
                qtext = texts.get(q.query_id)
                if qtext is None:
                    fetched.append((q, None, None, 0.0, None))
                    continue
                limit = fetch.first
                while True:
                    raw, ms, server_ms = fetch.timed(limit).execute(dict(fetch.params, q=qtext))
                    if fetch.complete(raw, limit):
                        break
                    limit = refetch.grow(limit)
                fetched.append((q, qtext, raw, ms, server_ms))
                limits.append(limit)
            for q, qtext, raw, ms, server_ms in fetched:
                ranked = fetch.ranked(qtext, raw)[: ctx.depth] if qtext is not None else []
                out.add(
                    q.query_id,
                    ranked,
                    latency_ms=ms,
                    server_ms=server_ms,
                    rows_returned=len(ranked),
                )
                counts.append(len(ranked))
                if ctx.progress:
                    ctx.progress.advance()
        out.params.update(rows_summary(counts, ctx.depth), **fetch.summary(limits))

    def _run_batch(self, ctx: StageContext, fetch: _Fetch, texts: Any, out: Any) -> None:
        """One set-based statement for all queries (timed together, ``batch_ms``); the queries
        left short of ``--depth`` chunks while their scan returned every row asked for run again,
        together, with a larger LIMIT. pg_textsearch's scores are looked up afterwards, untimed."""
        if ctx.progress:
            ctx.progress.start(ctx.stage + " (batch)", len(ctx.queries))
        pending = [q.query_id for q in ctx.queries if q.query_id in texts]
        limit, ms, limits, raw = fetch.first, 0.0, {}, {}
        while pending:
            stmt, params = self.statement(ctx, fetch.plan, True, limit)
            p = dict(params, ids=pending, texts=[texts[i] for i in pending])
            t0 = time.perf_counter()
            rows = ctx.kb.execute(stmt, p).fetchall()
            ms += (time.perf_counter() - t0) * 1000.0
            by_query: dict[str, list] = {}
            for qid, *rest in rows:
                by_query.setdefault(qid, []).append(tuple(rest))
            for qid in pending:
                raw[qid], limits[qid] = by_query.get(qid, []), limit
            pending = [qid for qid in pending if not fetch.complete(raw[qid], limit)]
            limit = refetch.grow(limit)
        counts = []
        for q in ctx.queries:
            ranked = (
                fetch.ranked(texts[q.query_id], raw[q.query_id])[: ctx.depth]
                if q.query_id in raw
                else []
            )
            out.add(q.query_id, ranked)
            counts.append(len(ranked))
            if ctx.progress:
                ctx.progress.advance()
        out.params["batch_ms"] = ms
        out.params.update(rows_summary(counts, ctx.depth), **fetch.summary(list(limits.values())))


class _Fetch:
    """One stage run's statements: the timed one per LIMIT (prepared), pg_textsearch's untimed
    score look-up, and the rules that say whether a statement's rows are enough and turn them
    into a ranked list."""

    def __init__(self, stage: Bm25Stage, ctx: StageContext, plan: dict, params: dict):
        self.stage, self.ctx, self.plan, self.params = stage, ctx, plan, params
        self.first = stage.first_limit(ctx)
        self.textsearch = plan["method"] == "pg_textsearch"
        self._timed: dict[int, timing.TimedStatement] = {}
        if self.textsearch:
            stmt, sp = bm25_sql.textsearch_scores(ctx.target, plan["column"], plan["id_type"])
            self.scores = stmt.as_string(ctx.kb)
            self.score_params = dict(sp, idx=plan["index_ref"])

    def timed(self, limit: int) -> timing.TimedStatement:
        if limit not in self._timed:
            stmt, _ = self.stage.statement(self.ctx, self.plan, False, limit)
            self._timed[limit] = timing.TimedStatement(self.ctx.kb, stmt, self.ctx.server_timing)
        return self._timed[limit]

    def complete(self, rows: list, limit: int) -> bool:
        """Whether a statement with LIMIT ``limit`` gave enough: ``--depth`` distinct chunks, or
        fewer rows than asked for (the scan is exhausted). pg_textsearch: ``rows`` are
        (chunk_id,) in index order; a sequential-scan plan's non-matching rows come after every
        match, so counting them too never stops before the matches are all in. Full-text
        search: (chunk_id, score, n) already collapsed, n the matching rows."""
        if not self.textsearch:
            return len(rows) >= self.ctx.depth or (rows[0][2] if rows else 0) < limit
        return len(rows) < limit or len({r[0] for r in rows}) >= self.ctx.depth

    def ranked(self, qtext: str, rows: list) -> list:
        """[(chunk_id, score)] best first, higher is better. pg_textsearch: the scores of the
        returned chunks are looked up here (untimed); non-matching rows (score 0, a sequential
        scan's) are dropped."""
        if not self.textsearch:
            return [(r[0], r[1]) for r in rows]
        chunks = list(dict.fromkeys(r[0] for r in rows))
        if not chunks:
            return []
        scored = self.ctx.kb.execute(
            self.scores, dict(self.score_params, q=qtext, chunks=chunks)
        ).fetchall()
        return [(c, -s) for c, s in scored if s < 0]

    def summary(self, limits: list) -> dict:
        target = self.ctx.target
        assert target is not None
        return refetch.summary(limits, None if target.unique_id else self.first)
