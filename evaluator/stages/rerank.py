"""``rerank``: re-scores the top-n candidates of an earlier stage and stores them best first
("score": "similarity"; run.depth = top-n).

Options (``--opt rerank:KEY=VALUE``):

- ``reranker``: a spec of :mod:`evaluator.providers.rerankers` (``http:URL``, ``tei:URL``,
  ``dashscope:URL``, ``cross-encoder:MODEL``, ``biencoder:EMBEDDER``), or ``exact``: the exact
  full-precision distance of the target's vector column (or ``column``) to the query embedding,
  stored as ``-distance`` — useful after a quantised index (halfvec, binary, DiskANN with
  compressed storage).
- ``input``: the stage whose list is re-scored (default: the latest merge, else the latest
  retrieval stage that is not exact search, else exact search).
- ``top_n``: how many of its candidates (default 50, at most ``--depth``).
- ``threshold``: drop candidates scoring below it (the reranker's own scale).
- ``model``, ``api_key_env``, ``timeout``, ``batch_size``: for HTTP rerankers; ``base_url``,
  ``dimensions`` for a bi-encoder's embedder; ``column``: the text column (default the target's
  ``--text-column``) or, for ``exact``, the vector column.

Latency is per query: fetching the candidates' texts from the knowledge base plus the reranker
call (or the exact distance statement).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from ..core.errors import InputError, param
from ..providers import rerankers
from . import gucs, rerank_sql, store
from .base import ORDER_SIMILARITY, SCORE_SIMILARITY, BaseStage, StageContext

DEFAULT_TOP_N = 50
BOUNDARY = (
    "client round trip per query: candidate texts fetched from the knowledge base, then "
    "the reranker call"
)
BOUNDARY_EXACT = "client round trip per query: one exact-distance statement over the candidates"


class RerankStage(BaseStage):
    kind = "rerank"
    score = SCORE_SIMILARITY
    options = frozenset(
        {"reranker", "top_n", "threshold", "model", "api_key_env", "timeout", "batch_size"}
        | {"column", "input", "base_url", "dimensions"}
    )

    def config(self, ctx: StageContext) -> dict:
        spec = ctx.option("reranker") or ctx.extra.get("reranker")
        if not spec:
            raise InputError(
                f"stage {ctx.stage} needs a reranker: {param('options')} {ctx.stage}:reranker="
                "http:URL | tei:URL | dashscope:URL | cross-encoder:MODEL | "
                "biencoder:EMBEDDER | exact",
                field=param("options"),
            )
        top_n = ctx.option("top_n", min(DEFAULT_TOP_N, ctx.depth), int)
        if top_n < 1:
            raise InputError(f"option {ctx.stage}:top_n must be >= 1", field=param("options"))
        if top_n > ctx.depth:
            raise InputError(
                f"option {ctx.stage}:top_n={top_n} is above {param('depth')} {ctx.depth}: the "
                f"earlier stages keep only their top {param('depth')}",
                field=param("options"),
            )
        return {
            "spec": spec.strip(),
            "top_n": top_n,
            "threshold": ctx.option("threshold", None, float),
        }

    def reranker(self, ctx: StageContext, spec: str) -> Any:  # a rerankers.Reranker
        emb = {
            k: ctx.option(k, None, cast)
            for k, cast in (("base_url", str), ("dimensions", int), ("api_key_env", str))
            if ctx.option(k) is not None
        }
        return rerankers.parse(
            spec,
            model=ctx.option("model"),
            api_key_env=ctx.option("api_key_env"),
            timeout=ctx.option("timeout", None, float),
            batch_size=ctx.option("batch_size", None, int),
            embedder_options=emb,
        )

    def prepare(self, ctx: StageContext) -> None:
        cfg = self.config(ctx)
        t = ctx.target
        if t is None:
            raise InputError(
                f"stage {ctx.stage} needs {param('target')} (the candidates' texts or vectors live there)",
                field=param("target"),
            )
        try:
            if cfg["spec"] == "exact":
                rerank_sql.exact_target(ctx.kb, t, ctx.option("column"))
                if any(q.embedding is None for q in ctx.queries):
                    raise InputError(
                        f"stage {ctx.stage} with reranker exact needs query "
                        "embeddings: put a vector stage (exact, hnsw, ...) in "
                        f"{param('stages')}",
                        field=param("options"),
                    )
                return
            self.reranker(ctx, cfg["spec"])
            column = ctx.option("column") or t.text_column
            if not column:
                raise InputError(
                    f"stage {ctx.stage} needs the chunks' text: give the target "
                    f"{param('text_column')}, or {param('options')} {ctx.stage}:column=COLUMN",
                    field=param("options"),
                )
            if column not in rerank_sql.columns(ctx.kb, t):
                raise InputError(
                    f"column '{column}' does not exist in {t.qualified()}", field=param("options")
                )
        finally:
            ctx.kb.rollback()

    def input_run(self, ctx: StageContext) -> tuple[str, int]:
        """(stage name, run id) of the list to re-score."""
        name = ctx.option("input")
        if name:
            if name not in ctx.previous:
                raise InputError(
                    f"option {ctx.stage}:input={name!r} is not an earlier stage "
                    f"({', '.join(ctx.previous) or 'none'})",
                    field=param("options"),
                )
            return name, ctx.previous[name]
        if not ctx.previous:
            raise InputError(
                f"stage {ctx.stage} has nothing to re-score: list a retrieval "
                f"stage before it in {param('stages')}",
                field=param("stages"),
            )
        role = ctx.previous_roles()
        order = list(ctx.previous.items())[::-1]
        for wanted in (("merge",), ("ann", "keyword", "path"), ("exact",), ("rerank",)):
            for n, r in order:
                if role.get(r) in wanted:
                    return n, r
        return order[0]

    def candidates(self, ctx: StageContext, run_id: int, top_n: int) -> dict[str, list[str]]:
        rows = ctx.results.execute(
            "SELECT query_id, chunk_id FROM pgeval.result WHERE run_id = %s AND rank <= %s "
            "ORDER BY query_id, rank",
            (run_id, top_n),
        ).fetchall()
        ctx.results.rollback()
        out: dict[str, list[str]] = {}
        for q, c in rows:
            out.setdefault(q, []).append(c)
        return out

    def run(self, ctx: StageContext, run_name: str) -> int:
        assert ctx.target is not None  # a stage with a table has a target
        cfg = self.config(ctx)
        exact = cfg["spec"] == "exact"
        input_name, input_id = self.input_run(ctx)
        cands = self.candidates(ctx, input_id, cfg["top_n"])
        kb, t = ctx.kb, ctx.target
        if kb.info.transaction_status != 0:
            kb.rollback()
        kb.execute("SET TRANSACTION READ ONLY")
        gucs.apply_local(kb, ctx.settings_for(()))  # --statement-timeout and planner settings
        try:
            id_type = rerank_sql.columns(kb, t)[t.id_column][1]
            if exact:
                from ..core.vector_types import register_vector

                register_vector(kb)
                target = rerank_sql.exact_target(kb, t, ctx.option("column"))
                stmt, params = rerank_sql.distances(target, id_type)
                label, column = "exact", target.vector_column
            else:
                reranker = self.reranker(ctx, cfg["spec"])
                column = ctx.option("column") or t.text_column  # type: ignore[assignment]  # prepare() checked it
                stmt, params = rerank_sql.texts(t, column, id_type)
                label = reranker.label
            text = stmt.as_string(kb)
            stats = {"dropped_by_threshold": 0, "unscored": 0, "queries_without_text": 0}
            run_params = {
                "kind": self.kind,
                "role": self.role,
                "score": SCORE_SIMILARITY,
                "reranker": label,
                "input": input_name,
                "input_run": input_id,
                "top_n": cfg["top_n"],
                "threshold": cfg["threshold"],
                "column": column,
                "target": t.name,
                "model": ctx.option("model"),
            }
            if exact:
                run_params["metric"] = t.distance
            sub = replace(ctx, depth=cfg["top_n"])
            with store.run_scope(
                sub,
                run_name,
                params=run_params,
                order_rule=ORDER_SIMILARITY,
                timing_boundary=BOUNDARY_EXACT if exact else BOUNDARY,
            ) as out:
                if ctx.progress:
                    ctx.progress.start(ctx.stage, len(ctx.queries))
                for q in ctx.queries:
                    ids = cands.get(q.query_id, [])
                    if ids and not exact and not (q.text and q.text.strip()):
                        stats["queries_without_text"] += 1
                        ids = []
                    if ids:
                        t0 = time.perf_counter()
                        if exact:
                            p = dict(params, ids=ids, q=np.asarray(q.embedding, dtype=np.float32))
                            scored = {c: -d for c, d in kb.execute(text, p, prepare=True)}
                        else:
                            found: dict[Any, Any] = dict(
                                kb.execute(text, dict(params, ids=ids), prepare=True)
                            )
                            docs = [c for c in ids if found.get(c) is not None]
                            scores = reranker.score(q.text, [found[c] for c in docs])
                            scored = {c: s for c, s in zip(docs, scores) if s is not None}
                        ms = (time.perf_counter() - t0) * 1000.0
                        stats["unscored"] += len(ids) - len(scored)
                        ranked = sorted(scored.items(), key=lambda x: (-x[1], x[0]))
                        if cfg["threshold"] is not None:
                            kept = [x for x in ranked if x[1] >= cfg["threshold"]]
                            stats["dropped_by_threshold"] += len(ranked) - len(kept)
                            ranked = kept
                        out.add(q.query_id, ranked, latency_ms=ms, rows_returned=len(ids))
                    else:
                        out.add(q.query_id, [])
                    if ctx.progress:
                        ctx.progress.advance()
                out.params.update(stats)
            if stats["unscored"]:
                ctx.warn(
                    f"stage {ctx.stage}: {stats['unscored']} candidates got no score (no "
                    "text in the knowledge base, or the reranker skipped them) and were "
                    "dropped"
                )
            if stats["queries_without_text"]:
                ctx.warn(
                    f"stage {ctx.stage}: {stats['queries_without_text']} queries have no "
                    "text to rerank with and get no result"
                )
            return out.run_id
        finally:
            kb.rollback()
