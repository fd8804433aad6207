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

import json
from collections.abc import Iterable, Iterator
from itertools import chain, compress, islice
from operator import gt, ne
from pathlib import Path

from ..core.errors import InputError

Segment = tuple  # (query ids, chunk ids, scores or None, line numbers): parallel sequences


class Interleaved(Exception):
    """A query's lines are not contiguous: group the file in memory instead."""


class _List:
    __slots__ = ("chunks", "lines", "query_id", "scores", "seen")

    def __init__(self, query_id: str):
        self.query_id = query_id
        self.chunks: list[str] = []
        self.scores: list = []
        self.lines: list = []  # the line numbers of the rows, a sequence per part added
        self.seen: set[str] = set()

    def extend(self, chunks: list[str], scores: list, lines, path: Path) -> None:
        """Add rows (file order); a chunk listed twice is refused naming both lines."""
        before = len(self.seen)
        self.seen.update(chunks)
        self.chunks += chunks
        self.scores += scores
        self.lines.append(lines)
        if len(self.seen) - before != len(chunks):
            self._refuse_duplicate(path)

    def _refuse_duplicate(self, path: Path) -> None:
        first: dict[str, int] = {}
        for chunk, line in zip(self.chunks, chain.from_iterable(self.lines)):
            if chunk in first:
                where = (
                    f"lines {first[chunk]} and {line}" if first[chunk] != line else f"line {line}"
                )
                raise InputError(
                    f"query '{self.query_id}' lists chunk '{chunk}' twice ({where})",
                    file=str(path),
                    line=line,
                )
            first[chunk] = line

    def ranked(self, by_score: bool) -> tuple[list[str], list]:
        chunks, scores = self.chunks, self.scores
        if not by_score or _strictly_descending(scores):
            return chunks, scores
        pairs = sorted(zip(scores, chunks), reverse=True)
        return [c for _, c in pairs], [s for s, _ in pairs]


def _strictly_descending(scores: list) -> bool:
    """Scores in strictly descending order: the order by score needs no tie rule, no sort
    (scores are numbers, never NaN: a TREC NaN is refused)."""
    return all(map(gt, scores, islice(scores, 1, None)))


def _runs(segment: Segment) -> Iterator[tuple[str, slice]]:
    """(query id, rows) of each run of rows of one query in a segment, in order."""
    qids = segment[0]
    if not qids:
        return
    # where the query id changes, found at C speed
    cuts = [0, *compress(range(1, len(qids)), map(ne, islice(qids, 1, None), qids)), len(qids)]
    for start, end in zip(cuts, islice(cuts, 1, None)):
        yield qids[start], slice(start, end)


def streamed(segments: Iterable[Segment], path: Path) -> Iterator[_List]:
    """Lists of a file grouped by query, one at a time; :class:`Interleaved` when a query
    comes back after another one."""
    done: set[str] = set()
    cur: _List | None = None
    for seg in segments:
        _, chunks, scores, lines = seg
        for qid, rows in _runs(seg):
            if cur is None or qid != cur.query_id:
                if cur is not None:
                    done.add(cur.query_id)
                    yield cur
                    cur.seen = set()  # written: the ids are checked
                if qid in done:
                    raise Interleaved(qid)
                cur = _List(qid)
            cur.extend(chunks[rows], scores[rows], lines[rows], path)
    if cur is not None:
        yield cur


def grouped(segments: Iterable[Segment], path: Path) -> Iterator[_List]:
    """Lists of any file, grouped in memory, in order of each query's first line."""
    lists: dict[str, _List] = {}
    for seg in segments:
        _, chunks, scores, lines = seg
        for qid, rows in _runs(seg):
            lst = lists.get(qid)
            if lst is None:
                lst = lists[qid] = _List(qid)
            lst.extend(chunks[rows], scores[rows], lines[rows], path)
    for lst in lists.values():
        yield lst
        lst.seen = set()  # written


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

    def rows():
        for lst in lists:
            counts[0] += len(lst.chunks)
            if lst.query_id not in known:
                unknown.add(lst.query_id)
                continue
            chunks, scores = lst.ranked(by_score)
            counts[1] += 1
            counts[2] += len(chunks)
            judged = grades.get(lst.query_id)
            if judged:  # the list's judged chunks (a few), found in its set of ids at C speed
                judged = {c: judged[c] for c in judged.keys() & lst.seen}
            yield run_id, lst.query_id, judged, scores, chunks

    copy(conn, rows())
    return counts[0], counts[1], counts[2], unknown


def test_set_judgements(conn, testset_id: int) -> tuple[set[str], dict[str, dict[str, int]]]:
    """(query ids, {query: {chunk: grade}}) of a test set: what an imported list is joined with.
    The judgements come one JSON object a query (decoded at C speed, not row by row)."""
    known = {
        r[0]
        for r in conn.execute(
            "SELECT query_id FROM pgeval.query WHERE testset_id = %s", (testset_id,)
        ).fetchall()
    }
    rows = conn.execute(
        "SELECT query_id, json_object_agg(chunk_id, grade)::text FROM pgeval.qrel "
        "WHERE testset_id = %s GROUP BY query_id",
        (testset_id,),
    ).fetchall()
    return known, {qid: json.loads(obj) for qid, obj in rows}
