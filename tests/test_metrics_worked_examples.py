"""METRICS.md worked examples 1, 2, 4 and 6, computed by the SQL functions on the real server."""

import json

import pytest
from helpers import make_run, make_testset

from evaluator.measure import metrics


@pytest.fixture
def examples(clean, conn):
    make_testset(
        conn,
        "worked",
        {
            "ex1": {"b": 1, "d": 1},
            "ex2": {"c2": 3, "c4": 2, "c5": 1, "c8": 3, "c9": 0},
        },
    )
    return make_run(
        conn,
        "worked-run",
        "worked",
        {
            "ex1": ["a", "b", "c", "d"],
            "ex2": ["c7", "c2", "c9", "c4", "c1", "c5"],
        },
    )


def test_example_1(conn, examples):
    rows = {
        r["query_id"]: r
        for r in metrics.per_query(conn, examples, ["recall@3", "mrr@20", "ndcg@3"])
    }
    assert rows["ex1"]["recall@3"] == pytest.approx(0.5)
    assert rows["ex1"]["mrr@20"] == pytest.approx(0.5)
    assert rows["ex1"]["ndcg@3"] == pytest.approx(0.630930 / 1.630930, abs=1e-6)
    assert rows["ex1"]["ndcg@3"] == pytest.approx(0.386853, abs=1e-6)


def test_example_2(conn, examples):
    rows = {
        r["query_id"]: r
        for r in metrics.per_query(
            conn, examples, ["recall@3", "recall@5", "recall@10", "mrr@20", "ndcg@5", "ndcg@10"]
        )
    }
    ex2 = rows["ex2"]
    assert ex2["recall@3"] == pytest.approx(0.25)
    assert ex2["recall@5"] == pytest.approx(0.5)
    assert ex2["recall@10"] == pytest.approx(0.75)
    assert ex2["mrr@20"] == pytest.approx(0.5)
    assert ex2["ndcg@5"] == pytest.approx(0.427696, abs=1e-6)
    assert ex2["ndcg@10"] == pytest.approx(0.454384, abs=1e-6)


def test_example_4_r_precision(conn, examples):
    """R-precision: precision at R, R = the query's relevant chunks at the threshold in force."""
    rel1 = {r["query_id"]: r["rprec"] for r in metrics.per_query(conn, examples, ["rprec"])}
    assert rel1 == {"ex1": pytest.approx(0.5), "ex2": pytest.approx(2 / 4)}
    rel2 = {r["query_id"]: r["rprec"] for r in metrics.per_query(conn, examples, ["rprec"], 2)}
    assert rel2 == {"ex2": pytest.approx(1 / 3)}  # ex1 has no chunk of grade >= 2: not valid
    both = metrics.summary(conn, examples, ["recall@3", "rprec"])
    assert both["rprec"] == pytest.approx((0.5 + 0.5) / 2)
    assert both["recall@3"] == pytest.approx((0.5 + 0.25) / 2)  # unchanged beside rprec
    alone = metrics.summary(conn, examples, ["rprec"], 2)
    assert alone["rprec"] == pytest.approx(1 / 3)


def test_r_precision_in_the_metrics_command(pgeval, examples):
    code, out, err = pgeval(
        "metrics", "worked-run", "--k", "3", "--measures", "rprec", "--format", "json"
    )
    assert code == 0, err
    summary = json.loads(out)["summary"]
    # judged@K comes with every figure, after the measures asked for
    assert list(summary)[-2:] == ["rprec", "judged@3"] and summary["rprec"] == pytest.approx(0.5)
    code, out, err = pgeval("metrics", "worked-run", "--measures", "rprec@10")
    assert code != 0 and "rprec takes no cut-off" in err and "--measures" in err
    assert "Traceback" not in err


def test_example_5_average_precision(conn, examples):
    """MAP: precision at each relevant rank, summed, divided by every relevant chunk of the query
    (retrieved or not); map@K sums the ranks <= K only, over the same divisor."""
    names = ["map", "map@3", "map@10"]
    rel1 = {r["query_id"]: r for r in metrics.per_query(conn, examples, names)}
    assert rel1["ex1"]["map"] == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert rel1["ex2"]["map"] == pytest.approx((1 / 2 + 2 / 4 + 3 / 6) / 4)  # 0.375, not 0.5
    assert rel1["ex2"]["map@3"] == pytest.approx((1 / 2) / 4)
    assert rel1["ex2"]["map@10"] == rel1["ex2"]["map"]
    rel2 = {r["query_id"]: r["map"] for r in metrics.per_query(conn, examples, ["map"], 2)}
    assert rel2 == {"ex2": pytest.approx((1 / 2 + 2 / 4) / 3)}  # c5 (grade 1) no longer counts
    means = metrics.summary(conn, examples, ["map", "recall@3", "map@3"])
    assert means["map"] == pytest.approx((0.5 + 0.375) / 2)
    assert means["map@3"] == pytest.approx((0.5 / 2 + 0.5 / 4) / 2)
    assert means["recall@3"] == pytest.approx((0.5 + 0.25) / 2)  # unchanged beside map


def test_summary_is_mean_over_valid_queries(conn, examples):
    values = metrics.summary(conn, examples, ["recall@3", "precision@5", "hit@3"])
    assert values["recall@3"] == pytest.approx((0.5 + 0.25) / 2)
    assert values["precision@5"] == pytest.approx((2 / 5 + 2 / 5) / 2)  # K is the denominator
    assert values["hit@3"] == pytest.approx(1.0)


def test_metrics_command_prints_example_values(pgeval, examples):
    code, out, err = pgeval("metrics", "worked-run", "--format", "jsonl", "--per-query")
    assert code == 0, err
    assert '"query_id": "ex2"' in out and '"ndcg@10": 0.454383' in out
    assert "not statistically meaningful" in err


def test_unknown_measure_is_a_clean_error(conn, examples):
    from evaluator.core.errors import InputError

    with pytest.raises(InputError, match="unknown measure"):
        metrics.per_query(conn, examples, ["bpref@10"])


def test_database_refuses_bad_rows(conn, examples):
    import psycopg

    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO pgeval.result VALUES (%s, 'ex1', 0, 'zz', 1)", (examples,))
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("INSERT INTO pgeval.result VALUES (%s, 'ex1', 1, 'zz', 1)", (examples,))
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("INSERT INTO pgeval.result VALUES (%s, 'ex1', 9, 'a', 1)", (examples,))
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO pgeval.qrel SELECT testset_id, 'ex1', 'new', 7 FROM pgeval.testset"
        )


def test_hand_edited_judgements_count_after_refresh(conn, examples):
    """Each result row carries its judged grade; editing pgeval.qrel by hand and calling
    pgeval.refresh_ideal brings the stored grades (and the ideal DCG) up to date."""
    before = metrics.per_query(conn, examples, ["recall@3"])
    assert {r["query_id"]: r["recall@3"] for r in before}["ex1"] == pytest.approx(0.5)
    conn.execute("UPDATE pgeval.qrel SET grade = 0 WHERE query_id = 'ex1' AND chunk_id = 'b'")
    conn.execute(
        "INSERT INTO pgeval.qrel (testset_id, query_id, chunk_id, grade) "
        "SELECT testset_id, 'ex1', 'a', 2 FROM pgeval.testset WHERE name = 'worked'"
    )
    conn.execute(
        "SELECT pgeval.refresh_ideal(testset_id) FROM pgeval.testset WHERE name = 'worked'"
    )
    after = {r["query_id"]: r for r in metrics.per_query(conn, examples, ["recall@3", "mrr@20"])}
    assert after["ex1"]["recall@3"] == pytest.approx(0.5)  # relevant {a, d}: a at rank 1
    assert after["ex1"]["mrr@20"] == pytest.approx(1.0)
    grades = dict(
        conn.execute(
            "SELECT chunk_id, grade FROM pgeval.result WHERE run_id = %s AND query_id = 'ex1'",
            (examples,),
        ).fetchall()
    )
    assert grades == {"a": 2, "b": 0, "c": None, "d": 1}


def test_example_6_judged_judged_only_and_the_ceiling(conn, clean):
    """judged@3 counts grade 0 as judged; judged only drops a, the one chunk without a judgement;
    the ceiling orders the list by its grades (pgeval.oracle_value)."""
    make_testset(conn, "worked6", {"ex6": {"b": 1, "c": 0, "d": 1}})
    run = make_run(conn, "worked6-run", "worked6", {"ex6": ["a", "b", "c", "d"]})
    names = ["judged@3", "recall@3", "mrr@20", "ndcg@3"]
    (row,) = metrics.per_query(conn, run, names)
    assert row["judged@3"] == pytest.approx(2 / 3)
    assert row["ndcg@3"] == pytest.approx(0.386853, abs=1e-6)
    (only,) = metrics.per_query(conn, run, names, judged_only=True)
    assert (only["recall@3"], only["mrr@20"]) == (pytest.approx(1.0), pytest.approx(1.0))
    assert only["ndcg@3"] == pytest.approx(1.5 / 1.630930, abs=1e-6)
    assert only["ndcg@3"] == pytest.approx(0.919721, abs=1e-6)
    ceiling = conn.execute(
        "SELECT pgeval.oracle_value('ndcg', 3, l.grades, 1, q.n_rel[1], q.ideal_dcg), "
        "pgeval.oracle_value('recall', 3, l.grades, 1, q.n_rel[1], q.ideal_dcg) "
        "FROM pgeval.result_list l JOIN pgeval.query q USING (query_id) WHERE l.run_id = %s",
        (run,),
    ).fetchone()
    assert ceiling == (pytest.approx(1.0), pytest.approx(1.0))
