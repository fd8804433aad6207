"""Ids longer than 1,024 bytes (issue 9, item 11b): refused while parsing with file, line and
field — never PostgreSQL's "index row size 3032 exceeds btree version 4 maximum 2704", which
names nothing — for test sets and run imports alike; nothing is stored. An id of exactly 1,024
bytes is accepted."""

from __future__ import annotations

import json

import pytest
from helpers import make_testset

from evaluator.core.ids import MAX_ID_BYTES

LONG = "c" * 3000
QLONG = "q" * 3000


def _too_long(what: str, value: str) -> str:
    return (
        f"{what} is {len(value.encode()):,} bytes long, over the limit of 1,024 bytes "
        f"('{value[:40]}...')"
    )


def _counts(conn):
    return conn.execute(
        "SELECT (SELECT count(*) FROM pgeval.testset), (SELECT count(*) FROM "
        "pgeval.run), (SELECT count(*) FROM pgeval.result)"
    ).fetchone()


@pytest.fixture
def ts(clean, conn):
    make_testset(conn, "len-ts", {"q1": {"a": 1}, "q2": {"b": 2}})
    return conn


RUN_CASES = [
    (
        "long-chunk.trec",
        f"q1 Q0 a 1 2 t\nq1 Q0 {LONG} 2 1 t\n",
        "long-chunk.trec:2, field 'chunk_id': " + _too_long("chunk id", LONG),
    ),
    (
        "long-query.trec",
        f"q1 Q0 a 1 2 t\n{QLONG} Q0 a 1 1 t\n",
        "long-query.trec:2, field 'query_id': " + _too_long("query id", QLONG),
    ),
    (
        "long-chunk.jsonl",
        json.dumps({"query_id": "q1", "ranked": ["a", LONG]}) + "\n",
        "long-chunk.jsonl:1, field 'ranked': " + _too_long("item 2 chunk id", LONG),
    ),
    (
        "long-query.jsonl",
        json.dumps({"query_id": QLONG, "ranked": ["a"]}) + "\n",
        "long-query.jsonl:1, field 'query_id': " + _too_long("query id", QLONG),
    ),
]


@pytest.mark.parametrize("name,content,message", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_run_import_refuses_a_long_id_with_file_line_field(
    ts, pgeval, tmp_path, monkeypatch, name, content, message
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(content, encoding="utf-8")
    before = _counts(ts)
    code, out, err = pgeval("run", "import", name, "--testset", "len-ts", "--name", "long")
    assert (code, out) == (1, "")
    assert err == f"pgeval: error: {message}\n"
    assert _counts(ts) == before


TESTSET_CASES = [
    (
        "long-chunk.jsonl",
        json.dumps({"id": "q1", "query": "x", "relevant": {"a": 1}})
        + "\n"
        + json.dumps({"id": "q2", "query": "y", "relevant": {LONG: 2}})
        + "\n",
        f"long-chunk.jsonl:2, field 'relevant': chunk '{LONG[:77]}...': "
        + _too_long("chunk id", LONG),
    ),
    (
        "long-query.jsonl",
        json.dumps({"id": QLONG, "query": "x", "relevant": ["a"]}) + "\n",
        "long-query.jsonl:1, field 'id': " + _too_long("query id", QLONG),
    ),
    (
        "long.qrels",
        f"q1 0 a 1\nq1 0 {LONG} 1\n",
        "long.qrels:2, field 'chunk-id': " + _too_long("chunk id", LONG),
    ),
]


@pytest.mark.parametrize("name,content,message", TESTSET_CASES, ids=[c[0] for c in TESTSET_CASES])
def test_testset_load_refuses_a_long_id_with_file_line_field(
    ts, pgeval, tmp_path, monkeypatch, name, content, message
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(content, encoding="utf-8")
    before = _counts(ts)
    code, out, err = pgeval("testset", "load", name, "--name", "long-ts")
    assert (code, out) == (1, "")
    assert err == f"pgeval: error: {message}\n"
    assert _counts(ts) == before


def test_an_id_of_exactly_the_limit_is_stored(clean, conn, pgeval, tmp_path, monkeypatch):
    edge = "é" * (MAX_ID_BYTES // 2)  # 1,024 bytes in UTF-8, 512 characters
    assert len(edge.encode()) == MAX_ID_BYTES
    monkeypatch.chdir(tmp_path)
    (tmp_path / "edge.jsonl").write_text(
        json.dumps({"id": edge, "query": "x", "relevant": {edge: 2}}) + "\n", encoding="utf-8"
    )
    code, _, err = pgeval("testset", "load", "edge.jsonl", "--name", "edge")
    assert code == 0, err
    (tmp_path / "edge.trec").write_text(f"{edge} Q0 {edge} 1 1 t\n", encoding="utf-8")
    code, _, err = pgeval("run", "import", "edge.trec", "--testset", "edge", "--name", "edge-run")
    assert code == 0, err
    code, out, err = pgeval("metrics", "edge-run", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["recall@10"] == 1.0
