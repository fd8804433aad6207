"""``hnsw``: pgvector HNSW index scan. Settings: hnsw.ef_search, hnsw.iterative_scan,
hnsw.max_scan_tuples, hnsw.scan_mem_multiplier.

Trap: with ``hnsw.iterative_scan = off`` the index returns at most ``hnsw.ef_search`` rows, so
``ef_search`` below ``--depth`` truncates every list (and filters truncate it further). The stage
records the rows each query returned (pgeval.query_timing.rows_returned) and warns where a figure
printed is affected: below ``--depth`` in a pipeline (later stages read the whole list), below the
deepest cut-off a sweep, advise or watch prints (``ctx.extra["figures_at"]``) otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .vector_common import VectorStage

if TYPE_CHECKING:
    from .base import StageContext


class HnswStage(VectorStage):
    kind = "hnsw"

    def trap_warnings(self, ctx: StageContext, effective: dict[str, str]) -> list[str]:
        from . import gucs

        cur = gucs.current(ctx.kb, ["hnsw.ef_search", "hnsw.iterative_scan"])
        ef = int(effective.get("hnsw.ef_search") or cur["hnsw.ef_search"] or 40)
        it = effective.get("hnsw.iterative_scan") or cur["hnsw.iterative_scan"] or "off"
        # a sweep (and advise, watch) prints figures at cut-offs up to figures_at["k"]: fewer
        # rows than --depth change none of them unless fewer than that; a pipeline's later
        # stages and its stage-report read the stage's whole --depth
        figures = ctx.extra.get("figures_at")
        needed = figures["rows"] if figures else ctx.depth
        if it == "off" and ef < needed:
            # sampled queries fetch one row more: their own row, dropped after
            own = ctx.extra.get("exclude_own")
            if figures:
                fetched = (
                    f"the {needed} rows the figures at cut-off {figures['k']} need (plus the "
                    "sampled query's own row, which is dropped)"
                    if own
                    else f"the {needed} rows the figures at cut-off {figures['k']} rank"
                )
            else:
                fetched = (
                    f"the {ctx.depth} rows fetched per query (--depth {ctx.depth - 1}, plus the "
                    "sampled query's own row, which is dropped)"
                    if own
                    else f"--depth {ctx.depth}"
                )
            return [
                f"stage {ctx.stage}: hnsw.ef_search={ef} is below {fetched} and "
                "hnsw.iterative_scan is off: the index returns at most "
                f"{ef} rows per query (raise hnsw.ef_search or set "
                "hnsw.iterative_scan=relaxed_order); rows returned are recorded"
            ]
        return []
