"""TREC qrels: ``query-id iteration chunk-id grade``, whitespace separated, one judgement a line
(the iteration column is ignored). Optional ``--queries`` TSV: ``query-id<TAB>text``.

Without ``--queries`` the queries are the ids the qrels name, in order of first appearance, with
no text. With it, a qrels line whose query id is not in the TSV is an error (file and line
named); a TSV query that no qrels line judges is skipped and counted (as trec_eval ignores
topics without judgements). A query whose judgements are all grade 0 loads and is counted as
having no relevant chunk.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .. import fields
from ..records import Row, judgements

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..grademap import GradeMap
    from ..plan import Plan
    from ..source import Source

GROUP = 1000


def query_row(
    src: Source, file_idx: int, line: int, query_id: str, text: str | None, id_field: str
) -> Row:
    """A query of a queries-only file (this TSV, BEIR's queries.jsonl): id and text checked (an
    error names the file, the line and ``id_field`` or ``text``), no judgements of its own."""
    try:
        qid = fields.ident(query_id, "query id")
    except ValueError as exc:
        raise src.error(str(exc), line=line, field=id_field) from None
    try:
        body = fields.query_text(text)
    except ValueError as exc:
        raise src.error(f"query '{qid}': {exc}", line=line, field="text") from None
    return Row(file_idx, line, qid, True, body, [], None, "[]", None, [], [], [])


def queries_tsv(src: Source, file_idx: int) -> Iterator[Row]:
    for n, text in src.nonblank("the queries file is empty"):
        qid, tab, body = text.partition("\t")
        if not tab:
            raise src.error("expected query-id<TAB>text (no tab on this line)", line=n)
        yield query_row(src, file_idx, n, qid, body, "query-id")


def qrels(
    src: Source,
    file_idx: int,
    grade_map: GradeMap,
    columns: tuple[str, ...] = ("query-id", "iteration", "chunk-id", "grade"),
    skip_header: Callable[[list[str]], bool] | None = None,
) -> Iterator[Row]:
    """Shared by TREC (4 columns) and BEIR (3 columns, a header line). Consecutive lines of one
    query are grouped into one row (at most GROUP judgements)."""
    width = len(columns)
    qcol, ccol, gcol = 0, width - 2, width - 1
    raw_qid: str | None = None
    qid = ""  # set with the first line, before any judgement
    chunks: list[str] = []
    grades: list[int] = []
    sources: list[str] = []
    lines: list[int] = []
    count = 0
    for n, text in src:
        if not text.strip():
            continue
        parts = text.split("\t") if "\t" in text and width == 3 else text.split()
        if skip_header and count == 0 and n == 1 and skip_header(parts):
            continue
        if len(parts) != width:
            raise src.error(
                f"expected {width} columns ({' '.join(columns)}), found {len(parts)}", line=n
            )
        if parts[qcol] != raw_qid or len(chunks) >= GROUP:
            if chunks:
                yield judgements(file_idx, lines[0], qid, chunks, grades, sources, lines)
                chunks, grades, sources, lines = [], [], [], []
            raw_qid = parts[qcol]
            qid = _ident(src, n, raw_qid, "query id", columns[qcol])
        chunk = _ident(src, n, parts[ccol], "chunk id", columns[ccol])
        try:
            graded = grade_map.lookup(parts[gcol])
        except ValueError as exc:
            raise src.error(str(exc), line=n, field=columns[gcol]) from None
        chunks.append(chunk)
        grades.append(graded[0])
        sources.append(graded[1])
        lines.append(n)
        count += 1
    if chunks:
        yield judgements(file_idx, lines[0], qid, chunks, grades, sources, lines)
    if count == 0:
        raise src.error("the file is empty (no judgements)")


def _ident(src: Source, n: int, value: str, what: str, field: str) -> str:
    try:
        return fields.ident(value, what)
    except ValueError as exc:
        raise src.error(str(exc), line=n, field=field) from None


def parse(plan: Plan, grade_map: GradeMap) -> Iterator[Row]:
    if len(plan.sources) > 1:
        yield from queries_tsv(plan.sources[1], 1)
    yield from qrels(plan.sources[0], 0, grade_map)
