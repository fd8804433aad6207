"""Ranked lists encoded a batch at a time (evaluator.stages.list_arrays.encode_columns: numpy over
the whole batch) give exactly the bytes of the list-by-list encoder, at every boundary of the fast
path: ASCII and non-ASCII ids in one batch, NULL scores, ids longer than 4095 bytes, empty lists;
and `run import` stores the same lists whatever the batch size."""

import math

import numpy as np
import pytest
from helpers import make_testset

from evaluator.run import ranked_lists
from evaluator.run.runs import import_run
from evaluator.stages import list_arrays as la
from evaluator.stages import store


def _per_list(lists):
    """What the list-by-list encoder makes of (chunks, scores) lists."""
    return [la.text_array(c) for c, _ in lists], [la.float_array(s) for _, s in lists]


def _batch(lists):
    chunks = [c for cs, _ in lists for c in cs]
    scores = [s for _, ss in lists for s in ss]
    cuts = [0]
    for cs, _ in lists:
        cuts.append(cuts[-1] + len(cs))
    return la.encode_columns(chunks, scores, cuts)


ASCII = (["d1", "doc-22", "x y", "{a,b}", 'q"', "b\\s"], [3.5, 2.0, -0.0, 1e-300, -4.0, 5.0])
LONG = (["L" * 5000, "s", "M" * 4096, "m" * 4095], [1.0, 0.5, 0.25, 0.125])
UNICODE = (["cé", "日本", "c\U0001f600", "plain"], [4.0, 3.0, 2.0, 1.0])
NULLS = (["n1", "n2"], [None, 0.5])
EMPTY: tuple[list, list] = ([], [])


@pytest.mark.parametrize(
    "lists",
    [
        [ASCII, LONG],  # the numpy path: length words of 1 to 5000 bytes
        [ASCII, UNICODE, LONG],  # an id not ASCII among ASCII ones
        [ASCII, NULLS],  # a NULL score among numbers
        [EMPTY, ASCII, EMPTY, LONG, EMPTY],  # empty lists anywhere
        [(["a", "b"], [math.inf, -math.inf]), (["c"], [5e-324]), (["d"], [7])],
    ],
)
def test_batch_bytes_equal_the_list_by_list_encoder(lists):
    assert _batch(lists) == _per_list(lists)


def test_fast_path_is_taken_and_matches_a_hand_built_array():
    texts, floats = _batch([(["ab", "c"], [1.5, -2.0])])
    head = (1).to_bytes(4, "big") + (0).to_bytes(4, "big")
    assert (
        texts[0]
        == head
        + (25).to_bytes(4, "big")
        + (2).to_bytes(4, "big")
        + (1).to_bytes(4, "big")
        + b"\x00\x00\x00\x02ab\x00\x00\x00\x01c"
    )
    body = b"".join(b"\x00\x00\x00\x08" + np.array([v], ">f8").tobytes() for v in (1.5, -2.0))
    assert (
        floats[0]
        == head + (701).to_bytes(4, "big") + (2).to_bytes(4, "big") + (1).to_bytes(4, "big") + body
    )


def test_an_empty_list_is_an_empty_array_not_an_error():
    # the list-by-list encoder used to split "" into one empty id (and refuse it as a NUL)
    assert la.text_array([]) == la._array_head(25, 0, False)


def test_grades_at_equals_grade_array():
    chunks = ["a", "b", "c", "d", "e"]
    grades = {"b": 2, "e": 0, "zz": 3}
    assert la.grades_at(5, [(4, 0), (1, 2)]) == la.grade_array(grades, chunks)
    assert la.grades_at(3, []) == la.grade_array(None, ["a", "b", "c"])
    assert la.grades_at(1, [(0, 1)]) == la.grade_array({"a": 1}, ["a"])


def test_stored_lists_read_back_exactly(clean, conn):
    """Through COPY into pgeval.result_list (the stage writer's path) and, for empty lists,
    into a scratch table of the same array types."""
    tid = make_testset(conn, "batch-ts", {"q1": {"cé": 2}, "q2": {"L" * 5000: 1}, "q3": {}})
    run_id = store.create_run(conn, name="batch-run", testset_id=tid, stage="t", order_rule="x")
    lists = [("q1", *UNICODE), ("q2", *LONG), ("q3", *NULLS)]
    with conn.transaction():
        store.write_lists(
            conn,
            run_id,
            [(q, c, s) for q, c, s in lists],
            store.judged_grades(conn, run_id, ["q1", "q2", "q3"]),
        )
    got = {
        q: (c, s, g)
        for q, c, s, g in conn.execute(
            "SELECT query_id, chunk_ids, scores, grades FROM pgeval.result_list WHERE run_id = %s",
            (run_id,),
        )
    }
    assert got["q1"] == (UNICODE[0], UNICODE[1], [2, None, None, None])
    assert got["q2"] == (LONG[0], LONG[1], [1, None, None, None])
    assert got["q3"] == (NULLS[0], NULLS[1], [None, None])
    conn.execute("CREATE TEMP TABLE arrays (i int, t text[], f float8[])")
    texts, floats = _batch([EMPTY, ASCII, EMPTY])
    with conn.cursor().copy("COPY arrays FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "bytea", "bytea"])
        for i, (t, f) in enumerate(zip(texts, floats, strict=True)):
            cp.write_row((i, t, f))
    assert conn.execute("SELECT t, f FROM arrays ORDER BY i").fetchall() == [
        ([], []),
        (ASCII[0], ASCII[1]),
        ([], []),
    ]


def test_ranked_by_score_sorts_only_the_lists_that_need_it():
    chunks = ["a", "b", "c", "x", "y", "z", "m", "n"]
    scores = [3.0, 2.0, 1.0, 1.0, 1.0, 2.0, 5.0, 4.0]
    batch = ranked_lists.Batch(["q1", "q2", "q3"], [0, 3, 6, 8], chunks, scores, [])
    values = ranked_lists.ranked_by_score(batch)
    # q2: score descending, ties by chunk id descending (the trec_eval rule)
    assert batch.chunks == ["a", "b", "c", "z", "y", "x", "m", "n"]
    assert batch.scores == [3.0, 2.0, 1.0, 2.0, 1.0, 1.0, 5.0, 4.0]
    assert values.tolist() == batch.scores


def test_minus_ranks_tells_each_list_apart():
    lists = [[-1.0, -2.0, -3.0], [-1.0, -2.5], [-2.0, -3.0], [-1.0], [-1.0, -2.0, -4.0]]
    cuts = [0]
    for scores in lists:
        cuts.append(cuts[-1] + len(scores))
    values = np.array([v for scores in lists for v in scores])
    expected = [scores == [-(r + 1) for r in range(len(scores))] for scores in lists]
    assert (
        ranked_lists.minus_ranks(values, cuts).tolist()
        == expected
        == [
            True,
            False,
            False,
            True,
            False,
        ]
    )


@pytest.fixture
def ts(clean, conn):
    make_testset(conn, "bts", {f"q{i}": {f"c{i}": 1, f"c{i + 1}": 2} for i in range(6)})
    return "bts"


def _stored(conn, name):
    return conn.execute(
        "SELECT query_id, chunk_ids, scores, grades FROM pgeval.result_list "
        "JOIN pgeval.run USING (run_id) WHERE name = %s ORDER BY 1",
        (name,),
    ).fetchall()


@pytest.mark.parametrize("batch_rows", [1, 2, 5])
def test_import_stores_the_same_lists_whatever_the_batch(
    conn, ts, tmp_file, monkeypatch, batch_rows
):
    lines = []  # 150 lines, ids not all ASCII: read by pieces of 64 lines, lists across pieces
    for q in range(6):
        for r in range(25):
            score = (r * 7 + q) % 4  # ties and unsorted scores in some lists
            cid = f"c{q + r}" if r % 2 else f"é{q}-{r}"  # c{q + 1}: judged
            lines.append(f"q{q} Q0 {cid} {r + 1} {score} t\n")
    f = tmp_file("b.trec", "".join(lines))
    import_run(conn, f, ts, "whole")
    monkeypatch.setattr(ranked_lists, "BATCH_ROWS", batch_rows)
    import_run(conn, f, ts, f"small-{batch_rows}")
    assert _stored(conn, f"small-{batch_rows}") == _stored(conn, "whole")
    assert len(_stored(conn, "whole")) == 6


@pytest.mark.parametrize("batch_rows", [1, 3])
def test_duplicate_across_batches_names_both_lines(conn, ts, tmp_file, monkeypatch, batch_rows):
    from evaluator.core.errors import InputError

    monkeypatch.setattr(ranked_lists, "BATCH_ROWS", batch_rows)
    # 70 lines of one query, ids not all ASCII: read by pieces of 64 lines; the chunk listed
    # twice is on lines 1 and 70, in two pieces
    middle = "".join(f"q0 Q0 é{i} {i} {1 / i} t\n" for i in range(2, 70))
    text = "q0 Q0 a 1 3 t\n" + middle + "q0 Q0 a 70 0 t\nq1 Q0 x 1 1 t\n"
    with pytest.raises(InputError, match=r"query 'q0' lists chunk 'a' twice \(lines 1 and 70\)"):
        import_run(conn, tmp_file("dup.trec", text), ts, "dup")
