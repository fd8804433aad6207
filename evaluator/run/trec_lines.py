"""Reading a TREC run file (``qid Q0 chunk rank score tag`` lines) into columns.

The file is read in blocks of whole lines (:meth:`Source.blocks`). A block whose every line is
the common case is parsed at C speed as a whole: printable ASCII fields separated by spaces or
tabs, exactly six fields a line, ids of at most MAX_ID_BYTES characters, every score a plain decimal
number. Such lines are exactly the lines the line-by-line parser (:func:`_line_row`) reads
unchanged: the same ids, the same scores, nothing to refuse. Any other block is tried again by
pieces of 64 lines; a piece that is not the common case is read line by line, with every check: errors name
the file, line and field; text after the sixth field is ignored (and counted); a score is read
only when it is a plain decimal number, which C's ``atof`` (trec_eval) and pgeval read alike.

What comes out is a sequence of segments ``(query ids, chunk ids, scores, line numbers)``, four
parallel lists (the line numbers a ``range`` for a block parsed whole), in file order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import InputError
from ..core.ids import MAX_ID_BYTES, ident
from ..testset.source import Source
from .ranked_lists import Segment

_PIECE_LINES = 64  # a block not all the common case is tried again by pieces of so many lines
_BLOCK_BYTES = 1 << 16  # small enough for a block's fields to stay in the CPU cache (measured)
# what C's strtod/atof reads in full, and Python's float() reads to the same value (ASCII only)
_SCORE = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)
_ATOF_PREFIX = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_COMMON_BYTES = bytes(range(0x21, 0x7F)) + b" \t\r\n"  # printable ASCII, space, tab, line ends
_DECIMAL_BYTES = b"0123456789.eE+-"  # with float() reading them: a plain decimal number
_EOL = "\x01"  # marks each line's end among the fields (never in a common-case block)


def line_id(value: Any, what: str, path: Path, lineno: int, field: str | None = None) -> str:
    """:func:`ident` of a value read on line ``lineno`` of ``path``; InputError naming them."""
    try:
        return ident(value, what)
    except ValueError as exc:
        raise InputError(
            str(exc), file=str(path), line=lineno, field=field or what.replace(" ", "_")
        ) from None


def trec_segments(
    path: Path, extra: list[int] | None = None, src: Source | None = None
) -> Iterator[Segment]:
    """The segments of a TREC run file, in file order. Text after the sixth field is ignored,
    as trec_eval ignores it (its own test file results.trunc has some); ``extra[0]`` counts the
    lines that had such text. ``src``: the file already opened as a :class:`Source` (its bytes
    read tell the progress). An error is raised only after every row of an earlier line has been
    handed out, so a consumer that checks rows sees them in the order the file has them."""
    src = src or Source(path)
    for first, block in src.blocks(_BLOCK_BYTES):
        yield from _block(block, first, path, src, extra)


def _block(
    block: bytes, first: int, path: Path, src: Source, extra: list[int] | None
) -> Iterator[Any]:
    segment = _common(block, first)
    if segment is not None:
        yield segment
        return
    lines = block.split(b"\n")[:-1]  # not all the common case: try it again by small pieces
    for i in range(0, len(lines), _PIECE_LINES):
        piece = lines[i : i + _PIECE_LINES]
        segment = (
            _common(b"\n".join(piece) + b"\n", first + i) if len(lines) > _PIECE_LINES else None
        )
        if segment is not None:
            yield segment
        else:
            yield from _by_line(piece, first + i, path, src, extra)


def _common(block: bytes, first: int) -> Segment | None:
    """The segment of a block of lines that are all the common case, else None."""
    if block.translate(None, _COMMON_BYTES):  # some other byte: a NUL, non-ASCII text, ...
        return None
    ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)  # where each line ends
    n = ends.size
    # each line's fields then the mark: 7 items a line when, and only when, each has 6 fields
    fields = block.decode("ascii").replace("\n", f" {_EOL} ").split()
    if len(fields) != 7 * n or fields[6::7].count(_EOL) != n:
        return None
    qids, chunks, scores = fields[0::7], fields[2::7], fields[4::7]
    longest = max(int(ends[0]), int(np.diff(ends).max(initial=0)) - 1)  # a line's bytes (ASCII)
    if longest > MAX_ID_BYTES and max(map(len, qids + chunks)) > MAX_ID_BYTES:
        return None
    try:
        values = list(map(float, scores))
    except ValueError:
        return None
    # in printable ASCII, float() reads plain decimal numbers, and also inf, nan and 1_0: seen
    # in the scores' characters, which are looked at only where such a score can be
    if (b"_" in block or not math.isfinite(sum(values))) and "".join(scores).encode(
        "ascii"
    ).translate(None, _DECIMAL_BYTES):
        return None
    return qids, chunks, values, range(first, first + n)


def _by_line(
    raw: list[bytes], first: int, path: Path, src: Source, extra: list[int] | None
) -> Iterator[Any]:
    """Segment of a few lines (bytes without their ``\\n``) read one by one, with every check.
    On an error, the rows of the lines before it are handed out first."""
    qids: list[str] = []
    chunks: list[str] = []
    scores: list[float] = []
    lines: list[int] = []
    try:
        for lineno, data in enumerate(raw, first):
            row = _line_row(src.text(data + b"\n", lineno), lineno, path, extra)
            if row is not None:
                qids.append(row[0])
                chunks.append(row[1])
                scores.append(row[2])
                lines.append(lineno)
    except InputError:
        if qids:
            yield qids, chunks, scores, lines
        raise
    if qids:
        yield qids, chunks, scores, lines


def _line_row(line: str, lineno: int, path: Path, extra: list[int] | None) -> Any:
    """(qid, chunk, score) of one line, None for a blank line; InputError naming the field."""
    parts = line.split(maxsplit=6)
    if len(parts) < 6:
        if not parts:
            return None
        raise InputError(
            f"expected 6 fields 'qid Q0 chunk rank score tag', found {len(parts)}",
            file=str(path),
            line=lineno,
        )
    if len(parts) > 6:
        if extra is not None:
            extra[0] += 1
        line = " ".join(parts[:6])  # the ignored text is never stored nor checked
    qid, _, chunk, _, score, _ = parts[:6]
    if "\x00" in line:
        raise InputError(
            "the line contains a NUL character, which PostgreSQL cannot store",
            file=str(path),
            line=lineno,
        )
    qid = line_id(qid, "query id", path, lineno)
    chunk = line_id(chunk, "chunk id", path, lineno)
    if not _SCORE.fullmatch(score):
        raise InputError(_score_error(score), file=str(path), line=lineno, field="score")
    value = float(score)
    if value != value:
        raise InputError("score is NaN", file=str(path), line=lineno, field="score")
    return qid, chunk, value


def _score_error(score: str) -> str:
    """Why a TREC score is refused; for a score Python alone reads as a number (``1_0``,
    ``\u0661``, full-width digits), what trec_eval (C's atof) would read instead."""
    try:
        ours = float(score)
    except ValueError:
        return f"score '{score}' is not a number"
    prefix = _ATOF_PREFIX.match(score)
    atof = float(prefix.group()) if prefix else 0.0
    return (
        f"score '{score}' is not a plain decimal number (trec_eval reads it as {atof:g}, "
        f"not {ours:g}): write it as 0.25, -3 or 1e-5"
    )
