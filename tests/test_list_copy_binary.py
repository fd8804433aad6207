"""Ranked lists are COPied into pgeval.result_list in binary format, their arrays built by
evaluator.stages.store (not by psycopg): every id, score and grade reads back exactly."""

import math

import pytest
from helpers import make_testset

from evaluator.core.errors import InputError
from evaluator.stages import store

ODD_IDS = [
    'c"q',
    "c\\b",
    "cé",
    "c,d",
    "{c}",
    "NULL",
    "c d",
    "c" * 1500,
    "日本",
    "c\U0001f600",
    "é" * 3000,
]


@pytest.fixture
def run_id(clean, conn):
    tid = make_testset(conn, "bin-ts", {"q1": {"cé": 3, "NULL": 1}, 'q"2': {"c,d": 2}, "q3": {}})
    return store.create_run(conn, name="bin-run", testset_id=tid, stage="t", order_rule="x")


def _lists(conn, run_id):
    return {
        q: (c, s, g)
        for q, c, s, g in conn.execute(
            "SELECT query_id, chunk_ids, scores, grades FROM pgeval.result_list WHERE run_id = %s",
            (run_id,),
        )
    }


def test_odd_ids_scores_and_grades_read_back_exactly(conn, run_id):
    scores = [
        1.5,
        -0.0,
        math.inf,
        -math.inf,
        5e-324,
        1.7976931348623157e308,
        0.1,
        -3.0,
        2.0,
        7.0,
        8.0,
    ]
    lists = [
        ("q1", ODD_IDS, scores),
        ('q"2', ["c,d", "x"], [None, 0.25]),  # a NULL score among numbers (a stage's list)
        ("q3", ["y"], [None]),
    ]
    with conn.transaction():
        assert (
            store.write_lists(conn, run_id, lists, store.judged_grades(conn, run_id, ["q1", 'q"2']))
            == 3
        )
    got = _lists(conn, run_id)
    judged = {"cé": 3, "NULL": 1}
    assert got["q1"][0] == ODD_IDS and got["q1"][2] == [judged.get(c) for c in ODD_IDS]
    assert [repr(s) for s in got["q1"][1]] == [repr(s) for s in scores]
    assert got['q"2'] == (["c,d", "x"], [None, 0.25], [2, None])
    assert got["q3"] == (["y"], [None], [None])
    # the metrics' derived columns follow the grades written
    assert conn.execute(
        "SELECT rel_ranks, rel_grades FROM pgeval.result_list WHERE run_id = %s AND query_id = 'q1'",
        (run_id,),
    ).fetchone() == ([6, 3], [1, 3])


def test_an_id_with_a_nul_is_refused_not_split(conn, run_id):
    with pytest.raises(InputError, match="NUL"), conn.transaction():
        store.write_lists(conn, run_id, [("q1", ["a\x00b"], [1.0])], {})
