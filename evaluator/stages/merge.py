"""``merge``: fusion of earlier runs of the same experiment and repetition, computed in SQL over
the stored results (``pgeval.fuse_rrf``, ``pgeval.fuse_scores`` in sql/130_fusion.sql) with one
INSERT ... SELECT: no row leaves the database.

Options (``--opt merge:KEY=VALUE``):

- ``method``: ``rrf`` (default), ``minmax`` or ``zscore`` (normalised weighted score sum).
- ``k``: the RRF constant (default 60).
- ``inputs``: the stages to fuse, comma-separated (default: every earlier retrieval stage —
  not merge or rerank — and the exact stage only when no ANN stage precedes the merge, since
  exact search is then the vector path rather than the ceiling).
- ``weights``: per input, ``hnsw:1,bm25:0.5`` or positional ``1,0.5`` (default 1 each).
- ``input_depth``: how many of each input's chunks enter the fusion: one number for every input
  (``20``) or per input (``hnsw:20,bm25:50``, positional ``20,50``); default every stored row
  (``--depth``).
- ``depth``: how many fused chunks to store per query (default ``--depth``); the stage after it
  (rerank) takes its own top-n of these.

``run.params`` records method, k, weights, input depths, the inputs (stage names, as the loss
attribution reads them) and their run ids. There is no per-query latency: the whole fusion is one statement
(``params.fusion_ms``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..core.errors import InputError, param
from . import store
from .base import BOUNDARY_BATCH, ORDER_SIMILARITY, SCORE_SIMILARITY, BaseStage, StageContext

METHODS = ("rrf", "minmax", "zscore")
# the fused lists, with bound %(runs)s, %(w)s, %(k)s, %(method)s, %(depth)s, %(input_depths)s
# (aligned with the runs; NULL: every stored row): the merge stage's and pgeval tune's one call
FUSE_RRF = "pgeval.fuse_rrf(%(runs)s, %(w)s, %(k)s, %(depth)s, NULL, %(input_depths)s) f"
FUSE_SCORES = "pgeval.fuse_scores(%(runs)s, %(w)s, %(method)s, %(depth)s, NULL, %(input_depths)s) f"


def _number(value: str, what: str, cast: Callable[[str], float]) -> float:
    try:
        out = cast(value)
    except ValueError:
        raise InputError(f"{what} '{value}' is not a number", field=param("options")) from None
    if out != out or out < 0:
        raise InputError(f"{what} must be a number >= 0, got '{value}'", field=param("options"))
    return out


def per_input(
    spec: str | None,
    inputs: list[str],
    what: str = "weight",
    cast: Callable[[str], float] = float,
    default: float | None = 1.0,
) -> dict[str, Any]:
    """'hnsw:1,bm25:0.5' or '1,0.5' (aligned with ``inputs``) -> {stage: value}; a stage not
    named keeps ``default``."""
    values: dict[str, Any] = {name: default for name in inputs}
    if not spec:
        return values
    items = [x.strip() for x in spec.split(",") if x.strip()]
    if all(":" in x for x in items):
        for item in items:
            name, _, value = item.partition(":")
            name = name.strip()
            if name not in values:
                raise InputError(
                    f"{what} for '{name}', which is not an input of the merge "
                    f"({', '.join(inputs)})",
                    field=param("options"),
                )
            values[name] = _number(value.strip(), f"{what} of {name}", cast)
        return values
    if any(":" in x for x in items) or len(items) != len(inputs):
        raise InputError(
            f"{what}s '{spec}': give NAME:{'W' if what == 'weight' else 'N'} for each input, or {len(inputs)} "
            f"numbers in the order {', '.join(inputs)}",
            field=param("options"),
        )
    return {name: _number(v, f"{what} of {name}", cast) for name, v in zip(inputs, items)}


def parse_weights(spec: str | None, inputs: list[str]) -> dict[str, float]:
    """'hnsw:1,bm25:0.5' or '1,0.5' (aligned with ``inputs``) -> {stage: weight}."""
    return per_input(spec, inputs)


def parse_input_depth(spec: str | None, inputs: list[str]) -> dict[str, int | None]:
    """One depth for every input ('20'), or per input ('hnsw:20,bm25:50', '20,50'); None:
    every stored row of that input."""
    text = (spec or "").strip()
    if text and "," not in text and ":" not in text:
        text = ",".join([text] * len(inputs))
    depths = per_input(text or None, inputs, "input depth", int, None)
    if any(d is not None and d < 1 for d in depths.values()):
        raise InputError(f"input depth must be >= 1, got '{spec}'", field=param("options"))
    return depths


class MergeStage(BaseStage):
    kind = "merge"
    score = SCORE_SIMILARITY
    options = frozenset({"method", "k", "depth", "weights", "inputs", "input_depth"})

    def settings(self, ctx: StageContext) -> dict:
        method = (ctx.option("method") or "rrf").lower()
        if method not in METHODS:
            raise InputError(
                f"option {ctx.stage}:method={method!r}: one of {', '.join(METHODS)}",
                field=param("options"),
            )
        k = ctx.option("k", 60.0, float)
        if k < 0:
            raise InputError(f"option {ctx.stage}:k must be >= 0", field=param("options"))
        depth = ctx.option("depth", ctx.depth, int)
        if depth < 1:
            raise InputError(f"option {ctx.stage}:depth must be >= 1", field=param("options"))
        return {"method": method, "k": k, "depth": depth}

    def prepare(self, ctx: StageContext) -> None:
        self.settings(ctx)
        named = [x.strip() for x in (ctx.option("inputs") or "").split(",") if x.strip()]
        if named:
            parse_weights(ctx.option("weights"), named)
        depth = ctx.option("input_depth")
        if named or (depth and "," not in depth and ":" not in depth):
            parse_input_depth(depth, named or ["each input"])  # before any stage runs

    def inputs(self, ctx: StageContext) -> list[tuple[str, int]]:
        """[(stage name, run id)] of the runs to fuse (same experiment and repetition)."""
        if not ctx.previous:
            raise InputError(
                f"stage {ctx.stage} has nothing to fuse: list retrieval stages "
                f"before it in {param('stages')}",
                field=param("stages"),
            )
        named = ctx.option("inputs")
        if named:
            names = [x.strip() for x in named.split(",") if x.strip()]
            unknown = [n for n in names if n not in ctx.previous]
            if unknown or not names:
                raise InputError(
                    f"option {ctx.stage}:inputs names '{', '.join(unknown)}', not an "
                    f"earlier stage ({', '.join(ctx.previous)})",
                    field=param("options"),
                )
            return [(n, ctx.previous[n]) for n in names]
        role = ctx.previous_roles()
        paths = [(n, r) for n, r in ctx.previous.items() if role.get(r) not in ("merge", "rerank")]
        if any(role.get(r) == "ann" for _, r in paths):
            paths = [(n, r) for n, r in paths if role.get(r) != "exact"]
        if not paths:
            raise InputError(
                f"stage {ctx.stage}: no retrieval stage before it to fuse", field=param("stages")
            )
        return paths

    def run(self, ctx: StageContext, run_name: str) -> int:
        cfg = self.settings(ctx)
        inputs = self.inputs(ctx)
        names = [n for n, _ in inputs]
        weights = parse_weights(ctx.option("weights"), names)
        input_depth = parse_input_depth(ctx.option("input_depth"), names)
        if len(inputs) == 1:
            ctx.warn(f"stage {ctx.stage} fuses a single input ({names[0]}): it only re-ranks it")
        params = {
            "kind": self.kind,
            "role": self.role,
            "score": SCORE_SIMILARITY,
            "method": cfg["method"],
            "inputs": names,
            "input_runs": [r for _, r in inputs],
            "weights": weights,
        }
        if any(d is not None for d in input_depth.values()):
            params["input_depth"] = input_depth
        if cfg["method"] == "rrf":
            params["k"] = cfg["k"]
        query = (
            "SELECT %(run)s::bigint AS run_id, f.query_id, f.rank, f.chunk_id, f.score FROM "
            + (FUSE_RRF if cfg["method"] == "rrf" else FUSE_SCORES)
        )
        conn = ctx.results
        run_id = store.create_stage_run(
            ctx,
            run_name,
            params=params,
            order_rule=ORDER_SIMILARITY,
            depth=cfg["depth"],
            timing_boundary=BOUNDARY_BATCH,
        )
        if ctx.progress:
            ctx.progress.start(ctx.stage + " (one statement)", 1)
        try:
            t0 = time.perf_counter()
            with conn.transaction():
                # one ranked list per query; the trigger joins the judged grades
                n = conn.execute(
                    "WITH f AS (" + query + "), ins AS (INSERT INTO pgeval.result_list "
                    "(run_id, query_id, scores, chunk_ids) SELECT run_id, query_id, "
                    "array_agg(score ORDER BY rank), array_agg(chunk_id ORDER BY rank) FROM f "
                    "GROUP BY run_id, query_id RETURNING cardinality(chunk_ids) AS n) "
                    "SELECT coalesce(sum(n), 0)::bigint FROM ins",
                    {
                        "run": run_id,
                        "runs": [r for _, r in inputs],
                        "w": [weights[n] for n in names],
                        "k": cfg["k"],
                        "depth": cfg["depth"],
                        "method": cfg["method"],
                        "input_depths": [input_depth[n] for n in names],
                    },
                ).fetchone()[0]  # type: ignore[index]  # an aggregate: always one row
            ms = (time.perf_counter() - t0) * 1000.0
        except BaseException:
            if conn.info.transaction_status != 0:
                conn.rollback()
            store.finish_run(conn, run_id, "failed")
            raise
        store.finish_run(conn, run_id, "complete", {"fusion_ms": ms, "rows": n})
        if ctx.progress:
            ctx.progress.advance()
        return run_id
