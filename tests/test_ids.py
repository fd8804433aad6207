"""One rule for ids on both sides of an evaluation (evaluator.core.ids.ident), and input that used to be
accepted silently and wrong: duplicate JSON keys, one query on two lines of a JSONL run, TREC
scores that Python reads as numbers and trec_eval (C's atof) does not, the export of a run that is
still being written."""

from __future__ import annotations

import json

import pytest
from helpers import make_run, make_testset
from robust_kb import pgeval_counts

from evaluator.core.errors import InputError
from evaluator.core.ids import ident
from evaluator.measure import metrics
from evaluator.measure.answers import import_answers
from evaluator.run.runs import import_run
from evaluator.testset import load

# judged ids with surrounding whitespace, ASCII and not (no-break space, ideographic space)
CASES = [
    {"id": "q1", "query": "one", "relevant": {" c1": 2, "c2\u00a0": 1}},
    {"id": "q2\u3000", "query": "two", "relevant": ["\u3000c3"]},
]


@pytest.fixture
def spaced(clean, conn, tmp_file):
    path = tmp_file(
        "spaced.jsonl", "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CASES)
    )
    load(conn, path, "spaced")
    return conn


def test_ident_is_the_rule_of_the_test_set_loader(spaced):
    stored = spaced.execute("SELECT query_id, chunk_id FROM pgeval.qrel ORDER BY 1, 2").fetchall()
    assert stored == [("q1", "c1"), ("q1", "c2"), ("q2", "c3")]
    assert stored == [
        (ident(q), ident(c))
        for q, c in [("q1", " c1"), ("q1", "c2\u00a0"), ("q2\u3000", "\u3000c3")]
    ]


@pytest.mark.parametrize("fmt", ["jsonl", "trec"])
def test_a_run_listing_the_judged_ids_as_written_scores_them(spaced, tmp_file, fmt):
    """The run names exactly the judged ids, with the same surrounding whitespace as the test set
    file: every relevant chunk is found (before: recall 0 without a warning)."""
    if fmt == "jsonl":
        text = "".join(
            json.dumps({"query_id": c["id"], "ranked": list(c["relevant"])}, ensure_ascii=False)
            + "\n"
            for c in CASES
        )
    else:  # TREC: fields are whitespace separated; the no-break space ends a field as well
        text = "q1 Q0 \u00a0c1 1 2.0 t\nq1 Q0 c2\u00a0 2 1.0 t\nq2\u3000 Q0 \u3000c3 1 1.0 t\n"
    path = tmp_file(f"run.{fmt}", text)
    rep = import_run(spaced, path, "spaced", "r", fmt)
    assert (rep.unknown_queries, rep.valid_without_result) == (0, 0)
    rid = metrics.resolve_run(spaced, "r").run_id
    summary = metrics.summary(spaced, rid, ["recall@3", "mrr@20"])
    assert summary == {"recall@3": 1.0, "mrr@20": 1.0}


def test_answers_read_ids_by_the_same_rule(spaced, tmp_file):
    path = tmp_file("run.jsonl", json.dumps({"query_id": "q1", "ranked": ["c1", "c2"]}) + "\n")
    import_run(spaced, path, "spaced", "r", "jsonl")
    answers = tmp_file(
        "a.jsonl",
        json.dumps(
            {"query_id": " q1", "answer": "x", "cited": [" c1", "c2\u00a0"], "supported": ["c1"]},
            ensure_ascii=False,
        )
        + "\n",
    )
    import_answers(spaced, answers, "r")
    assert spaced.execute("SELECT query_id, cited, supported FROM pgeval.answer").fetchone() == (
        "q1",
        ["c1", "c2"],
        ["c1"],
    )


# ---- accepted silently and wrong ---------------------------------------------------------------


def _refused(conn, call, match):
    before = pgeval_counts(conn)
    with pytest.raises(InputError, match=match) as info:
        call()
    assert "\n" not in str(info.value)
    assert pgeval_counts(conn) == before
    return str(info.value)


def test_duplicate_keys_in_a_jsonl_relevant_object_are_refused(clean, conn, tmp_file):
    path = tmp_file(
        "dup.jsonl",
        '{"id": "q0", "query": "a", "relevant": {"c0": 1}}\n'
        '{"id": "q1", "query": "b", "relevant": {"c1": 1, "c1": 3}}\n',
    )
    msg = _refused(conn, lambda: load(conn, path, "dup"), "appears twice")
    assert ":2, field 'relevant': 'c1' appears twice" in msg


def test_duplicate_keys_in_a_csv_relevant_cell_are_refused(clean, conn, tmp_file):
    path = tmp_file("dup.csv", 'id,query,relevant\nq1,b,"{""c1"": 1, ""c1"": 3}"\n')
    msg = _refused(conn, lambda: load(conn, path, "dup"), "appears twice")
    assert ":2, field 'relevant': 'c1' appears twice" in msg


@pytest.fixture
def ts(clean, conn):
    make_testset(conn, "ts", {"q1": {"a": 1, "b": 2}, "q2": {"x": 3}})
    return conn


def test_a_jsonl_run_with_one_query_on_two_lines_is_refused(ts, tmp_file):
    path = tmp_file(
        "two.jsonl",
        '{"query_id": "q1", "ranked": ["a"]}\n'
        '{"query_id": "q2", "ranked": ["x"]}\n'
        '{"query_id": "q1", "ranked": ["b"]}\n',
    )
    msg = _refused(ts, lambda: import_run(ts, path, "ts", "two", "jsonl"), "already has")
    assert "two.jsonl:3, field 'query_id': query 'q1' already has its ranked list on line 1" in msg


def test_duplicate_keys_in_a_jsonl_run_line_are_refused(ts, tmp_file):
    path = tmp_file("dk.jsonl", '{"query_id": "q1", "ranked": ["a"], "ranked": ["b"]}\n')
    msg = _refused(ts, lambda: import_run(ts, path, "ts", "dk", "jsonl"), "appears twice")
    assert "dk.jsonl:1, field 'ranked': 'ranked' appears twice" in msg


@pytest.mark.parametrize(
    "score,atof", [("1_0", "1"), ("\u0661", "0"), ("\uff19", "0"), ("1\u0661", "1")]
)
def test_trec_scores_trec_eval_reads_otherwise_are_refused(ts, tmp_file, score, atof):
    """Python's float() reads '1_0' as 10, Arabic-Indic one as 1, full-width nine as 9; trec_eval
    (C's atof) reads 1, 0, 0. pgeval refuses them, naming file, line and field."""
    path = tmp_file("s.trec", f"q1 Q0 a 1 0.5 t\nq1 Q0 b 2 {score} t\n")
    msg = _refused(ts, lambda: import_run(ts, path, "ts", "s", "trec"), "not a plain decimal")
    assert (
        f"s.trec:2, field 'score': score '{score}' is not a plain decimal number "
        f"(trec_eval reads it as {atof}," in msg
    )


@pytest.mark.parametrize(
    "score,value",
    [
        ("3", 3.0),
        ("-2.5", -2.5),
        ("+.5", 0.5),
        ("5.", 5.0),
        ("1e-3", 1e-3),
        ("1E+2", 100.0),
        ("-inf", float("-inf")),
        ("Infinity", float("inf")),
    ],
)
def test_trec_scores_read_as_trec_eval_reads_them(ts, tmp_file, score, value):
    path = tmp_file("ok.trec", f"q1 Q0 a 1 {score} t\n")
    import_run(ts, path, "ts", "ok", "trec")
    assert ts.execute("SELECT score FROM pgeval.result").fetchone()[0] == value


@pytest.mark.parametrize("status", ["running", "failed"])
def test_export_of_a_run_not_complete_is_refused(ts, pgeval, tmp_path, status):
    make_run(ts, "busy", "ts", {"q1": ["a", "b"]}, status=status)
    out = tmp_path / "busy.trec"
    code, stdout, err = pgeval("run", "export", "busy", "--out", str(out))
    assert code == 1 and stdout == ""
    assert err.strip().splitlines() == [
        (
            f"pgeval: error: run 'busy' is {status}, not complete: an export would read back as a "
            "complete run (`pgeval run resume` it first)"
        )
    ]
    assert not out.exists() and not list(tmp_path.iterdir())
    code, stdout, err = pgeval("run", "export", "busy")
    assert code == 1 and stdout == "" and "is " + status in err
