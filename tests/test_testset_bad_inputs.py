"""Every bad test set file in tests/bad_inputs/testsets is refused with its exact message (file,
line, field), exit code 1, and nothing written; the test sets already stored stay as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_run, make_testset

from evaluator.core.errors import InputError
from evaluator.testset import load

CORPUS = Path(__file__).parent / "bad_inputs" / "testsets"
CASES = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))


def _counts(conn):
    return conn.execute(
        "SELECT (SELECT count(*) FROM pgeval.testset), "
        "(SELECT count(*) FROM pgeval.query), (SELECT count(*) FROM pgeval.qrel), "
        "(SELECT count(*) FROM pgeval.run)"
    ).fetchone()


@pytest.fixture
def stored(clean, conn):
    """A test set with a run already in the database: a failed load must leave both alone."""
    make_testset(conn, "bad", {"a": {"c1": 2}, "b": {"c2": 1}})
    make_run(conn, "bad-run", "bad", {"a": ["c1"]})
    return _counts(conn)


@pytest.mark.parametrize(
    "case", CASES, ids=[c["file"] + (" " + " ".join(c["args"]) if c["args"] else "") for c in CASES]
)
def test_bad_file_is_refused_with_its_message(case, stored, conn, pgeval, monkeypatch):
    monkeypatch.chdir(CORPUS)
    # --replace: even permission to overwrite "bad" must not let a bad file through
    code, out, err = pgeval(
        "testset", "load", case["file"], "--name", "bad", "--replace", *case["args"]
    )
    assert code == 1
    assert out == ""
    assert err.strip() == f"pgeval: error: {case['error']}"
    assert _counts(conn) == stored
    assert conn.execute(
        "SELECT content_hash FROM pgeval.testset WHERE name = 'bad'"
    ).fetchone() == ("test",)


def test_every_corpus_file_has_a_case():
    named = {c["file"] for c in CASES} | {a for c in CASES for a in c["args"]}
    files = {p.name for p in CORPUS.iterdir() if p.name not in ("cases.json", "README.md")}
    assert files <= named, files - named


@pytest.mark.parametrize(
    "file, line, field",
    [
        ("duplicate_id.jsonl", 3, "id"),
        ("non_utf8.jsonl", 2, None),
        ("answerable_no_relevant.jsonl", 2, "relevant"),
        ("wrong_columns.csv", 3, None),
        ("duplicate_judgement.qrels", 3, "chunk-id"),
        ("grade_out_of_range.qrels", 2, "grade"),
    ],
)
def test_library_error_carries_file_line_field(file, line, field, clean, conn, monkeypatch):
    monkeypatch.chdir(CORPUS)
    with pytest.raises(InputError) as info:
        load(conn, file, "lib-bad")
    assert (info.value.file, info.value.line, info.value.field) == (file, line, field)
    assert _counts(conn) == (0, 0, 0, 0)


def test_missing_file_and_unknown_extension(clean, conn, tmp_file, pgeval):
    code, _, err = pgeval("testset", "load", "/nonexistent/cases.jsonl", "--name", "x")
    assert (code, err.strip()) == (1, "pgeval: error: /nonexistent/cases.jsonl: no such file")
    odd = tmp_file("cases.txt", '{"id": "q1", "query": "x", "relevant": ["c1"]}\n')
    code, _, err = pgeval("testset", "load", str(odd), "--name", "x")
    assert code == 1
    assert err.strip() == (
        f"pgeval: error: {odd}: cannot tell the format from the file name; "
        "pass --format (jsonl|csv|trec|beir)"
    )
    code, _, err = pgeval(
        "testset", "load", str(odd), "--name", "x", "--format", "jsonl", "--queries", str(odd)
    )
    assert (code, err.strip()) == (
        1,
        "pgeval: error: field '--queries': --queries applies to TREC qrels only, not to jsonl",
    )
    assert _counts(conn) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("1=3,2", "field '--grade-map': item '2' is not CODE=GRADE (e.g. 1=3,2=2,3=1,4=0,-1=0)"),
        ("1=4", "field '--grade-map': code 1 maps to 4, outside 0-3"),
        ("a=1", "field '--grade-map': source code 'a' is not an integer"),
        ("1=1,1=2", "field '--grade-map': code 1 is mapped twice (1 and 2)"),
    ],
)
def test_bad_grade_map(spec, message, clean, conn, pgeval, monkeypatch):
    monkeypatch.chdir(CORPUS)
    code, _, err = pgeval("testset", "load", "good.qrels", "--name", "x", "--grade-map", spec)
    assert (code, err.strip()) == (1, f"pgeval: error: {message}")
    assert _counts(conn) == (0, 0, 0, 0)
