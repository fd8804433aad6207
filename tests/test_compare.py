"""`pgeval compare`: the statistics (checked against exact enumeration), wins/ties/losses, the
METRICS.md reading hints on constructed patterns, refusal of different test sets, and the
configuration diff — over real runs on the embedded server."""

import itertools
import json

import numpy as np
import pytest
from helpers import make_run, make_testset

from evaluator.core.errors import InputError
from evaluator.measure import stats
from evaluator.reporting import compare
from evaluator.reporting import json as report_json

N = 40
QRELS = {f"q{i}": {f"c{i}": 2, f"d{i}": 1} for i in range(N)}
GOOD = {f"q{i}": [f"c{i}", f"d{i}", "x", "y"] for i in range(N)}


# ---- statistics ---------------------------------------------------------------------------------


def exact_p(diff):
    d = np.asarray(diff, float)
    observed = abs(d.mean())
    flips = [
        abs((d * np.array(s)).mean()) >= observed - 1e-12
        for s in itertools.product((1, -1), repeat=len(d))
    ]
    return sum(flips) / len(flips)


@pytest.mark.parametrize(
    "diff",
    [
        [0.5, 0.2, 0.1, -0.05, 0.3, 0.0, 0.25, 0.1, 0.4, -0.1],
        [0.1, -0.1, 0.2, -0.2, 0.05, 0.0, -0.05, 0.1, 0.0, 0.02],
    ],
)
def test_randomisation_test_matches_exact_enumeration(diff):
    p = stats.randomisation_test(diff, 10_000, seed=3)
    assert p == pytest.approx(exact_p(diff), abs=0.015)
    assert stats.randomisation_test(diff, 10_000, seed=3) == p  # seeded: reproducible


def test_no_difference_has_p_one_and_a_zero_interval():
    r = stats.paired([0.5, 0.25, 1.0], [0.5, 0.25, 1.0])
    assert r.p_value == 1.0 and r.delta == 0.0 and (r.ci_low, r.ci_high) == (0.0, 0.0)


def test_bootstrap_interval_brackets_the_mean():
    rng = np.random.default_rng(1)
    d = rng.normal(0.1, 0.2, 200)
    low, high = stats.bootstrap_ci(d)
    assert low < d.mean() < high
    # the standard error of the mean is 0.2/sqrt(200) = 0.014: a 95 % interval is about ±0.028
    assert 0.04 < high - low < 0.07


def _tied_diffs(seed, n):
    """Per-query differences of rank-based measures: few distinct values, many ties and zeros."""
    rng = np.random.default_rng(seed)
    return rng.choice([0.0, 0.0, 0.0, 0.5, -0.5, 1.0, 1 / 3, -0.25], size=n) + rng.choice(
        [0.0, 0.1], size=n, p=[0.8, 0.2]
    )


@pytest.mark.parametrize("seed, n", [(1, 2), (2, 3), (3, 12), (4, 40), (5, 300), (6, 5000)])
def test_t_test_matches_scipy_ttest_rel(seed, n):
    scipy_stats = pytest.importorskip("scipy.stats")
    d = _tied_diffs(seed, n)
    a = np.random.default_rng(seed + 100).random(n)
    b = a + d
    want = scipy_stats.ttest_rel(b, a).pvalue
    got = stats.paired(a, b, test=stats.T_TEST).p_value
    assert got == pytest.approx(want, rel=1e-9, abs=1e-300), (n, got, want)
    assert stats.t_test(list(reversed(d))) == pytest.approx(got, rel=1e-12)  # order-free
    assert stats.t_test(-d) == pytest.approx(got, rel=1e-12)  # two-sided


def test_t_test_edge_cases():
    assert stats.t_test([]) == stats.t_test([0.3]) == 1.0  # fewer than two pairs
    assert stats.t_test([0.0, 0.0, 0.0]) == 1.0  # no difference at all
    assert stats.t_test([0.2, 0.2, 0.2]) == 0.0  # the same gain on every query
    assert stats.incomplete_beta(2.0, 3.0, 0.4) == pytest.approx(0.5248, abs=1e-12)


# ---- over runs ----------------------------------------------------------------------------------


@pytest.fixture
def runs(clean, conn):
    make_testset(conn, "cmp-set", QRELS, texts={"q0": "how long do refunds take"})
    lat = {f"q{i}": 10.0 + i % 7 for i in range(N)}
    make_run(conn, "base", "cmp-set", GOOD, latency_ms=lat)
    # same chunks retrieved, worse order on 30 queries: recall@10 equal, MRR lower
    reordered = {q: (["x", "y", *r[:2]] if i < 30 else r) for i, (q, r) in enumerate(GOOD.items())}
    make_run(conn, "reordered", "cmp-set", reordered, latency_ms=lat)
    # relevant chunks lost on 30 queries: recall and MRR lower
    lost = {q: (["x", "y"] if i < 30 else r) for i, (q, r) in enumerate(GOOD.items())}
    make_run(conn, "lost", "cmp-set", lost, latency_ms=lat)
    # better ranking than a weak baseline, at twice the latency
    weak = {q: (["x", *r[:2]] if i < 30 else r) for i, (q, r) in enumerate(GOOD.items())}
    make_run(conn, "weak", "cmp-set", weak, latency_ms=lat)
    make_run(conn, "strong-slow", "cmp-set", GOOD, latency_ms={q: v * 2.5 for q, v in lat.items()})
    make_run(conn, "twin", "cmp-set", GOOD, latency_ms=lat)
    make_testset(conn, "other-set", QRELS, content_hash="different")
    make_run(conn, "elsewhere", "other-set", GOOD)
    return conn


def doc(conn, name):
    return report_json.build(conn, name)


def test_reordering_reads_as_fusion_or_rerank(runs):
    c = compare.compare(doc(runs, "base"), doc(runs, "reordered"))
    rows = {r["metric"]: r for r in c.rows}
    assert rows["recall@10"]["delta"] == 0 and rows["recall@10"]["p_value"] == 1.0
    assert (rows["recall@10"]["wins"], rows["recall@10"]["ties"], rows["recall@10"]["losses"]) == (
        0,
        40,
        0,
    )
    mrr = rows["mrr@20"]
    assert mrr["delta"] == pytest.approx(30 * (1 / 3 - 1) / 40) and mrr["p_value"] < 0.001
    assert (mrr["wins"], mrr["ties"], mrr["losses"]) == (0, 10, 30)
    assert mrr["ci_low"] <= mrr["delta"] <= mrr["ci_high"] < 0
    assert "recall = and MRR ↓ → fusion or rerank regressed" in c.hints
    assert c.moved[0]["delta"] < 0 and len(c.moved) == 10 and c.moved_by == "ndcg@10"
    assert c.moved[0]["query_id"] == "q0" and c.moved[0]["text"] == "how long do refunds take"


def test_losing_chunks_reads_as_retrieval(runs):
    c = compare.compare(doc(runs, "base"), doc(runs, "lost"))
    assert c.hints[0] == (
        "recall ↓ and MRR ↓ → look at parsing, chunking, embedding or the ANN index"
    )


def test_identical_runs_change_nothing(runs):
    c = compare.compare(doc(runs, "base"), doc(runs, "twin"))
    assert all(r["delta"] == 0 and r["p_value"] == 1.0 for r in c.rows)
    assert c.moved == [] and c.hints[0].startswith("no metric changed significantly")


def test_quality_up_at_twice_the_latency_is_a_product_decision(runs):
    c = compare.compare(doc(runs, "weak"), doc(runs, "strong-slow"))
    assert any(h.startswith("quality ↑ but latency_p95_ms ×2.5") for h in c.hints)


def answers_file(tmp_path, name, rows):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


def test_answer_patterns(runs, pgeval, tmp_path):
    runs.execute("UPDATE pgeval.query SET expected_facts = '[\"fact\"]'")
    right = [
        {"query_id": f"q{i}", "answer": "the fact", "cited": [f"c{i}"], "supported": [f"c{i}"]}
        for i in range(N)
    ]
    wrong = [dict(a, answer="no idea") if i < 30 else a for i, a in enumerate(right)]
    unsupported = [dict(a, supported=[]) if i < 30 else a for i, a in enumerate(right)]
    for run, rows in (("base", right), ("twin", wrong), ("strong-slow", unsupported)):
        code, _, err = pgeval("answers", "import", answers_file(tmp_path, run, rows), "--run", run)
        assert code == 0, err
    c = compare.compare(doc(runs, "base"), doc(runs, "twin"))
    assert "retrieval = and answer accuracy ↓ → prompt, model or context assembly" in c.hints
    c = compare.compare(doc(runs, "base"), doc(runs, "strong-slow"))
    assert (
        "answer accuracy = and citation precision ↓ → citation protocol or its validation"
        in c.hints
    )


def test_different_test_sets_are_refused(runs, pgeval):
    with pytest.raises(InputError, match="different test sets"):
        compare.compare(doc(runs, "base"), doc(runs, "elsewhere"))
    code, out, err = pgeval("compare", "base", "elsewhere")
    assert code == 1 and "cannot be compared" in err


def test_configuration_differences(runs):
    runs.execute("""UPDATE pgeval.run SET params = '{"hnsw.ef_search": 40, "depth": 100}'
                     WHERE name = 'base'""")
    runs.execute("""UPDATE pgeval.run SET params = '{"hnsw.ef_search": 80, "depth": 200}'
                     WHERE name = 'twin'""")
    c = compare.compare(doc(runs, "base"), doc(runs, "twin"))
    assert {(x["key"], x["baseline"], x["candidate"]) for x in c.changes} == {
        ("params.depth", 100, 200),
        ("params.hnsw.ef_search", 40, 80),
    }
    assert any("2 variables differ" in w for w in c.warnings)
    # fingerprints on both sides: the fingerprint diff, one variable, no "more than one" warning
    fp = {
        "query_settings": {"hnsw.ef_search": "40"},
        "server": {"version": "18.6"},
        "info": {"captured_at": "t1"},
    }
    runs.execute("UPDATE pgeval.run SET fingerprint = %s WHERE name = 'base'", (json.dumps(fp),))
    fp2 = {**fp, "query_settings": {"hnsw.ef_search": "80"}, "info": {"captured_at": "t2"}}
    runs.execute("UPDATE pgeval.run SET fingerprint = %s WHERE name = 'twin'", (json.dumps(fp2),))
    c = compare.compare(doc(runs, "base"), doc(runs, "twin"))
    assert [(x["key"], x["baseline"], x["candidate"]) for x in c.changes] == [
        ("query_settings.hnsw.ef_search", "40", "80")
    ]
    assert not any("differ" in w for w in c.warnings)


def test_compare_command(pgeval, runs, tmp_path):
    code, out, err = pgeval("compare", "base", "reordered")
    assert code == 0, err
    assert "recall = and MRR ↓ → fusion or rerank regressed" in out
    assert "0/10/30" in out and "queries that moved most (ndcg@10)" in out
    code, out, err = pgeval(
        "compare", "base", "reordered", "--format", "json", "--by", "recall@3", "--top", "3"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["moved_by"] == "recall@3" and len(data["moved"]) == 3
    assert {r["metric"] for r in data["rows"]} >= {"recall@10", "mrr@20", "ndcg@10"}
    # a saved report on one side works the same
    saved = tmp_path / "base.json"
    assert pgeval("report", "base", "--out", str(saved))[0] == 0
    code, out2, err = pgeval("compare", str(saved), "reordered", "--format", "json")
    assert code == 0, err
    assert json.loads(out2)["rows"] == data["rows"]
    code, out, err = pgeval("compare", "base", "reordered", "--by", "map@10")
    assert code == 1 and "no per-query values of 'map@10'" in err
    code, out, err = pgeval("compare", "base", "nope")
    assert code == 1 and "no run or experiment named 'nope'" in err


def test_compare_with_the_t_test(pgeval, runs):
    """--test t-test: each p-value is the paired t-test's over the per-query values the JSON
    report carries (scipy.stats.ttest_rel), the interval still the bootstrap's."""
    scipy_stats = pytest.importorskip("scipy.stats")
    code, out, err = pgeval("compare", "base", "reordered", "--test", "t-test", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["test"] == "t-test"
    base, cand = doc(runs, "base"), doc(runs, "reordered")
    for row in data["rows"]:
        _, a, b = compare.paired_values(base, cand, row["metric"])
        if any(x != y for x, y in zip(a, b, strict=True)):
            want = scipy_stats.ttest_rel(b, a).pvalue
            assert row["p_value"] == pytest.approx(want, rel=1e-9), row["metric"]
        else:
            assert row["p_value"] == 1.0, row["metric"]
    mrr = next(r for r in data["rows"] if r["metric"] == "mrr@20")
    assert mrr["significant"] and mrr["p_value"] < 1e-6
    default = json.loads(pgeval("compare", "base", "reordered", "--format", "json")[1])
    assert default["test"] == "randomisation"
    assert [r["ci_low"] for r in default["rows"]] == [r["ci_low"] for r in data["rows"]]
    code, out, err = pgeval("compare", "base", "reordered", "--test", "t-test")
    assert code == 0 and "paired t-test, alpha 0.05" in out, err
    code, out, err = pgeval("compare", "base", "reordered", "--test", "wilcoxon")
    assert code != 0 and "--test" in err and "Traceback" not in err


def test_reading_always_says_something():
    """A pattern none of METRICS.md's hints names still gets a reading, never an empty one."""
    from evaluator.reporting.compare import reading_hints

    up = [
        {"metric": "recall@10", "delta": 0.05, "p_value": 0.001},
        {"metric": "mrr@20", "delta": 0.04, "p_value": 0.002},
    ]
    assert reading_hints(up, [], 0.05) == [
        "quality ↑ (recall@10, mrr@20 significantly better, nothing worse): no regression to "
        "explain"
    ]
    mixed = [
        {"metric": "recall@10", "delta": 0.05, "p_value": 0.001},
        {"metric": "ndcg@10", "delta": -0.04, "p_value": 0.002},
    ]
    (hint,) = reading_hints(mixed, [], 0.05)
    assert hint.startswith("mixed change (↑ recall@10; ↓ ndcg@10)")
    # judged@K says how much was judged, not how good a list is: no part of a reading
    judged = [*up, {"metric": "judged@10", "delta": -0.2, "p_value": 0.001}]
    assert reading_hints(judged, [], 0.05) == reading_hints(up, [], 0.05)


def test_r_precision_in_report_compare_and_gate(pgeval, runs, tmp_path):
    """rprec, a measure without a cut-off, goes through the report, compare and the gate: R = 2
    on every query, so base scores 1 and 'lost' (no relevant chunk on 30 of 40 queries) 0.25."""
    code, out, err = pgeval("report", "lost", "--measures", "rprec", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["summary"]["rprec"] == pytest.approx(10 / 40)
    assert data["k"] == {
        "recall": [3, 5, 10],
        "mrr": [20],
        "ndcg": [5, 10],
        "precision": [3, 5, 10],
        "hit": [3, 5, 10],
        "judged": [10],  # judged@K comes with every figure
    }  # rprec has no cut-off
    assert {c["metrics"]["rprec"] for c in data["cases"]} == {0.0, 1.0}
    code, out, err = pgeval("compare", "base", "lost", "--measures", "rprec", "--format", "json")
    assert code == 0, err
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    assert rows["rprec"]["delta"] == pytest.approx(-0.75) and rows["rprec"]["losses"] == 30
    path = tmp_path / "rprec.toml"
    path.write_text("[metrics.rprec]\nmax_drop = 0.1\n")
    code, out, err = pgeval(
        "gate", "--baseline", "base", "--candidate", "lost", "--rules", str(path)
    )
    assert code == 2 and "rprec" in out, out + err
    code, out, err = pgeval(
        "gate", "--baseline", "base", "--candidate", "twin", "--rules", str(path)
    )
    assert code == 0 and "rprec" in out, out + err
