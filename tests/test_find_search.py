"""`sweep --find`'s search (evaluator/tuning/sweep/find.py) on a known monotone recall curve: the
least value reaching the target, and with a floor (advise: the application's LIMIT where the
setting caps the rows returned) never a value under it; and which setting advise finds per
build (DiskANN: the re-ranked candidates on its SBQ layout, the search list on the plain one)."""

from __future__ import annotations

from evaluator.tuning.sweep.find import search


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


def test_advise_finds_the_setting_that_bounds_the_build():
    from evaluator.tuning.advise.plan import AdviseConfig, designs

    def plan(**kw):
        cfg = AdviseConfig(target="t", designs=("diskann",), **kw)
        return [(d.build, d.find) for d in designs(cfg, ["diskann"], {})]

    # the default layout (memory_optimized: SBQ) re-ranks query_rescore candidates
    assert plan() == [({"num_neighbors": "50"}, "diskann.query_rescore")]
    built = plan(build=("diskann:storage_layout=memory_optimized,plain",))
    assert [f for _, f in built] == ["diskann.query_rescore", "diskann.query_search_list_size"]
    # fixed by --set: the other one is found
    fixed = plan(settings={"diskann.query_rescore": "200"})
    assert fixed == [({"num_neighbors": "50"}, "diskann.query_search_list_size")]
