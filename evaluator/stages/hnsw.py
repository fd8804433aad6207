"""``hnsw``: pgvector HNSW index scan. Settings: hnsw.ef_search, hnsw.iterative_scan,
hnsw.max_scan_tuples, hnsw.scan_mem_multiplier.

Trap: with ``hnsw.iterative_scan = off`` the index returns at most ``hnsw.ef_search`` rows, so
``ef_search`` below ``--depth`` truncates every list (and filters truncate it further). The stage
warns and records the rows each query returned (pgeval.query_timing.rows_returned)."""

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
        if it == "off" and ef < ctx.depth:
            # sampled queries fetch one row more than --depth: their own row, dropped after
            fetched = (
                f"the {ctx.depth} rows fetched per query (--depth {ctx.depth - 1}, plus the "
                "sampled query's own row, which is dropped)"
                if ctx.extra.get("exclude_own")
                else f"--depth {ctx.depth}"
            )
            return [
                f"stage {ctx.stage}: hnsw.ef_search={ef} is below {fetched} and "
                "hnsw.iterative_scan is off: the index returns at most "
                f"{ef} rows per query (raise hnsw.ef_search or set "
                "hnsw.iterative_scan=relaxed_order); rows returned are recorded"
            ]
        return []
