"""advise's rules over typed outcomes (tuning/advise/rules.py, tuning/advise/outcome.py), without a
server: an outcome reads as the row the JSON prints, each step returns a new one, and a new
rule is one function (or one entry) in rules.py (docs/ARCHITECTURE.md, "Adding an advise
rule")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evaluator.tuning.advise import recommend, rules
from evaluator.tuning.advise.outcome import Figures, Margin, Measurement, OnSample, Outcome
from evaluator.tuning.advise.plan import AdviseConfig

MB = 1048576


def outcome(p95: float, size: float, *, p99: float | None = None, sd: float = 0.0) -> Outcome:
    figures = Figures(
        recall=0.96, p95_ms=p95, p95_sd=sd, p99_ms=p99, index_bytes=size, build_ms=1e3
    )
    return Outcome(
        Measurement(
            design="hnsw",
            build={"m": 16},
            setting={"hnsw.ef_search": 40},
            figures=figures,
            reached=True,
            sweep="s",
            point="p1",
            at=None,
            index="i",
            counts=(1, 0, 0),
            find_path=[],
            setting_interval=None,
            points=[],
        )
    )


CONTEXT = {
    "rows": 1000,
    "dimension": 32,
    "vector_type": "vector",
    "maintenance_work_mem": 64 * MB,
    "shared_buffers": 128 * MB,
}


def test_an_outcome_is_its_json_row_in_order():
    row = replace(
        outcome(1.0, MB), queries="query set", measured_where="table", measured_on="table"
    )
    row = replace(row, margin=Margin(40, 0.01))
    keys = list(row.as_dict())
    assert keys[:3] == ["design", "build", "setting"]
    assert keys[-6:] == [
        "in_place",
        "queries",
        "measured_where",
        "measured_on",
        "recall_queries",
        "recall_margin",
    ]
    assert dict(row) == row.as_dict() and row["p95_ms"] == 1.0 and row.get("low_end") is None
    sampled = replace(row, measured_on="sample", on_sample=OnSample(None, "later", None))
    assert list(sampled.as_dict())[-5:-2] == ["dropped", "on_table", "predicted"]


def test_the_tie_rule_prefers_the_smaller_index_within_noise():
    fast, small = outcome(1.0, 10 * MB, sd=0.2), outcome(1.1, MB)
    chosen, by_tie = rules.pick([fast, small])
    assert chosen is small and by_tie


def test_an_index_the_table_has_is_replaced_only_beyond_noise_and_above_the_target():
    """Issue 50: the demo replaced the HNSW index the table has (0.964) by an IVFFlat within the
    noise of its p95, 3 % smaller, whose recall interval reached below the target. A design to
    build replaces the table's index only when its p95 is lower beyond the noise of both and its
    recall's 95 % interval lies above the target."""
    have = replace(outcome(1.0, 10 * MB, sd=0.1), margin=Margin(225, 0.005))
    smaller = replace(outcome(1.05, 9.7 * MB, sd=0.1), margin=Margin(225, 0.005))
    assert rules.pick([have, smaller]) == (smaller, True)  # nothing owned: the smaller index
    assert rules.pick([have, smaller], [have], 0.95) == (have, True)
    # faster beyond the noise, but its recall 0.96 ±0.011 reaches below 0.95
    fast_unsure = replace(outcome(0.5, 9 * MB, sd=0.05), margin=Margin(225, 0.011))
    assert rules.pick([have, fast_unsure], [have], 0.95)[0] is have
    # faster beyond the noise and 0.96 ±0.005 above the target: it replaces the index
    fast_sure = replace(outcome(0.5, 9 * MB, sd=0.05), margin=Margin(225, 0.005))
    assert rules.pick([have, fast_sure], [have], 0.95) == (fast_sure, False)
    # within the noise, however sure: kept
    close_sure = replace(outcome(0.95, 9 * MB, sd=0.1), margin=Margin(225, 0.001))
    assert rules.pick([have, close_sure], [have], 0.95)[0] is have


def test_a_new_budget_is_one_entry_in_the_rules(monkeypatch):
    """The recipe followed once: a p99 budget is one entry in rules.BUDGETS (and, with a flag,
    one line in budgets(cfg)); describe returns the outcome's Verdict with it."""
    budgets = {**rules.BUDGETS, "--max-p99-ms": ("p99_ms", "ms", lambda r: r["p99_ms"])}
    monkeypatch.setattr(rules, "BUDGETS", budgets)
    monkeypatch.setattr(recommend, "budgets", lambda cfg: {"--max-p99-ms": 2.0})
    slow = outcome(1.0, MB, p99=3.5)
    assert rules.over_budget(slow, {"--max-p99-ms": 2.0}) == {"--max-p99-ms": 3.5}
    described = recommend.describe(slow, CONTEXT, AdviseConfig(target="t"))
    assert described is not slow and slow.verdict is None
    assert described.verdict is not None
    assert described["over_budget"] == {"--max-p99-ms": 3.5}
    assert described["fits_shared_buffers"] is True


def test_an_outcome_cannot_be_written():
    row = outcome(1.0, MB)
    with pytest.raises(TypeError):
        row["p95_ms"] = 2.0  # type: ignore[index]


def moded(value: int, p95: float, mode: dict, reached: bool = True) -> Outcome:
    """The index in place in one scan mode (the work setting first, the mode's after it)."""
    row = outcome(p95, 8 * MB)
    m = replace(row.measurement, setting={"hnsw.ef_search": value, **mode}, reached=reached)
    return replace(row, measurement=m, in_place={"name": "kb_hnsw"})


RELAXED = {"hnsw.iterative_scan": "relaxed_order", "hnsw.max_scan_tuples": "20000"}
STRICT = {"hnsw.iterative_scan": "strict_order", "hnsw.max_scan_tuples": "20000"}


def test_one_index_in_several_scan_modes_is_a_candidate_once_at_its_least_work():
    off, strict, relaxed = moded(398, 0.9, {}), moded(120, 1.5, STRICT), moded(64, 1.2, RELAXED)
    other = replace(outcome(0.5, 4 * MB), in_place=None)  # another design: kept
    assert rules.least_work([off, strict, relaxed, other]) == [relaxed, other]
    # at equal work the earlier mode, whatever the p95: at one ef_search an iterative scan
    # does at least the plain scan's work
    same = [moded(64, 2.0, {}), moded(64, 1.0, STRICT), moded(64, 0.5, RELAXED)]
    assert rules.least_work(same) == [same[0]]
    # a mode that does not reach the target is no candidate
    assert rules.least_work([off, moded(10, 0.3, RELAXED, reached=False)])[0] is off


def test_the_scan_modes_line_compares_the_database_wide_setting():
    from evaluator.tuning.sweep.scan_modes import line

    off, relaxed = moded(398, 0.9, {}), moded(64, 1.2, RELAXED)
    said = line([rules.mode_result(off), rules.mode_result(relaxed)])
    assert said is not None
    assert said.startswith("hnsw.ef_search 398 for every query (iterative scan off) (p95 0.90 ms)")
    assert ", or hnsw.ef_search 64 with hnsw.iterative_scan = relaxed_order" in said
    assert said.endswith(": the least work")


def test_a_mode_short_of_the_target_is_searched_again_with_its_limits_raised():
    from evaluator.tuning.sweep.scan_modes import raised

    mode = {**STRICT, "hnsw.scan_mem_multiplier": "1"}
    assert raised(mode, {}) == {
        "hnsw.iterative_scan": "strict_order",
        "hnsw.max_scan_tuples": "200000",
        "hnsw.scan_mem_multiplier": "2",
    }
    assert raised(mode, {"hnsw.max_scan_tuples": "30"}) is None  # the user's limits
    assert (
        raised({"ivfflat.iterative_scan": "relaxed_order", "ivfflat.max_probes": "100"}, {}) is None
    )
