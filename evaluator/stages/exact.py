"""``exact``: brute-force kNN over the target (index scans disabled with
``SET LOCAL enable_indexscan = off``, so neither HNSW, IVFFlat nor DiskANN can serve it; the
plan is checked). Its distances are the ceiling every ANN stage is measured against."""

from __future__ import annotations

from typing import Any

from .vector_common import VectorStage


class ExactStage(VectorStage):
    options = VectorStage.options | {"ground_truth"}
    kind = "exact"
    defaults = {"enable_indexscan": "off"}
    # a --set enable_seqscan=off meant for the ANN stages would leave the exact stage's planner
    # nothing but an ANN index: exact search always keeps its sequential scan (an explicit
    # --set enable_indexscan=on still reaches the plan check, which refuses an ANN index)
    forced = {"enable_seqscan": "on"}

    def run(self, ctx: Any, run_name: str) -> int:
        offered = ctx.extra.get("ground_truth")  # the stored one (ground_truth.exact_stage.offer)
        if offered:
            return int(offered["run"](ctx, run_name))
        return super().run(ctx, run_name)

    def stage_settings(self, ctx: Any) -> dict[str, str]:
        settings = super().stage_settings(ctx)
        settings.update(self.forced)
        target = getattr(ctx, "target", None)  # (a context without one: no statement)
        if target is not None and target.statement is not None:
            # the application's statement: its exact twin, as pgeval.evaluate_recall runs it
            from ..targets.statement import TWIN_SETTINGS

            settings.update(TWIN_SETTINGS)
        return settings
