"""One measure registry: evaluator/measure/measures.py and the SQL API (pgeval.ranked_measures(),
pgeval.max_cutoff(), pgeval.measure_spec) agree, and gate and metrics accept what SQL accepts."""

from __future__ import annotations

import pytest

from evaluator.measure import measures


def test_sql_and_python_registries_are_equal(conn):
    families, max_k = conn.execute(
        "SELECT pgeval.ranked_measures(), pgeval.max_cutoff()"
    ).fetchone()
    assert tuple(families) == measures.RANKED
    assert max_k == measures.MAX_K


@pytest.mark.parametrize(
    "name",
    [
        "recall@1",
        "ndcg@10",
        "mrr@20",
        "hit@100000",
        "precision@3",
        "recall@100001",
        "recall@0",
        "recall@01",
        "Recall@10",
        "map@10",
        "recall",
        "recall@10 ",
        "ndcg@1000000",
    ],
)
def test_sql_accepts_exactly_what_python_accepts(conn, name):
    ok = measures.parse_ranked(name) is not None
    try:
        conn.execute("SELECT * FROM pgeval.measure_spec(ARRAY[%s])", (name,)).fetchall()
        sql_ok = True
    except Exception as exc:  # the connection is autocommit: nothing to roll back
        assert "unknown measure" in str(exc)
        sql_ok = False
    assert sql_ok == ok, name


def test_gate_names_every_known_measure(tmp_path):
    from evaluator.core.errors import InputError
    from evaluator.reporting.gate import load_rules

    good = tmp_path / "good.toml"
    good.write_text(
        "[metrics.'recall@100000']\nmin = 0.1\n[metrics.citation_precision]\n"
        "min = 0.5\n[metrics.latency_p99_9_ms]\nmax_growth_pct = 10\n"
    )
    assert {r.metric for r in load_rules(good).rules} == {
        "recall@100000",
        "citation_precision",
        "latency_p99_9_ms",
    }
    bad = tmp_path / "bad.toml"
    bad.write_text("[metrics.'recall@100001']\nmin = 0.1\n")
    with pytest.raises(InputError, match=r"unknown metric 'recall@100001'.*ndcg@K"):
        load_rules(bad)
