"""Fuzzing the run import loader (`evaluator.run.runs.import_run`): random bytes, random TREC lines and
random JSON lines either import cleanly — a complete run whose stored lists are exactly what the
file says under its order rule — or fail with a one-line PgevalError that leaves every table of
schema pgeval as it was. Never another exception, never a half-written run."""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import make_testset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from robust_kb import pgeval_counts

from evaluator.core.errors import PgevalError
from evaluator.run.runs import import_run

pytestmark = pytest.mark.slow

QUERIES = ["q1", "q2", "问3", "q 4"]
_names = itertools.count()
_dir = Path()  # the module's folder for fuzzed files (set by _fuzz_dir)
FUZZ = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module", autouse=True)
def _fuzz_dir():
    """A folder for the fuzzed files, made when the module's tests run (not when it is only
    collected, as with -m "not slow", which left /tmp/pgeval-fuzz-run-* behind) and removed after."""
    global _dir
    _dir = Path(tempfile.mkdtemp(prefix="pgeval-fuzz-run-"))
    yield
    shutil.rmtree(_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def fuzz_conn(database):
    with database.connect(autocommit=True) as c:
        c.execute("DELETE FROM pgeval.testset WHERE name = 'fuzz-runs'")
        make_testset(
            c,
            "fuzz-runs",
            {"q1": {"c1": 3, "c2": 1}, "q2": {"c3": 2}, "问3": {"块": 1}, "q 4": {}},
            unanswerable=("q 4",),
        )
        yield c
        c.execute("DELETE FROM pgeval.testset WHERE name = 'fuzz-runs'")


def _expected(data: bytes, fmt: str) -> dict[str, list[str]]:
    """What a clean import must store: {query id: chunk ids in rank order}, known queries only
    (an independent reading of the file, used only when the import succeeded)."""
    text = data.decode("utf-8").lstrip("\ufeff")
    lists: dict[str, list] = {}
    for line in text.split("\n"):
        if fmt == "trec":
            parts = line.split()
            if parts:
                lists.setdefault(parts[0], []).append((float(parts[4]), parts[2]))
        elif line.strip():
            obj = json.loads(line)
            for item in obj["ranked"]:
                chunk = item["chunk_id"] if isinstance(item, dict) else item
                # ids as the test set loader reads them: surrounding whitespace removed
                lists.setdefault(str(obj["query_id"]).strip(), []).append(str(chunk).strip())
    out = {}
    for qid, items in lists.items():
        if qid in QUERIES:
            # TREC: score descending, ties by chunk id descending (trec_eval); JSONL: as given
            out[qid] = [c for _, c in sorted(items, reverse=True)] if fmt == "trec" else items
    return out


def _try_import(conn, data: bytes, fmt: str):
    name = f"fuzz-{next(_names)}"
    path = _dir / f"{name}.{'trec' if fmt == 'trec' else 'jsonl'}"
    path.write_bytes(data)
    before = pgeval_counts(conn)
    try:
        report = import_run(conn, path, "fuzz-runs", name, fmt)
    except PgevalError as exc:
        assert str(exc) and "\n" not in str(exc)
        assert pgeval_counts(conn) == before
        return None
    try:
        status, rule = conn.execute(
            "SELECT status, order_rule FROM pgeval.run WHERE name = %s", (name,)
        ).fetchone()
        assert status == "complete"
        rows = conn.execute(
            "SELECT query_id, rank, chunk_id FROM pgeval.result r JOIN pgeval.run "
            "USING (run_id) WHERE name = %s ORDER BY query_id, rank",
            (name,),
        ).fetchall()
        stored: dict[str, list[str]] = {}
        for qid, rank, chunk in rows:
            stored.setdefault(qid, []).append(chunk)
            assert rank == len(stored[qid])  # ranks 1..n, no gap
        assert stored == _expected(data, fmt)
        assert report.rows == len(rows) and report.queries == len(stored)
    finally:
        conn.execute("DELETE FROM pgeval.run WHERE name = %s", (name,))
    assert pgeval_counts(conn) == before
    return report


@FUZZ
@given(data=st.binary(max_size=300), fmt=st.sampled_from(["trec", "jsonl"]))
def test_random_bytes(fuzz_conn, data, fmt):
    _try_import(fuzz_conn, data, fmt)


def _mostly(valid, junk):
    """``valid`` nine times in ten, else ``junk``."""
    return st.integers(0, 9).flatmap(lambda i: junk if i == 0 else valid)


_text = st.text(max_size=8)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    _text,
)
_json = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=8,
)
_qid = _mostly(st.sampled_from(QUERIES + ["unknown"]), _scalar)
_chunk = _mostly(
    st.sampled_from(["c1", "c2", "c3", "块", "c\\1", " c1"]),
    st.one_of(_scalar, st.text(alphabet="\x00\t\n\r\\é\ud800", max_size=3)),
)
_item = st.one_of(
    _chunk,
    st.fixed_dictionaries(
        {"chunk_id": _chunk}, optional={"score": _mostly(st.floats(-5, 5), _scalar)}
    ),
)
_record = st.fixed_dictionaries(
    {"query_id": _qid, "ranked": _mostly(st.lists(_item, max_size=4), _json)}
)
_dumps = st.tuples(_record, st.booleans()).map(lambda r: json.dumps(r[0], ensure_ascii=r[1]))
_line = _mostly(_dumps, st.one_of(_json.map(json.dumps), st.just(""), _text))


@FUZZ
@given(lines=st.lists(_line, max_size=5))
def test_random_json_lines(fuzz_conn, lines):
    _try_import(fuzz_conn, "\n".join(lines).encode("utf-8", "surrogatepass"), "jsonl")


_score = _mostly(
    st.floats(-10, 10).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "x", "1e999", "0x10", "1_0"]),
)
_trec_line = _mostly(
    st.tuples(
        st.sampled_from(["q1", "q2", "问3", "zz"]),
        st.just("Q0"),
        st.sampled_from(["c1", "c2", "c3", "块", "c\\1"]),
        st.integers(0, 9).map(str),
        _score,
        st.just("tag"),
    ).map(" ".join),
    _text,
)


@FUZZ
@given(lines=st.lists(_trec_line, max_size=6))
def test_random_trec_lines(fuzz_conn, lines):
    _try_import(fuzz_conn, "\n".join(lines).encode("utf-8", "surrogatepass"), "trec")
