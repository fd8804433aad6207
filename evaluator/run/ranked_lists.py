"""Parsed result rows to ranked lists, as `run import` stores them (pgeval.result_list: one row
per query, chunk ids, scores and judged grades as arrays in rank order).

The checks the database used to make row by row are made here, while the file is read: a chunk
listed twice for one query is refused naming the query, the chunk and both lines. A file whose
lines are grouped by query (every TREC file pgeval or trec_eval writes, every JSONL file) streams
in constant memory: each parsed segment is checked as it is added, then its rows are gathered in
batches of whole lists (about ``BATCH_ROWS`` rows), ranked (one vectorised test finds the lists
already in order) and encoded column-wise (:mod:`evaluator.stages.list_arrays`): no Python step
per row unless a list must be sorted. A file whose queries are interleaved is read again and
grouped in memory.

Order: TREC lists are sorted by score descending, ties by chunk id descending in byte order (the
trec_eval rule; Python's str order is code-point order, which is UTF-8 byte order); JSONL lists
keep the given order.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate, chain, groupby, islice
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import InputError

Segment = tuple  # (query ids, chunk ids, scores or None, line numbers): parallel sequences
# rows of whole lists ranked and encoded at once: few enough for their ids and scores to stay in
# the CPU cache from parsing to encoding (measured on 1,000,000 rows: checking and batching cost
# 0.2 s beyond parsing with 4,096, 0.37 s with 65,536)
BATCH_ROWS = 1 << 12


class Interleaved(Exception):
    """A query's lines are not contiguous: group the file in memory instead."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Whole ranked lists in columns, in file order: list ``i`` is rows ``cuts[i]:cuts[i + 1]``
    of ``chunks`` and ``scores``, of query ``query_ids[i]``; ``ids[i]``: its set of chunk ids
    (checked: no chunk twice)."""

    query_ids: list[str]
    cuts: list[int]
    chunks: list[str]
    scores: list
    ids: list[set[str]]


def _refuse_duplicate(query_id: str, chunks: Iterable[str], lines: Iterable, path: Path) -> None:
    """InputError naming the first chunk listed twice and both its lines."""
    first: dict[str, int] = {}
    for chunk, line in zip(chunks, lines):
        if chunk in first:
            where = f"lines {first[chunk]} and {line}" if first[chunk] != line else f"line {line}"
            raise InputError(
                f"query '{query_id}' lists chunk '{chunk}' twice ({where})",
                file=str(path),
                line=line,
            )
        first[chunk] = line


class _List:
    """One query's list gathered from parts anywhere in the file (:func:`grouped`)."""

    __slots__ = ("chunks", "lines", "query_id", "scores", "seen")

    def __init__(self, query_id: str):
        self.query_id = query_id
        self.chunks: list[str] = []
        self.scores: list = []
        self.lines: list = []  # the line numbers of the rows, a sequence per part added
        self.seen: set[str] = set()

    def extend(self, chunks: list[str], scores: list, lines: Any, path: Path) -> None:
        """Add rows (file order); a chunk listed twice is refused naming both lines."""
        before = len(self.seen)
        self.seen.update(chunks)
        self.chunks += chunks
        self.scores += scores
        self.lines.append(lines)
        if len(self.seen) - before != len(chunks):
            _refuse_duplicate(self.query_id, self.chunks, chain.from_iterable(self.lines), path)


def _cuts(qids: Sequence[str]) -> list[int]:
    """0, where the query id changes, len(qids): the runs of equal ids found by ``groupby``, at
    C speed (two thirds of the time of comparing each id with the one before, measured on a
    1,000,000-row file)."""
    return [0, *accumulate(map(len, map(list, map(itemgetter(1), groupby(qids)))))]


def _runs(segment: Segment) -> Iterator[tuple[str, slice]]:
    """(query id, rows) of each run of rows of one query in a segment, in order."""
    qids = segment[0]
    cuts = _cuts(qids)
    for start, end in zip(cuts, islice(cuts, 1, None)):
        yield qids[start], slice(start, end)


class _Pending:
    """Rows read and not yet handed out as a batch (columns), with where each pending query's
    rows start and its set of chunk ids. Each segment is checked as it is added, while its ids
    are in the CPU cache, in file order: a query that comes back after another one raises
    :class:`Interleaved`, a chunk listed twice InputError naming both lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.chunks: list[str] = []
        self.scores: list = []
        self.lines: list = []  # the line numbers of the rows, a sequence per segment
        self.starts: list[int] = []  # the row where each pending query's rows start
        self.qids: list[str] = []  # each pending query's id
        self.ids: list[set[str]] = []  # each pending query's chunk ids
        self.started: set[str] = set()  # every query read so far
        self.last: str | None = None

    def add(self, segment: Segment) -> None:
        qids, chunks, scores, lines = segment
        if not qids:
            return
        base = len(self.chunks)
        self.chunks += chunks
        self.scores += scores
        self.lines.append(lines)
        cuts = _cuts(qids)
        for a, b in zip(cuts, islice(cuts, 1, None)):
            qid = qids[a]
            if a == 0 and qid == self.last:  # the rows of the query before go on
                seen = self.ids[-1]
            else:
                if qid in self.started:
                    raise Interleaved(qid)
                self.started.add(qid)
                self.starts.append(base + a)
                self.qids.append(qid)
                seen = set()
                self.ids.append(seen)
            before = len(seen)
            seen.update(chunks[a:b])
            if len(seen) - before != b - a:
                start, end = self.starts[-1], base + b
                lines_read = list(chain.from_iterable(self.lines))
                _refuse_duplicate(qid, self.chunks[start:end], lines_read[start:end], self.path)
        self.last = qids[-1]

    def take(self, keep_last: bool) -> Batch | None:
        """The pending rows' whole lists as a batch; ``keep_last``: the last query's rows stay
        pending (its next rows may follow)."""
        starts = self.starts
        n = len(starts) - 1 if keep_last else len(starts)
        end = starts[-1] if keep_last else len(self.chunks)
        if not n or end == 0:
            return None
        cuts = [*starts[:n], end]
        batch = Batch(
            self.qids[:n],
            cuts,
            self.chunks[:end],
            self.scores[:end],
            self.ids[:n],
        )
        del self.qids[:n], self.chunks[:end], self.scores[:end], self.ids[:n]
        self.starts = [s - end for s in starts[n:]]
        kept, row = [], 0
        for part in self.lines:  # the line numbers of the rows kept
            if row + len(part) > end:
                kept.append(part[max(0, end - row) :])
            row += len(part)
        self.lines = kept
        return batch


def streamed(segments: Iterable[Segment], path: Path) -> Iterator[Batch]:
    """Batches of the lists of a file grouped by query, in file order; :class:`Interleaved`
    when a query comes back after another one. An error of the file is raised after the rows
    of the lines before it are handed out (their own errors first)."""
    pending = _Pending(path)
    error: InputError | None = None
    try:
        for seg in segments:
            pending.add(seg)
            if len(pending.chunks) >= BATCH_ROWS:
                batch = pending.take(keep_last=True)
                if batch is not None:
                    yield batch
    except InputError as exc:
        error = exc
    batch = pending.take(keep_last=False)
    if batch is not None:
        yield batch
    if error is not None:
        raise error


def grouped(segments: Iterable[Segment], path: Path) -> Iterator[Batch]:
    """Batches of the lists of any file, grouped in memory, in order of each query's first
    line."""
    lists: dict[str, _List] = {}
    for seg in segments:
        _, chunks, scores, lines = seg
        for qid, rows in _runs(seg):
            lst = lists.get(qid)
            if lst is None:
                lst = lists[qid] = _List(qid)
            lst.extend(chunks[rows], scores[rows], lines[rows], path)
    group: list[_List] = []
    n = 0
    for lst in lists.values():
        group.append(lst)
        n += len(lst.chunks)
        if n >= BATCH_ROWS:
            yield _batch_of(group)
            group, n = [], 0
    if group:
        yield _batch_of(group)


def _batch_of(group: list[_List]) -> Batch:
    return Batch(
        [lst.query_id for lst in group],
        [0, *accumulate(len(lst.chunks) for lst in group)],
        list(chain.from_iterable(lst.chunks for lst in group)),
        list(chain.from_iterable(lst.scores for lst in group)),
        [lst.seen for lst in group],
    )


def ranked_by_score(batch: Batch) -> np.ndarray:
    """Rank each list of ``batch`` in place by score descending, ties by chunk id descending
    (byte order: Python's str order is code-point order, which is UTF-8 byte order); returns the
    scores as float8. A list whose scores strictly descend (found for the whole batch at once)
    is left as it is; the others are sorted."""
    scores, chunks, cuts = batch.scores, batch.chunks, batch.cuts
    values = np.fromiter(scores, np.float64, len(scores))  # numbers, never NaN (refused)
    descends = values[:-1] > values[1:]
    descends[np.array(cuts[1:-1], np.int64) - 1] = True  # a list's last row: no next to compare
    unsorted = np.flatnonzero(~descends)
    if unsorted.size:
        for i in np.unique(np.searchsorted(cuts, unsorted, side="right") - 1).tolist():
            a, b = cuts[i], cuts[i + 1]
            pairs = sorted(zip(scores[a:b], chunks[a:b]), reverse=True)
            chunks[a:b] = [c for _, c in pairs]
            scores[a:b] = [v for v, _ in pairs]
            values[a:b] = scores[a:b]
    return values


def copy_lists(
    conn: Any,
    run_id: int,
    batches: Iterable[Batch],
    *,
    by_score: bool,
    judgements: Judgements,
) -> Copied:
    """COPY of the lists of known queries into pgeval.result_list, each chunk with its
    judged grade (``judgements``: the run's test set's, see :class:`Judgements`). ``by_score``:
    lists ranked by :func:`ranked_by_score` (and whether every score written is minus its rank
    found on the way, :func:`minus_ranks`), else kept in the given order.

    The first batches (at most ``_HELD_BATCHES``: memory stays bounded) are ranked and encoded
    while the server reads the judgements (:meth:`Judgements.reading`), then every batch is
    written as it comes."""
    from ..stages.list_arrays import encode_columns, grade_array
    from ..stages.store import copy_encoded

    counts = [0, 0, 0]
    unknown: set[str] = set()
    ranks = [by_score]  # every list written so far: its scores are minus its ranks

    def written(batch: Batch, minus: Any, texts: list[bytes], floats: list[bytes]) -> Iterator:
        known, chunks, cuts = judgements.known, batch.chunks, batch.cuts
        for i, qid in enumerate(batch.query_ids):
            if qid not in known:
                unknown.add(qid)
                continue
            a, b = cuts[i], cuts[i + 1]
            counts[1] += 1
            counts[2] += b - a
            if minus is not None and not minus[i]:
                ranks[0] = False
            grade = grade_array(judgements.get(qid), chunks, a, b, batch.ids[i])
            yield run_id, qid, grade, floats[i], texts[i]

    def encoded(batch: Batch) -> tuple[Batch, Any, list[bytes], list[bytes]]:
        counts[0] += len(batch.chunks)
        if not by_score:
            return (batch, None, *encode_columns(batch.chunks, batch.scores, batch.cuts))
        values = ranked_by_score(batch)
        minus = minus_ranks(values, batch.cuts) if ranks[0] else None
        return (batch, minus, *encode_columns(batch.chunks, values, batch.cuts))

    # the judgements are read by the server while the first batches (a bounded few) are ranked
    # and encoded, then every batch is written as it comes
    remaining = iter(batches)
    with _collector_paused():
        with judgements.reading():
            held = [encoded(batch) for batch in islice(remaining, _HELD_BATCHES)]
        later = (encoded(batch) for batch in remaining)
        copy_encoded(conn, chain.from_iterable(written(*e) for e in chain(held, later)))
    return Copied(counts[0], counts[1], counts[2], unknown, ranks[0] and counts[2] > 0)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, then as it was: a file's lists are read,
    checked and written as tens of thousands of lists, sets and rows, none of them in a cycle
    (reference counting frees each), and the collector's passes over them, which free nothing,
    cost about a tenth of the import's time (measured on 1,000,000 rows)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(frozen=True)
class Copied:
    """What :func:`copy_lists` read and wrote."""

    rows: int  # source rows read
    lists: int  # lists written
    results: int  # results written
    unknown: set[str]  # query ids not in the test set (their lists not written)
    minus_ranks: bool  # lists ranked by score, some written, every score minus its rank


def minus_ranks(values: np.ndarray, cuts: list[int]) -> np.ndarray:
    """Whether each list's scores (``values``, lists at ``cuts``) are minus their ranks (-1,
    -2, ...): a TREC export of a run without comparable scores. Its first score tells most
    lists apart; the others are compared whole."""
    starts = np.array(cuts[:-1], np.int64)
    found = values[starts] == -1.0
    if found.any():
        ranks = np.arange(1, len(values) + 1) - np.repeat(starts, np.diff(cuts))
        found &= np.logical_and.reduceat(values == -ranks, starts)
    return found


_HELD_BATCHES = 16  # batches (about 65,000 rows: as long to parse as the server takes to read
# 10,000 queries' judgements) ranked and encoded before the judgements are read
_KNOWN = "SELECT query_id FROM pgeval.query WHERE testset_id = %s"
_JUDGED = (
    "SELECT query_id, array_agg(chunk_id), array_agg(grade) FROM pgeval.qrel "
    "WHERE testset_id = %s GROUP BY query_id"
)


class Judgements:
    """The query ids and judgements of a test set, what an imported list is joined with. They
    are read on the importing connection, in its transaction (a test set loaded in it is seen),
    while the file is parsed: :meth:`reading` sends both statements in pipeline mode, the server
    runs them on its own core while the first batches are parsed, and their rows are taken when
    the block ends, before the COPY starts. (Read on a second connection from a thread instead,
    they cost the parser 0.1-0.17 s of CPU on 1,000,000 rows, the thread's share of the
    interpreter, to hide the server's 0.07 s.) Rows come as arrays (binary); a query's
    {chunk: grade} is built when asked."""

    def __init__(self, conn: Any, testset_id: int) -> None:
        self.conn, self.testset_id = conn, testset_id
        self._rows: dict[str, tuple[list, list]] | None = None
        self._known: set[str] | None = None

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Send the statements for the server to run while the body runs (which must not use
        the connection); their rows are read when it ends (with a libpq older than 14, which
        has no pipeline mode, they are read then). A body that raises leaves them unread."""
        import psycopg

        if self._known is None and psycopg.Pipeline.is_supported():
            with self.conn.pipeline():
                cursors = self._send()
                yield
            self._take(*cursors)
        else:
            yield
            self.load()  # never later: the caller's COPY then holds the connection

    def _send(self) -> tuple:
        return (
            self.conn.execute(_KNOWN, (self.testset_id,)),
            self.conn.cursor(binary=True).execute(_JUDGED, (self.testset_id,)),
        )

    def _take(self, known: Any, judged: Any) -> None:
        self._known = {r[0] for r in known.fetchall()}
        self._rows = {q: (chunks, grades) for q, chunks, grades in judged.fetchall()}

    def load(self) -> None:
        """Read the judgements now, unless they are read."""
        if self._known is None:
            self._take(*self._send())

    def _read(self) -> tuple[set[str], dict[str, tuple[list, list]]]:
        """(query ids, judgement rows), read by :meth:`reading` or :meth:`load`."""
        # never read here: a COPY may hold the connection
        if self._known is None or self._rows is None:
            raise RuntimeError("the judgements are used before they are read")
        return self._known, self._rows

    @property
    def known(self) -> set[str]:
        """The test set's query ids."""
        return self._read()[0]

    def get(self, query_id: str) -> dict[str, int] | None:
        """{chunk: grade} of a query's judgements (None: none)."""
        row = self._read()[1].get(query_id)
        return None if row is None else dict(zip(*row))
