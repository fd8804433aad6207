"""The normalised record every format parser yields: one row of the staging table.

A row is either a query (``is_query`` true: text, tags, flags, and for JSONL/CSV the query's own
judgements in ``chunks``/``grades``) or judgements only (TREC/BEIR qrels: consecutive lines of
one query grouped, ``chunk_lines`` giving each chunk's line). The
store streams rows into a temporary table with COPY and hashes their normalised content (line
numbers and file names left out, so re-wrapping a file does not change its hash).
"""

from __future__ import annotations

from typing import NamedTuple


class Row(NamedTuple):
    file: int  # index into the load's list of source files
    line: int
    query_id: str
    is_query: bool
    query_text: str | None = None
    types: list | None = None
    answerable: bool | None = None  # None: the format has no flag (TREC, BEIR)
    facts: str | None = None  # JSON array text
    embedding: str | None = None  # pgvector text '[...]'
    chunks: list | None = None
    grades: list | None = None
    source_grades: list | None = None
    chunk_lines: list | None = None  # grouped qrels lines: the line of each chunk


COLUMNS = Row._fields
# PostgreSQL types of the staging table, in COLUMNS order (also the binary COPY types)
TYPES = (
    "int2",
    "int4",
    "text",
    "bool",
    "text",
    "text[]",
    "bool",
    "text",
    "text",
    "text[]",
    "int2[]",
    "text[]",
    "int4[]",
)


def judgements(
    file: int, line: int, query_id: str, chunks: list, grades: list, sources: list, lines: list
) -> Row:
    """Consecutive qrels lines of one query, grouped into one row (fewer, wider COPY rows)."""
    return Row(
        file, line, query_id, False, None, None, None, None, None, chunks, grades, sources, lines
    )


def canonical(row: Row) -> bytes:
    """The normalised content of a row for the content hash (no file index, no line number)."""
    return (repr(row[2:11]) + "\n").encode("utf-8", "surrogatepass")
