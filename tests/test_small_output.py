"""Small things a DBA reads (issue 40, item 8): `metrics --by-type` of an untyped test set does
not print its table twice; `target show` prints no Python None or {}."""

from __future__ import annotations

from helpers import make_run, make_testset

QRELS = {"q1": {"c1": 2, "c2": 1}, "q2": {"c3": 1}, "q3": {"c4": 3}}
LISTS = {"q1": ["c1", "c9"], "q2": ["c8", "c3"], "q3": ["c7"]}


def test_by_type_of_an_untyped_test_set_is_one_line(clean, conn, pgeval):
    make_testset(conn, "untyped", QRELS)
    make_run(conn, "plain", "untyped", LISTS)
    code, out, err = pgeval("metrics", "plain", "--by-type")
    assert code == 0, err
    assert out.count("recall@10") == 1, out  # the summary, not its copy under "(untyped)"
    assert "(untyped)" not in out and "no query of the test set has a type" in out
    make_testset(conn, "typed", QRELS, types={"q1": ["fuzzy"], "q2": ["exact"]})
    make_run(conn, "typed-run", "typed", LISTS)
    code, out, err = pgeval("metrics", "typed-run", "--by-type")
    assert code == 0, err
    assert "by query type" in out and "fuzzy" in out and "exact" in out, out
    assert out.count("recall@10") == 2, out


def test_target_show_prints_no_none(clean, conn, pgeval):
    conn.execute("DROP TABLE IF EXISTS small_out_kb")
    conn.execute("CREATE TABLE small_out_kb (id text PRIMARY KEY, v vector(3))")
    try:
        code, _, err = pgeval(
            "target", "add", "small", "--table", "small_out_kb", "--id-column", "id",
            "--vector-column", "v",
        )  # fmt: skip
        assert code == 0, err
        code, out, err = pgeval("target", "show", "small")
        assert code == 0, err
        assert "None" not in out and "{}" not in out, out
        assert "filters: none" in out and "schema: — (the search_path's)" in out, out
    finally:
        conn.execute("DROP TABLE small_out_kb")
