"""The hnsw stage warns that ef_search is below the rows fetched only where a figure printed is
affected (issue 40, item 9): a sweep, advise and watch print figures at cut-offs up to K (and
recall@10, nDCG@10), so ef_search=10 under a sweep's depth of 20 changes none of them; a pipeline's
later stages and its stage-report read the stage's whole --depth."""

from __future__ import annotations

import pytest

from evaluator.stages.hnsw import HnswStage
from evaluator.tuning.sweep.config import SweepConfig
from evaluator.tuning.sweep.context import point_context


def _warnings(conn, ef: int, *, k: int = 10, depth: int = 20, own: bool = False, sweep=True):
    if sweep:
        cfg = SweepConfig(testset="t", target="t", stage="hnsw", k=k)
        ctx = point_context(
            cfg, (conn, conn), None, "hnsw", experiment=("e", 1), testset=("t", 1),
            queries=([], None), depth=depth, rep=1, settings={}, own=own, extra={},
        )  # fmt: skip
    else:
        from evaluator.stages.base import StageContext

        ctx = StageContext(conn, conn, None, "t", 1, "e", 1, stage="hnsw", depth=depth)
    return HnswStage().trap_warnings(ctx, {"hnsw.ef_search": str(ef)})


@pytest.mark.parametrize("ef", [10, 19])
def test_a_sweep_at_k_10_does_not_warn_about_its_depth_of_20(conn, ef):
    assert _warnings(conn, ef) == []


def test_a_sweep_warns_where_its_figures_lose_rows(conn):
    (w,) = _warnings(conn, 5)
    assert "hnsw.ef_search=5 is below the 10 rows the figures at cut-off 10 rank" in w
    (w,) = _warnings(conn, 15, k=20, depth=40)
    assert "below the 20 rows the figures at cut-off 20" in w
    # sampled queries drop their own row: ef_search=10 leaves recall@10 nine rows at most
    (w,) = _warnings(conn, 10, own=True)
    assert "below the 11 rows the figures at cut-off 10 need (plus the sampled query's own" in w


def test_a_pipeline_still_warns_below_its_depth(conn):
    (w,) = _warnings(conn, 10, depth=50, sweep=False)
    assert "hnsw.ef_search=10 is below --depth 50" in w
    assert _warnings(conn, 50, depth=50, sweep=False) == []
