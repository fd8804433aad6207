"""The bad-input corpus (tests/bad_inputs/cases.toml): malformed run files, gate rule files, saved
reports, pipeline configurations (--set GUC values, stages, options) and target definitions. A
message that lists stage kinds says ``{kinds}`` or ``{ann_kinds}`` there (the registry's).

Every case goes through the real CLI and must exit 1 with its one-line message, print nothing on
stdout, show no traceback, write no file, and leave every table of schema pgeval and the knowledge
base exactly as they were. (Bad test set files: tests/bad_inputs/testsets, run by
test_testset_bad_inputs.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import make_run
from robust_kb import add_target, ensure_table, ensure_testset, pgeval_counts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = Path(__file__).parent / "bad_inputs"
CASES = tomllib.loads((CORPUS / "cases.toml").read_text(encoding="utf-8"))["case"]
KB = "bad_kb"


def _expected(error: str) -> str:
    """A case's message, its lists of kinds (``{kinds}``, ``{ann_kinds}``) the registry's."""
    from evaluator.kinds import registry

    return error.replace("{kinds}", ", ".join(registry.kinds())).replace(
        "{ann_kinds}", ", ".join(registry.ann_kinds())
    )


def _state(conn) -> dict:
    state = pgeval_counts(conn)
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (KB,)).fetchone()[0]
    state["kb:" + KB] = conn.execute(f"SELECT count(*) FROM {KB}").fetchone()[0] if exists else None
    state["kb:indexes"] = conn.execute(
        "SELECT count(*) FROM pg_indexes WHERE tablename = %s", (KB,)
    ).fetchone()[0]
    return state


@pytest.fixture
def stored(clean, conn):
    """Test set kb, target kb, a complete run and a running one: what a failure must not touch."""
    ensure_table(conn, KB, 300, 8)
    ensure_testset(conn, "kb", KB, 20, 8)
    add_target(conn, "kb", KB)
    make_run(conn, "base", "kb", {"q1": ["c1", "c2"], "q2": ["c3"]})
    make_run(conn, "partial", "kb", {"q1": ["c1"]}, status="running")
    # the query embeddings are stored, as `pgeval embed` leaves them: a pipeline stores missing
    # ones before it checks its stages (a cache of the test set, kept even when a stage fails)
    conn.execute(
        "INSERT INTO pgeval.query_embedding (testset_id, query_id, embedder, dim, "
        "embedding) SELECT testset_id, query_id, 'precomputed', 8, embedding "
        "FROM pgeval.query"
    )
    return _state(conn)


def test_corpus_is_large_and_well_formed():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    testsets = len(__import__("json").loads((CORPUS / "testsets" / "cases.json").read_text()))
    assert len(CASES) >= 30 and len(CASES) + testsets >= 60
    for case in CASES:
        assert set(case) <= {"id", "args", "error"}, case["id"]
        assert case["error"] and "\n" not in case["error"], case["id"]


def test_every_corpus_file_is_used():
    used = {a for c in CASES for a in c["args"]}
    files = {
        str(p.relative_to(CORPUS))
        for sub in ("runs", "rules", "reports", "pools")
        for p in (CORPUS / sub).iterdir()
    }
    assert files <= used, sorted(files - used)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused(case, stored, conn, pgeval, monkeypatch, tmp_path):
    monkeypatch.chdir(CORPUS)
    args = [a.replace("{tmp}", str(tmp_path)) for a in case["args"]]
    code, out, err = pgeval(*args)
    assert "Traceback" not in err and "Traceback" not in out
    assert code == 1, (code, out, err)
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err  # exactly one line
    assert err == f"pgeval: error: {_expected(case['error'])}\n"
    assert list(tmp_path.iterdir()) == []
    assert _state(conn) == stored
