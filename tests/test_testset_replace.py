"""Loading a name again: same content -> unchanged (nothing rewritten); other content -> Conflict
unless --replace, which replaces it and deletes the old test set's runs (ON DELETE CASCADE)."""

from __future__ import annotations

import pytest
from helpers import make_run

from evaluator.core.errors import Conflict
from evaluator.testset import load

V1 = (
    '{"id": "q1", "query": "first", "relevant": {"c1": 3}}\n'
    '{"id": "q2", "query": "second", "relevant": ["c2", "c3"]}\n'
)
# the same content, written differently: key order, spacing, blank lines, list vs dict grade 1
V1_REWRITTEN = (
    '\n{"relevant": {"c1": 3}, "query": "first",   "id": "q1"}\n\n'
    '{"query": "second", "id": "q2", "relevant": ["c2", "c3"], "answerable": true}\n'
)
V2 = (
    '{"id": "q1", "query": "first", "relevant": {"c1": 2}}\n'
    '{"id": "q2", "query": "second", "relevant": ["c2", "c3"]}\n'
)


def _state(conn, name="kb"):
    return conn.execute(
        "SELECT t.testset_id, t.xmin::text, t.content_hash, t.created_at, "
        "(SELECT array_agg(j.grade ORDER BY j.query_id, j.chunk_id) FROM pgeval.qrel j "
        "  WHERE j.testset_id = t.testset_id), "
        "(SELECT count(*) FROM pgeval.run r WHERE r.testset_id = t.testset_id) "
        "FROM pgeval.testset t WHERE t.name = %s",
        (name,),
    ).fetchone()


def test_same_content_is_unchanged_and_not_rewritten(clean, conn, tmp_file, pgeval):
    first = load(conn, tmp_file("v1.jsonl", V1), "kb")
    make_run(conn, "r1", "kb", {"q1": ["c1"]})
    before = _state(conn)
    code, out, err = pgeval(
        "testset", "load", str(tmp_file("again.jsonl", V1_REWRITTEN)), "--name", "kb"
    )
    assert code == 0, err
    assert out.splitlines()[0] == "test set 'kb' unchanged (same content hash); nothing rewritten"
    assert f"content hash sha256:{first.content_hash}" in out
    assert _state(conn) == before  # same row version (xmin), same run, same timestamps
    again = load(conn, tmp_file("v1.jsonl", V1), "kb", replace=True)
    assert again.unchanged and again.testset_id == first.testset_id
    assert _state(conn) == before


def test_different_content_is_a_conflict_without_replace(clean, conn, tmp_file, pgeval):
    load(conn, tmp_file("v1.jsonl", V1), "kb")
    make_run(conn, "r1", "kb", {"q1": ["c1"]})
    before = _state(conn)
    v2 = tmp_file("v2.jsonl", V2)
    with pytest.raises(Conflict):
        load(conn, v2, "kb")
    code, out, err = pgeval("testset", "load", str(v2), "--name", "kb")
    assert code == 1 and out == ""
    assert err.startswith("pgeval: error: test set 'kb' already exists with different content")
    assert err.strip().endswith("pass --replace to replace it, which deletes its 1 run(s)")
    assert _state(conn) == before


def test_replace_swaps_content_and_deletes_old_runs(clean, conn, tmp_file, pgeval):
    old = load(conn, tmp_file("v1.jsonl", V1), "kb")
    make_run(conn, "r1", "kb", {"q1": ["c1"]})
    make_run(conn, "r2", "kb", {"q2": ["c2"]})
    load(conn, tmp_file("other.jsonl", V1), "other")
    make_run(conn, "r-other", "other", {"q1": ["c1"]})
    code, out, err = pgeval(
        "testset", "load", str(tmp_file("v2.jsonl", V2)), "--name", "kb", "--replace"
    )
    assert code == 0, err
    assert out.splitlines()[0].startswith("replaced test set 'kb'")
    assert out.splitlines()[0].endswith("deleted 2 run(s) of the old one")
    tid, _, digest, _, grades, runs = _state(conn)
    assert (grades, runs) == ([2, 1, 1], 0) and digest != old.content_hash
    assert conn.execute("SELECT name FROM pgeval.run ORDER BY name").fetchall() == [("r-other",)]
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.query WHERE testset_id = %s", (old.testset_id,)
        ).fetchone()[0]
        == 0
    )


def test_replace_with_a_bad_file_keeps_the_old_test_set(clean, conn, tmp_file, pgeval):
    load(conn, tmp_file("v1.jsonl", V1), "kb")
    make_run(conn, "r1", "kb", {"q1": ["c1"]})
    before = _state(conn)
    bad = tmp_file("bad.jsonl", V2 + '{"id": "q1", "query": "dup", "relevant": ["c9"]}\n')
    code, _, err = pgeval("testset", "load", str(bad), "--name", "kb", "--replace")
    assert code == 1
    assert (
        err.strip()
        == f"pgeval: error: {bad}:3, field 'id': duplicate query id 'q1' (also on line 1)"
    )
    assert _state(conn) == before
