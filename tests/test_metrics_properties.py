"""Property test: the SQL metric functions equal the pure-Python reference on random graded runs
(short lists, queries missing from the run, all-zero judgements, unjudged chunks)."""

import itertools

import pytest
from helpers import make_run, make_testset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_metrics import per_query as ref

from evaluator.measure import metrics

CHUNKS = [f"c{i}" for i in range(12)]
MEASURES = [
    "recall@1",
    "recall@3",
    "recall@10",
    "precision@3",
    "precision@10",
    "hit@1",
    "hit@5",
    "mrr@3",
    "mrr@20",
    "ndcg@1",
    "ndcg@5",
    "ndcg@10",
    "rprec",
    "map@1",
    "map@5",
    "map",
    "judged@1",
    "judged@5",
]

qrels_st = st.dictionaries(st.sampled_from(CHUNKS), st.integers(0, 3), max_size=8)
ranked_st = st.lists(st.sampled_from(CHUNKS), unique=True, max_size=12)
case_st = st.lists(st.tuples(qrels_st, st.one_of(st.none(), ranked_st)), min_size=1, max_size=6)

_counter = itertools.count()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=case_st, rel=st.integers(1, 3))
def test_sql_equals_reference(conn, case, rel):
    n = next(_counter)
    qrels = {f"q{i}": g for i, (g, _) in enumerate(case)}
    run = {f"q{i}": r for i, (_, r) in enumerate(case) if r is not None}  # None: missing from run
    ts = f"prop-{n}"
    make_testset(conn, ts, qrels)
    run_id = make_run(conn, f"prop-run-{n}", ts, run)
    try:
        got = {r["query_id"]: r for r in metrics.per_query(conn, run_id, MEASURES, rel)}
        for qid, grades in qrels.items():
            for m in MEASURES:
                expected = ref(run.get(qid, []), grades, m, rel)
                if expected is None:
                    assert qid not in got  # not a valid query: never averaged in
                else:
                    assert got[qid][m] == pytest.approx(expected, abs=1e-12), (qid, m)
        # judged only (trec_eval -J): the reference over each list without its unjudged chunks
        judged = {r["query_id"]: r for r in metrics.per_query(conn, run_id, MEASURES, rel, True)}
        for qid, grades in qrels.items():
            kept = [c for c in run.get(qid, []) if c in grades]
            for m in MEASURES:
                expected = ref(kept, grades, m, rel)
                if expected is not None:
                    assert judged[qid][m] == pytest.approx(expected, abs=1e-12), (qid, m)
        means = metrics.summary(conn, run_id, MEASURES, rel)
        for m in MEASURES:
            vals = [ref(run.get(q, []), g, m, rel) for q, g in qrels.items()]
            vals = [v for v in vals if v is not None]
            if vals:
                assert means[m] == pytest.approx(sum(vals) / len(vals), abs=1e-12)
            else:
                assert means[m] is None
    finally:
        conn.execute("DELETE FROM pgeval.testset WHERE name = %s", (ts,))
