"""`sweep --find`'s search (evaluator/dba/sweep/find.py) on a known monotone recall curve: the
least value reaching the target, and with a floor (advise: the application's LIMIT where the
setting caps the rows returned) never a value under it."""

from __future__ import annotations

from evaluator.dba.sweep.find import search


def curve(v: int) -> float:
    return min(1.0, v / 10)  # ef_search v under LIMIT 10 returns v rows: recall v / 10


def test_least_value_reaching_the_target():
    found = search("hnsw.ef_search", {}, curve, 0.9, 40, 1000)
    assert found.reached and found.value == 9
    assert [9, 0.9] in found.path and [8, 0.8] in found.path


def test_a_floor_is_never_gone_under():
    found = search("hnsw.ef_search", {}, curve, 0.9, 40, 1000, minimum=10)
    assert found.reached and found.value == 10
    assert min(v for v, _ in found.path) == 10  # 40, 20, 10: halving stops at the floor
    started_below = search("hnsw.ef_search", {}, curve, 0.5, 3, 1000, minimum=10)
    assert started_below.value == 10 and started_below.path[0][0] == 10
