"""The TREC parser's whole-block fast path and its line-by-line fallback give the same result.

`run import` parses a block of common-case lines at C speed (evaluator.run.trec_lines._common)
and any other block by pieces, line by line with every check. A file mixing both must store the
same lists and refuse with the same error as the line-by-line parser alone (``_common`` disabled),
wherever the blocks are cut (blocks made tiny here so that the boundaries fall everywhere).
"""

import math
import random
from pathlib import Path

import pytest
from helpers import make_testset

from evaluator.core.errors import InputError
from evaluator.run import trec_lines
from evaluator.run.runs import import_run

QUERIES = {f"q{i}": {f"c{i * 7 % 50}": 1, f"c{i * 3 % 50}": 2} for i in range(30)}
QUERIES['q"\\x'] = {"c1": 3}
QUERIES["qé"] = {"c2": 1}


@pytest.fixture
def ts(clean, conn):
    make_testset(conn, "fast-ts", QUERIES)
    return "fast-ts"


def _odd_line(rng, qid, chunk, rank, score):
    """A line the fast path leaves to the line-by-line parser (or one it reads the same)."""
    return rng.choice(
        [
            f"{qid} Q0 {chunk} {rank} {score} run extra text after the sixth field\n",
            f"{qid}\tQ0\t{chunk}\t{rank}\t{score}\trun\r\n",
            f"  {qid}  Q0 {chunk} {rank}   {score} run  \n",
            f"{qid} Q0 {chunk} {rank} {score} tägg\n",
            f"{qid} Q0 {chunk}\u00a0 {rank} {score} run\n",  # id with a trailing NBSP: stripped
            "\n",
            f"{qid} Q0 {chunk} {rank} +{score.lstrip('-')} run\n",
            f"{qid} Q0 {chunk} {rank} {score}e0 run\n",
            f"{qid} Q0 {chunk} {rank} {score}\x0brun\n",  # vertical tab: whitespace for both
            f"{qid} Q0 {chunk} {rank} Inf run\n",
        ]
    )


def _mixed_file(path: Path, seed: int, odd_share: float, interleave: bool = False) -> Path:
    rng = random.Random(seed)
    qids = list(QUERIES) + ["unknown-q"]
    lines = []
    for qid in qids:
        chunks = rng.sample([f"c{i}" for i in range(50)] + ['c"q', "c\\b", "cé", "c" * 300], 20)
        for rank, chunk in enumerate(chunks, 1):
            score = rng.choice([f"{rng.random():.6f}", str(rng.randint(-3, 3)), "1.", ".5", "-0"])
            if rng.random() < odd_share:
                lines.append(_odd_line(rng, qid, chunk, rank, score))
            else:
                lines.append(f"{qid} Q0 {chunk} {rank} {score} run\n")
    if interleave:
        rng.shuffle(lines)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _stored(conn, name):
    return conn.execute(
        "SELECT query_id, chunk_ids, scores::text, grades FROM pgeval.result_list "
        "JOIN pgeval.run USING (run_id) WHERE name = %s ORDER BY query_id",
        (name,),
    ).fetchall()


def _report(rep):
    return (rep.rows, rep.queries, rep.unknown_query_ids, rep.lines_with_extra_text)


def _line_by_line(monkeypatch):
    monkeypatch.setattr(trec_lines, "_common", lambda block, first: None)


def _error_both_ways(conn, path, ts, monkeypatch, name: str) -> str:
    """The error of importing ``path`` through the block parser, then line by line: the same."""
    with pytest.raises(InputError) as fast:
        import_run(conn, path, ts, f"{name}-fast")
    _line_by_line(monkeypatch)
    with pytest.raises(InputError) as slow:
        import_run(conn, path, ts, f"{name}-slow")
    assert str(fast.value) == str(slow.value)
    return str(fast.value)


@pytest.mark.parametrize("block_bytes", [64, 700, 1 << 16])
@pytest.mark.parametrize("odd_share", [0.0, 0.05, 0.5])
@pytest.mark.parametrize("interleave", [False, True])
def test_fast_path_and_line_by_line_store_the_same_lists(
    conn, ts, tmp_path, monkeypatch, block_bytes, odd_share, interleave
):
    f = _mixed_file(tmp_path / "mixed.trec", 11, odd_share, interleave)
    monkeypatch.setattr(trec_lines, "_BLOCK_BYTES", block_bytes)
    common, whole = trec_lines._common, []
    monkeypatch.setattr(trec_lines, "_common", lambda b, n: whole.append(common(b, n)) or whole[-1])
    fast = _report(import_run(conn, f, ts, "fast"))
    with monkeypatch.context() as m:
        _line_by_line(m)
        slow = _report(import_run(conn, f, ts, "slow"))
    assert fast == slow and fast[0] > 400
    assert _stored(conn, "fast") == _stored(conn, "slow")
    if block_bytes < 1 << 16 and odd_share <= 0.05:  # the fast path did read small blocks
        assert any(segment is not None for segment in whole)


def test_common_block_is_parsed_whole_and_odd_blocks_by_pieces(tmp_path, monkeypatch):
    """The fast path really runs: a common-case block gives one segment with a range of lines;
    one odd line sends only its 64-line piece to the line-by-line parser."""
    body = "".join(f"q{i // 10} Q0 c{i} {i} {1000 - i}.5 run\n" for i in range(300))
    f = tmp_path / "r.trec"
    f.write_text(body)
    segments = list(trec_lines.trec_segments(f))
    assert len(segments) == 1 and segments[0][3] == range(1, 301)
    lines = body.splitlines(keepends=True)
    lines[100] = lines[100].replace(" run", " run extra")
    f.write_text("".join(lines))
    extra = [0]
    segments = list(trec_lines.trec_segments(f, extra))
    assert [type(s[3]) for s in segments] == [range, list, range, range, range]
    assert segments[1][3] == list(range(65, 129)) and extra == [1]
    flat = [row for s in segments for row in zip(*s, strict=True)]
    assert [r[3] for r in flat] == list(range(1, 301))
    assert flat[100] == ("q10", "c100", 900.5, 101)


def test_long_lines_keep_the_fast_path_unless_an_id_is_too_long():
    """A line longer than the id limit (a long tag) stays on the fast path; an id of exactly
    1,024 bytes too; one of 1,025 bytes leaves it (and is refused by the line-by-line parser)."""
    tag, at_limit = "t" * 3000, "c" * 1024
    block = f"q1 Q0 a 1 2.5 {tag}\nq1 Q0 {at_limit} 2 1.5 run\n".encode()
    assert trec_lines._common(block, 1) == (["q1", "q1"], ["a", at_limit], [2.5, 1.5], range(1, 3))
    assert trec_lines._common(block.replace(b"c" * 1024, b"c" * 1025), 1) is None
    line = f"{'q' * 1025} Q0 a 1 2.5 run"
    assert trec_lines._common(f"{line}\n".encode(), 1) is None
    with pytest.raises(InputError, match="over the limit of 1,024 bytes"):
        trec_lines._line_row(line, 1, Path("x"), None)


def test_scores_float_reads_that_are_not_decimals_leave_the_fast_path():
    """inf, nan and 1_0 read as numbers by float() leave the fast path (trec_eval's atof reads
    them otherwise), also among ids with underscores; a decimal too large for a double stays."""
    for score in ("inf", "-Infinity", "nan", "1_0"):
        assert trec_lines._common(f"q_1 Q0 a_1 1 {score} run\n".encode(), 1) is None, score
        assert trec_lines._common(f"q1 Q0 a 1 2 run\nq1 Q0 b 2 {score} run\n".encode(), 1) is None
    assert trec_lines._common(b"q_1 Q0 a_1 1 1e999 run\n", 1)[2] == [math.inf]


BAD_TAILS = [
    ("q5 Q0 c1 9 1_0 run\n", "field 'score': score '1_0' is not a plain decimal number"),
    ("q5 Q0 c1 9 0x1p3 run\n", "score '0x1p3' is not a number"),
    ("q5 Q0 c1 9 nan run\n", "score is NaN"),
    ("q5 Q0 c1 9 1.5\n", "expected 6 fields"),
    ("q5 Q0 c\x001 9 1.5 run\n", "NUL character"),
    ("q5 Q0 " + "c" * 1100 + " 9 1.5 run\n", "over the limit of 1,024 bytes"),
    ("q5 Q0 c1 9 ١ run\n", "trec_eval reads it as 0"),
]


@pytest.mark.parametrize("block_bytes", [64, 1 << 16])
@pytest.mark.parametrize("tail,message", BAD_TAILS)
def test_errors_are_the_same_after_common_lines(
    conn, ts, tmp_path, monkeypatch, block_bytes, tail, message
):
    """A bad line after many common ones: the same error (file, line, field) either way, and
    nothing stored."""
    head = "".join(f"q{i // 40} Q0 c{i % 40} {i} {1 / (i + 1)} run\n" for i in range(200))
    f = tmp_path / "bad.trec"
    f.write_text(head + tail + "q9 Q0 c1 1 1 run\n", encoding="utf-8")
    monkeypatch.setattr(trec_lines, "_BLOCK_BYTES", block_bytes)
    error = _error_both_ways(conn, f, ts, monkeypatch, "bad")
    assert "bad.trec:201" in error and message in error
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == 0


@pytest.mark.parametrize("block_bytes", [64, 1 << 16])
def test_duplicate_across_blocks_named_with_both_lines(
    conn, ts, tmp_path, monkeypatch, block_bytes
):
    """A chunk listed twice for one query, the two lines far apart (other blocks between them),
    a bad score after: the duplicate (first in file order) is the error, either way."""
    rows = [f"q1 Q0 c{i} {i} {100 - i} run\n" for i in range(60)]
    rows.insert(55, "q1 Q0 c3 99 0.5 run\n")
    rows.append("q1 Q0 c99 1 1_0 run\n")
    f = tmp_path / "dup.trec"
    f.write_text("".join(rows))
    monkeypatch.setattr(trec_lines, "_BLOCK_BYTES", block_bytes)
    error = _error_both_ways(conn, f, ts, monkeypatch, "dup")
    assert "query 'q1' lists chunk 'c3' twice (lines 4 and 56)" in error


def test_scores_of_decimal_characters_read_alike(tmp_path, monkeypatch):
    """Scores made of the fast path's characters (digits . e E + -): the fast path accepts
    exactly the ones the line-by-line parser accepts, with the same value."""
    rng = random.Random(3)
    scores = [
        "".join(rng.choice("0123456789.eE+-") for _ in range(rng.randint(1, 6)))
        for _ in range(3000)
    ]
    for score in scores:
        block = f"q Q0 c 1 {score} t\n".encode()
        fast = trec_lines._common(block, 1)
        try:
            slow = trec_lines._line_row(block.decode()[:-1], 1, Path("x"), None)
        except InputError:
            slow = None
        if fast is None:
            assert slow is None, score  # a score the fast path leaves is refused, then
        else:
            assert slow is not None and (fast[2][0], str(fast[2][0])) == (slow[2], str(slow[2]))
