"""Results stored one row per ranked list (pgeval.result_list, migration 0005_storage): ids with
the characters COPY and array syntax escape, files whose queries are interleaved, duplicates named
with both lines, and the counts kept on pgeval.run for `run list` / `run delete`."""

import pytest
from helpers import make_testset

from evaluator.core.errors import InputError
from evaluator.run.runs import delete_run, import_run, list_runs


@pytest.fixture
def ts(clean, conn):
    make_testset(conn, "lists", {"q1": {'a"b': 2, "c\\d": 1}, "q2": {"x": 3}, "q3": {"y": 1}})
    return "lists"


def _rows(conn, name):
    return conn.execute(
        "SELECT query_id, rank, chunk_id, score, grade FROM pgeval.result "
        "JOIN pgeval.run USING (run_id) WHERE name = %s ORDER BY 1, 2",
        (name,),
    ).fetchall()


def test_ids_with_quotes_and_backslashes_round_trip(conn, ts, tmp_file):
    f = tmp_file(
        "e.trec", 'q1 Q0 a"b 1 2 t\nq1 Q0 c\\d 2 3 t\nq1 Q0 {e,f} 3 1 t\nq1 Q0 NULL 4 0 t\n'
    )
    import_run(conn, f, ts, "esc")
    assert _rows(conn, "esc") == [
        ("q1", 1, "c\\d", 3.0, 1),
        ("q1", 2, 'a"b', 2.0, 2),
        ("q1", 3, "{e,f}", 1.0, None),
        ("q1", 4, "NULL", 0.0, None),
    ]


def test_interleaved_queries_are_grouped_and_ranked(conn, ts, tmp_file):
    f = tmp_file("i.trec", "q1 Q0 a 1 1 t\nq2 Q0 x 1 5 t\nq1 Q0 b 2 7 t\nq2 Q0 z 2 9 t\n")
    rep = import_run(conn, f, ts, "inter")
    assert (rep.queries, rep.rows) == (2, 4)
    assert [(q, r, c) for q, r, c, _, _ in _rows(conn, "inter")] == [
        ("q1", 1, "b"),
        ("q1", 2, "a"),
        ("q2", 1, "z"),
        ("q2", 2, "x"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "q1 Q0 a 1 1 t\nq1 Q0 b 2 1 t\nq1 Q0 a 3 1 t\n",
        "q1 Q0 a 1 1 t\nq2 Q0 x 1 1 t\nq1 Q0 a 3 1 t\n",
    ],
)
def test_duplicate_names_query_chunk_and_both_lines(conn, ts, tmp_file, text):
    f = tmp_file("d.trec", text)
    with pytest.raises(InputError, match=r"query 'q1' lists chunk 'a' twice \(lines 1 and 3\)"):
        import_run(conn, f, ts, "dup")
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM pgeval.run WHERE name = 'dup'").fetchone()[0] == 0


def test_counts_kept_on_the_run(conn, ts, tmp_file):
    f = tmp_file("c.trec", "q1 Q0 a 1 1 t\nq1 Q0 b 2 2 t\nq2 Q0 x 1 1 t\nq9 Q0 x 1 1 t\n")
    import_run(conn, f, ts, "counted")
    assert conn.execute(
        "SELECT n_queries, n_rows, n_unknown_queries FROM pgeval.run WHERE name = 'counted'"
    ).fetchone() == (2, 3, 1)
    assert [r["queries"] for r in list_runs(conn) if r["run"] == "counted"] == [2]
    rid = conn.execute("SELECT run_id FROM pgeval.run WHERE name = 'counted'").fetchone()[0]
    conn.execute(
        "INSERT INTO pgeval.result (run_id, query_id, rank, chunk_id) "
        "VALUES (%s, 'q2', 2, 'y'), (%s, 'q3', 1, 'y')",
        (rid, rid),
    )
    assert conn.execute(
        "SELECT n_queries, n_rows FROM pgeval.run WHERE run_id = %s", (rid,)
    ).fetchone() == (3, 5)
    conn.commit()
    delete_run(conn, "counted")
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.result_list WHERE run_id = %s", (rid,)
        ).fetchone()[0]
        == 0
    )


def _judged(conn, rid):
    """Each list's judged-relevant positions as the metrics read them, and as the grades say."""
    rows = conn.execute(
        "SELECT query_id, rel_ranks, rel_grades, grades FROM pgeval.result_list "
        "WHERE run_id = %s ORDER BY query_id",
        (rid,),
    ).fetchall()
    return (
        {q: sorted(zip(r, g, strict=True)) for q, r, g, _ in rows},
        {q: [(i, x) for i, x in enumerate(gr, 1) if x] for q, _, _, gr in rows},
    )


def test_judged_positions_follow_the_grades(conn, ts, tmp_file):
    """rel_ranks / rel_grades (what pgeval.judged_hits reads) hold exactly the positions of grade
    > 0, whether the list was imported, appended to through the view, or regraded after the
    judgements changed."""
    f = tmp_file("j.trec", 'q1 Q0 zz 1 9 t\nq1 Q0 c\\d 2 8 t\nq1 Q0 a"b 3 7 t\nq2 Q0 x 1 1 t\n')
    import_run(conn, f, ts, "judged")
    rid = conn.execute("SELECT run_id FROM pgeval.run WHERE name = 'judged'").fetchone()[0]
    stored, expected = _judged(conn, rid)
    assert stored == expected == {"q1": [(2, 1), (3, 2)], "q2": [(1, 3)]}
    conn.execute(
        "INSERT INTO pgeval.result (run_id, query_id, rank, chunk_id) "
        "VALUES (%s, 'q1', 4, 'y'), (%s, 'q3', 1, 'y')",
        (rid, rid),
    )
    conn.execute("UPDATE pgeval.qrel SET grade = 0 WHERE chunk_id = 'x'")
    conn.execute(
        "INSERT INTO pgeval.qrel (testset_id, query_id, chunk_id, grade) "
        "SELECT testset_id, 'q1', 'zz', 3 FROM pgeval.run WHERE run_id = %s",
        (rid,),
    )
    conn.execute(
        "SELECT pgeval.refresh_ideal(testset_id) FROM pgeval.run WHERE run_id = %s", (rid,)
    )
    stored, expected = _judged(conn, rid)
    assert stored == expected == {"q1": [(1, 3), (2, 1), (3, 2)], "q2": [], "q3": [(1, 1)]}
    conn.commit()
