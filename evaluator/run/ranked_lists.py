"""Parsed result rows to ranked lists, as `run import` stores them (pgeval.result_list: one row
per query, chunk ids, scores and judged grades as arrays in rank order).

The checks the database used to make row by row are made here, while the file is read: a chunk
listed twice for one query is refused naming the query, the chunk and both lines. A file whose
lines are grouped by query (every TREC file pgeval or trec_eval writes, every JSONL file) streams
in constant memory: a query's list is written when the next query starts. A file whose queries
are interleaved is read again and grouped in memory.

Order: TREC lists are sorted by score descending, ties by chunk id descending in byte order (the
trec_eval rule; Python's str order is code-point order, which is UTF-8 byte order); JSONL lists
keep the given order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ..core.errors import InputError

Row = tuple  # (query_id, chunk_id, score or None, line)


class Interleaved(Exception):
    """A query's lines are not contiguous: group the file in memory instead."""


class _List:
    __slots__ = ("chunks", "lines", "query_id", "scores")

    def __init__(self, query_id: str):
        self.query_id = query_id
        self.chunks: list[str] = []
        self.scores: list = []
        self.lines: dict[str, int] = {}

    def add(self, chunk: str, score, line: int, path: Path) -> None:
        first = self.lines.get(chunk)
        if first is not None:
            where = f"lines {first} and {line}" if first != line else f"line {first}"
            raise InputError(
                f"query '{self.query_id}' lists chunk '{chunk}' twice ({where})",
                file=str(path),
                line=line,
            )
        self.lines[chunk] = line
        self.chunks.append(chunk)
        self.scores.append(score)

    def ranked(self, by_score: bool) -> tuple[list[str], list]:
        if not by_score:
            return self.chunks, self.scores
        pairs = sorted(zip(self.scores, self.chunks), reverse=True)
        return [c for _, c in pairs], [s for s, _ in pairs]


def streamed(rows: Iterable[Row], path: Path) -> Iterator[_List]:
    """Lists of a file grouped by query, one at a time; :class:`Interleaved` when a query
    comes back after another one."""
    done: set[str] = set()
    cur: _List | None = None
    for qid, chunk, score, line in rows:
        if cur is None or qid != cur.query_id:
            if cur is not None:
                done.add(cur.query_id)
                yield cur
            if qid in done:
                raise Interleaved(qid)
            cur = _List(qid)
        cur.add(chunk, score, line, path)
    if cur is not None:
        yield cur


def grouped(rows: Iterable[Row], path: Path) -> Iterator[_List]:
    """Lists of any file, grouped in memory, in order of each query's first line."""
    lists: dict[str, _List] = {}
    for qid, chunk, score, line in rows:
        lst = lists.get(qid)
        if lst is None:
            lst = lists[qid] = _List(qid)
        lst.add(chunk, score, line, path)
    yield from lists.values()


def copy_lists(
    conn,
    run_id: int,
    lists: Iterable[_List],
    *,
    by_score: bool,
    known: set[str],
    grades: dict[str, dict[str, int]],
) -> tuple[int, int, int, set]:
    """COPY of the lists of known queries into pgeval.result_list, each chunk with its
    judged grade (``grades``: {query: {chunk: grade}} of the run's test set). Returns
    (source rows read, lists written, results written, unknown query ids)."""
    from ..stages.store import copy_lists as copy

    counts = [0, 0, 0]
    unknown: set[str] = set()
    empty: dict[str, int] = {}

    def rows():
        for lst in lists:
            counts[0] += len(lst.chunks)
            if lst.query_id not in known:
                unknown.add(lst.query_id)
                continue
            chunks, scores = lst.ranked(by_score)
            g = grades.get(lst.query_id, empty)
            counts[1] += 1
            counts[2] += len(chunks)
            yield (
                run_id,
                lst.query_id,
                [g.get(c) for c in chunks] if g else [None] * len(chunks),
                scores,
                chunks,
            )

    copy(conn, rows())
    return counts[0], counts[1], counts[2], unknown


def test_set_judgements(conn, testset_id: int) -> tuple[set[str], dict[str, dict[str, int]]]:
    """(query ids, {query: {chunk: grade}}) of a test set: what an imported list is joined with."""
    known = {
        r[0]
        for r in conn.execute(
            "SELECT query_id FROM pgeval.query WHERE testset_id = %s", (testset_id,)
        )
    }
    grades: dict[str, dict[str, int]] = {}
    for qid, chunk, grade in conn.execute(
        "SELECT query_id, chunk_id, grade FROM pgeval.qrel WHERE testset_id = %s", (testset_id,)
    ):
        grades.setdefault(qid, {})[chunk] = grade
    return known, grades
