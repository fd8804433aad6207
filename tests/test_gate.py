"""`pgeval gate`: METRICS.md worked example 3 through saved JSON reports, rule semantics, rule-file
errors, and gates over real runs on the embedded server (exit codes 0, 1, 2)."""

import json
import re
from pathlib import Path

import pytest
from helpers import make_run, make_testset

from evaluator.core.errors import InputError
from evaluator.reporting import gate

GATES = Path(__file__).parent / "data" / "gates"

BASELINE = {
    "recall@10": 0.90,
    "mrr@20": 0.76,
    "ndcg@10": 0.72,
    "citation_precision": 0.98,
    "answer_accuracy": 0.84,
    "latency_p95_ms": 2000.0,
}
CANDIDATE = {
    "recall@10": 0.92,
    "mrr@20": 0.74,
    "ndcg@10": 0.75,
    "citation_precision": 0.96,
    "answer_accuracy": 0.87,
    "latency_p95_ms": 2800.0,
}


def report(name, summary, testset_hash="kb-hash"):
    return {
        "pgeval_report": 1,
        "run": {"name": name, "testset": "kb", "testset_hash": testset_hash},
        "rel": 1,
        "summary": summary,
        "cases": [],
    }


@pytest.fixture
def worked(tmp_path):
    b, c = tmp_path / "baseline.json", tmp_path / "candidate.json"
    b.write_text(json.dumps(report("baseline", BASELINE)))
    c.write_text(json.dumps(report("candidate", CANDIDATE)))
    return str(b), str(c)


def test_metrics_md_worked_gate_example(pgeval, worked):
    b, c = worked
    code, out, err = pgeval(
        "gate", "--baseline", b, "--candidate", c, "--rules", str(GATES / "metrics_md_example.toml")
    )
    assert code == 2, err
    # one sentence per failed rule under the table (whose rows start with their status too)
    fails = [line for line in out.splitlines() if re.match(r"FAIL  \S", line)]
    assert len(fails) == 3, out
    assert "mrr@20 dropped by 0.0200 (0.7600 → 0.7400), more than the allowed 0.01" in out
    assert "citation_precision 0.9600 is below the minimum 0.9700" in out
    assert "latency_p95_ms grew by +40.0 % (2000 → 2800), more than the allowed 20 %" in out
    assert err.strip() == (
        "pgeval: error: gate failed: 3 of 5 rules failed (mrr@20, "
        "citation_precision, latency_p95_ms)"
    )


def test_worked_example_under_the_default_rules(pgeval, worked):
    b, c = worked
    code, out, err = pgeval("gate", "--baseline", b, "--candidate", c, "--format", "json")
    assert code == 2
    result = json.loads(out)
    status = {o["metric"]: o["status"] for o in result["outcomes"]}
    assert status == {
        "recall@10": "pass",
        "mrr@20": "fail",
        "citation_precision": "fail",
        "answer_accuracy": "pass",
        "latency_p95_ms": "fail",
        "answer_latency_p95_ms": "n/a",
    }
    assert result["failed"] == 3 and result["not_applicable"] == 1 and not result["passed"]


def test_passing_gate_exits_0(pgeval, tmp_path):
    better = dict(
        CANDIDATE, **{"mrr@20": 0.75, "citation_precision": 0.975, "latency_p95_ms": 2400.0}
    )
    b, c = tmp_path / "b.json", tmp_path / "c.json"
    b.write_text(json.dumps(report("b", BASELINE)))
    c.write_text(json.dumps(report("c", better)))
    code, out, err = pgeval("gate", "--baseline", str(b), "--candidate", str(c))
    assert code == 0, out + err
    assert "gate passed: 5 rules passed, 1 not applicable" in out
    assert "n/a   neither side has answer_latency_p95_ms" in out  # listed, not passed


def rules(text):
    return gate.parse_rules(text, "t.toml")


def test_rule_without_metric_on_either_side_is_not_applicable():
    r = gate.evaluate(
        report("a", {"recall@10": 0.5}),
        report("b", {"recall@10": 0.5}),
        rules(
            "[metrics.citation_precision]\nmin = 0.97\n"
            "[metrics.answer_accuracy]\nmust_not_drop = true\n"
        ),
    )
    assert [o.status for o in r.outcomes] == ["n/a", "n/a"] and r.passed
    assert r.outcomes[0].reason == "neither side has citation_precision"


def test_candidate_missing_a_metric_the_baseline_has_fails():
    r = gate.evaluate(
        report("a", {"answer_accuracy": 0.8}),
        report("b", {}),
        rules("[metrics.answer_accuracy]\nmust_not_drop = true\n"),
    )
    assert r.outcomes[0].status == "fail" and "candidate has no value" in r.outcomes[0].reason


def test_baseline_missing_a_metric_only_min_and_max_apply():
    r = gate.evaluate(
        report("a", {}),
        report("b", {"citation_precision": 0.99}),
        rules("[metrics.citation_precision]\nmin = 0.97\nmust_not_drop = true\nmax_drop = 0.01\n"),
    )
    assert [o.status for o in r.outcomes] == ["pass", "n/a", "n/a"]


def test_limits_are_inclusive_despite_floating_point():
    # 0.76 - 0.75 is 0.010000000000000009 in binary floating point: still "at most 0.01"
    r = gate.evaluate(
        report("a", {"mrr@20": 0.76, "recall@10": 0.8}),
        report("b", {"mrr@20": 0.75, "recall@10": 0.76}),
        rules('[metrics."mrr@20"]\nmax_drop = 0.01\n[metrics."recall@10"]\nmax_drop_pct = 5\n'),
    )
    assert [o.status for o in r.outcomes] == ["pass", "pass"]
    r = gate.evaluate(
        report("a", {"recall@10": 0.8}),
        report("b", {"recall@10": 0.759}),
        rules('[metrics."recall@10"]\nmax_drop_pct = 5\n'),
    )
    assert r.outcomes[0].status == "fail" and "-5.1 %" in r.outcomes[0].reason


def test_every_failure_is_reported_not_only_the_first():
    r = gate.evaluate(
        report("a", {"recall@10": 0.9, "mrr@20": 0.9, "ndcg@10": 0.9}),
        report("b", {"recall@10": 0.1, "mrr@20": 0.1, "ndcg@10": 0.1}),
        rules(
            '[metrics."recall@10"]\nmust_not_drop = true\nmin = 0.5\n'
            '[metrics."mrr@20"]\nmax_drop = 0.1\n'
            '[metrics."ndcg@10"]\nmax_drop_pct = 10\n'
        ),
    )
    assert len(r.failures) == 4


def test_different_test_sets_are_refused():
    with pytest.raises(InputError, match="different test sets"):
        gate.evaluate(
            report("a", BASELINE), report("b", CANDIDATE, "other-hash"), gate.load_rules(None)
        )


@pytest.mark.parametrize(
    "name, message",
    [
        ("bad_kind.toml", "bad_kind.toml:5, field 'metrics.mrr@20.max_dorp': unknown rule"),
        (
            "bad_metric.toml",
            "bad_metric.toml:1, field 'metrics.recal@10': unknown metric 'recal@10'",
        ),
        ("bad_value.toml", "bad_value.toml:2, field 'metrics.mrr@20.max_drop': must be a number"),
        ("bad_syntax.toml", "bad_syntax.toml:3: not valid TOML"),
    ],
)
def test_bad_rule_files_name_file_line_field(pgeval, worked, name, message):
    b, c = worked
    code, out, err = pgeval("gate", "--baseline", b, "--candidate", c, "--rules", str(GATES / name))
    assert code == 1
    assert message in err and err.startswith("pgeval: error: ") and "Traceback" not in err


def test_show_defaults_is_the_rule_set_used(pgeval):
    code, out, err = pgeval("gate", "--show-defaults")
    assert code == 0
    parsed = gate.parse_rules(out)
    assert [(r.metric, r.kind, r.limit) for r in parsed.rules] == [
        ("recall@10", "must_not_drop", True),
        ("mrr@20", "max_drop", 0.01),
        ("citation_precision", "min", 0.97),
        ("answer_accuracy", "must_not_drop", True),
        ("latency_p95_ms", "max_growth_pct", 20.0),
        ("answer_latency_p95_ms", "max_growth_pct", 20.0),
    ]


# ---- over runs in the database ------------------------------------------------------------------

QRELS = {f"q{i}": {f"c{i}": 1, f"d{i}": 1} for i in range(40)}


@pytest.fixture
def runs(clean, conn):
    make_testset(conn, "gate-set", QRELS)
    fast = {f"q{i}": 10.0 + i % 5 for i in range(40)}
    slow = {q: v * 1.5 for q, v in fast.items()}
    good = {f"q{i}": [f"c{i}", f"d{i}", "x"] for i in range(40)}
    make_run(conn, "base", "gate-set", good, latency_ms=fast)
    make_run(conn, "same", "gate-set", good, latency_ms=fast)
    make_run(conn, "slower", "gate-set", good, latency_ms=slow)
    # worse ranking on 30 of 40 queries: the relevant chunks move down two places
    worse = {q: (["x", "y", *r[:2]] if i < 30 else r) for i, (q, r) in enumerate(good.items())}
    make_run(conn, "worse", "gate-set", worse, latency_ms=fast)
    # one query slightly worse: a drop, but not a significant one
    onedown = dict(good, q0=["x", "c0", "d0"])
    make_run(conn, "one-down", "gate-set", onedown, latency_ms=fast)
    make_testset(conn, "other-set", QRELS, content_hash="other")
    make_run(conn, "elsewhere", "other-set", good)
    return conn


def test_gate_over_runs(pgeval, runs):
    code, out, err = pgeval("gate", "--baseline", "base", "--candidate", "same")
    assert code == 0, out + err
    assert "n/a   neither side has citation_precision" in out
    code, out, err = pgeval("gate", "--baseline", "base", "--candidate", "slower")
    assert code == 2 and "latency_p95_ms grew by +50.0 %" in out
    code, out, err = pgeval("gate", "--baseline", "base", "--candidate", "worse")
    assert code == 2 and "mrr@20 dropped by 0.5000" in out and "gate failed: 1 of" in err


def test_significance_rule_over_runs(pgeval, runs):
    sig = str(GATES / "significance.toml")
    code, out, err = pgeval("gate", "--baseline", "base", "--candidate", "worse", "--rules", sig)
    assert code == 2 and "significant at 0.05" in out
    code, out, err = pgeval("gate", "--baseline", "base", "--candidate", "one-down", "--rules", sig)
    assert code == 0, out + err
    assert "ndcg@10 dropped" in out or "pass" in out
    result = json.loads(
        pgeval(
            "gate",
            "--baseline",
            "base",
            "--candidate",
            "one-down",
            "--rules",
            sig,
            "--format",
            "json",
        )[1]
    )
    assert result["outcomes"][0]["p_value"] > 0.05 and result["outcomes"][0]["status"] == "pass"


def test_significance_rule_needs_per_query_values(pgeval, runs, worked):
    b, _ = worked
    code, out, err = pgeval(
        "gate", "--baseline", b, "--candidate", b, "--rules", str(GATES / "significance.toml")
    )
    assert code == 1 and "needs per-query values" in err and "significance.toml:8" in err


def test_gate_errors_over_runs(pgeval, runs, tmp_path):
    code, out, err = pgeval("gate", "--baseline", "base", "--candidate", "elsewhere")
    assert code == 1 and "different test sets" in err
    code, out, err = pgeval("gate", "--baseline", "base", "--candidate", "no-such-run")
    assert code == 1 and "no run or experiment named 'no-such-run'" in err
    code, out, err = pgeval(
        "gate", "--baseline", str(tmp_path / "missing.json"), "--candidate", "base"
    )
    assert code == 1 and "missing.json: no such file" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"summary": {"recall@10": "high"}}')
    code, out, err = pgeval("gate", "--baseline", str(bad), "--candidate", "base")
    assert code == 1 and "field 'summary.recall@10': metric 'recall@10' is 'high'" in err


def test_usage_mistake_is_exit_1_not_a_gate_failure(pgeval, worked):
    b, _ = worked
    code, out, err = pgeval("gate", "--baseline", b)  # --candidate missing
    assert code == 1 and "--candidate" in err
