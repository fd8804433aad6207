"""A grouped sweep's recommendation in words (issue "What the application gets": nothing counts
that was not measured): "every group reaches" only when every group chosen was measured; a group
that was not is named, in the line and in the JSON."""

from __future__ import annotations

from evaluator.cli.commands.sweep_groups_view import recommendation_line
from evaluator.tuning.sweep.groups import GroupSweepResult


def result(failed: dict[str, str]) -> GroupSweepResult:
    res = GroupSweepResult("tenant", 10, 0.95, groups_total=3, chosen="all 3 groups")
    res.recommendation = {
        "label": "ef_search=40",
        "index_recall": 0.96,
        "p95_ms": 1.5,
        "why": "least work",
    }
    res.groups = [{"group": "t1", "recall": 0.96, "reached": True}]
    res.failed = failed
    return res


def test_every_group_reaches_only_when_every_group_was_measured():
    line = recommendation_line(result({}))
    assert "every group reaches recall@10 0.95" in line and "not measured" not in line
    assert result({}).as_dict()["every_group_measured"] is True


def test_a_group_not_measured_is_named_and_not_counted():
    res = result({"t3": "canceling statement due to statement timeout"})
    line = recommendation_line(res)
    assert "every group measured reaches recall@10 0.95" in line
    assert line.endswith("not measured, so not known to reach it: t3")
    assert res.as_dict()["every_group_measured"] is False
    assert res.as_dict()["failed"] == [{"group": "t3", "why": res.failed["t3"]}]
