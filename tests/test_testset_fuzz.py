"""Fuzzing the loaders: random bytes and random JSON lines either load cleanly or fail with a
PgevalError, and a failure leaves nothing behind."""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluator.core.errors import PgevalError
from evaluator.testset import load

pytestmark = pytest.mark.slow

_names = itertools.count()
_dir = Path()  # the module's folder for fuzzed files (set by _fuzz_dir)
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module", autouse=True)
def _fuzz_dir():
    """A folder for the fuzzed files, made when the module's tests run (not when it is only
    collected, as with -m "not slow", which left /tmp/pgeval-fuzz-* behind) and removed after."""
    global _dir
    _dir = Path(tempfile.mkdtemp(prefix="pgeval-fuzz-"))
    yield
    shutil.rmtree(_dir, ignore_errors=True)


def _totals(conn):
    return conn.execute(
        "SELECT (SELECT count(*) FROM pgeval.testset), "
        "(SELECT count(*) FROM pgeval.query), "
        "(SELECT count(*) FROM pgeval.qrel)"
    ).fetchone()


def _try_load(conn, data: bytes, suffix: str, **kw):
    name = f"fuzz-{next(_names)}"
    path = _dir / f"{name}{suffix}"
    path.write_bytes(data)
    before = _totals(conn)
    try:
        report = load(conn, path, name, **kw)
    except PgevalError as exc:
        assert str(exc) and "\n" not in str(exc)
        assert _totals(conn) == before
        return None
    row = conn.execute(
        "SELECT t.n_queries, t.n_judgements, (SELECT count(*) FROM pgeval.query q WHERE "
        "q.testset_id = t.testset_id), (SELECT count(*) FROM pgeval.qrel j WHERE "
        "j.testset_id = t.testset_id) FROM pgeval.testset t WHERE t.name = %s",
        (name,),
    ).fetchone()
    assert row == (report.n_queries, report.n_judgements, report.n_queries, report.n_judgements)
    assert report.n_queries >= 1
    assert report.n_valid + report.n_no_relevant + report.n_unanswerable == report.n_queries
    conn.execute("DELETE FROM pgeval.testset WHERE name = %s", (name,))
    return report


@pytest.fixture(scope="module")
def fuzz_conn(database):
    with database.connect(autocommit=True) as c:
        yield c


@FUZZ
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".jsonl", ".csv", ".qrels"]))
def test_random_bytes(fuzz_conn, data, suffix):
    _try_load(fuzz_conn, data, suffix)


_text = st.text(max_size=12)
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.integers(), st.floats(allow_nan=True), _text
)
_json = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
    max_leaves=10,
)


def _mostly(valid, junk):
    """``valid`` nine times in ten, else ``junk``: most records load, the rest probe errors."""
    return st.integers(0, 9).flatmap(lambda i: junk if i == 0 else valid)


_chunk = st.sampled_from(["c1", "c2", "c3", "块-1", " c1"])
_query = st.fixed_dictionaries(
    {
        "id": _mostly(
            st.one_of(st.text("qx问", min_size=1, max_size=4), st.integers(0, 99)), _scalar
        ),
        "query": _mostly(st.sampled_from(["退款多久到账", "reset password", "a\tb"]), _scalar),
        "relevant": _mostly(
            st.one_of(
                st.dictionaries(
                    _chunk, _mostly(st.integers(1, 3), st.just(0)), min_size=1, max_size=3
                ),
                st.lists(_chunk, min_size=1, max_size=3, unique=True),
            ),
            st.one_of(
                st.dictionaries(_chunk, st.one_of(st.integers(-1, 4), _scalar), max_size=3), _json
            ),
        ),
    },
    optional={
        "answerable": _mostly(st.just(True), st.one_of(st.just(False), _scalar)),
        "type": _mostly(st.lists(st.sampled_from(["fuzzy", "exact"]), max_size=2), _json),
        "expected_facts": _mostly(st.lists(_text.filter(str.strip), max_size=2), _json),
        "embedding": _mostly(
            st.lists(st.floats(-2, 2), min_size=2, max_size=2),
            st.one_of(st.lists(_scalar, max_size=3), _json),
        ),
    },
)
_line = _mostly(
    _query.map(lambda d: json.dumps(d, ensure_ascii=False)),
    st.one_of(_json.map(json.dumps), st.just(""), _text),
)


@FUZZ
@given(lines=st.lists(_line, max_size=4), grade_map=st.sampled_from([None, "1=3,2=2,3=1,4=0,-1=0"]))
def test_random_json_lines(fuzz_conn, lines, grade_map):
    _try_load(
        fuzz_conn, "\n".join(lines).encode("utf-8", "surrogatepass"), ".jsonl", grade_map=grade_map
    )


_trec_line = _mostly(
    st.tuples(
        st.sampled_from(["q1", "q2", "问"]),
        st.just("0"),
        st.sampled_from(["c1", "c2", "c3"]),
        _mostly(st.sampled_from(["0", "1", "3"]), st.sampled_from(["4", "-1", "x", "2.0"])),
    ).map(" ".join),
    _text,
)


@FUZZ
@given(lines=st.lists(_trec_line, max_size=5), grade_map=st.sampled_from([None, "1=3,4=0,-1=0"]))
def test_random_trec_lines(fuzz_conn, lines, grade_map):
    _try_load(
        fuzz_conn, "\n".join(lines).encode("utf-8", "surrogatepass"), ".qrels", grade_map=grade_map
    )


_cell = {
    "id": _mostly(st.text("qx问", min_size=1, max_size=4), _text),
    "query": _mostly(st.sampled_from(["退款多久到账", "two\nlines", "a,b"]), _text),
    "relevant": _mostly(
        st.sampled_from(["c1:3;c2:1", "c1;c2", '{"c1": 2}', '["c1"]', "c1:0"]),
        st.one_of(_text, st.sampled_from(["c1:9", "c1:x", "{", "c1;c2:1"])),
    ),
    "answerable": _mostly(st.sampled_from(["", "true", "yes", "0"]), _text),
    "type": _mostly(st.sampled_from(["", "fuzzy;exact", '["a"]']), _text),
    "embedding": _mostly(st.sampled_from(["", "0.1;0.2", "[1, 2]"]), _text),
}


@FUZZ
@given(
    columns=st.lists(st.sampled_from(list(_cell)), min_size=1, max_size=6, unique=True),
    data=st.data(),
)
def test_random_csv_rows(fuzz_conn, columns, data):
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(columns)
    for _ in range(data.draw(st.integers(0, 4))):
        writer.writerow([data.draw(_cell[c]) for c in columns])
    _try_load(fuzz_conn, buf.getvalue().encode("utf-8", "surrogatepass"), ".csv")
