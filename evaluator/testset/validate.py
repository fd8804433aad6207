"""Validation rules.

Record rules (JSONL, CSV: a line carries a whole query) run while streaming, in :func:`query_row`.
Set rules that span lines run in SQL over the staging table after streaming
(:func:`check_staged`): duplicate query ids, judgements for a query the queries file lacks,
duplicate judgements. Every failure names the file, the line(s) and the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.errors import InputError
from . import fields
from .grademap import GradeMap
from .records import Row

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .source import Source


def query_row(
    src: Source,
    file_idx: int,
    line: int,
    id_field: str,
    *,
    qid: object,
    text: object,
    relevant: object,
    types: object,
    answerable: object,
    facts: object,
    embedding: object,
    grade_map: GradeMap,
    dims: fields.Dimensions,
) -> Row:
    """Check one JSONL/CSV query and build its row. ``relevant`` is a dict chunk -> source grade,
    a list of chunk ids (grade 1 each, not mapped), or None."""

    def fail(message: str, field: str) -> InputError:
        return InputError(message, file=src.label, line=line, field=field)

    try:
        qid = fields.ident(qid, "query id")
    except ValueError as exc:
        raise fail(str(exc), id_field) from None
    field = "query"
    try:
        text = fields.query_text(text)
        field = "type"
        types = fields.string_list(types, "type")
        field = "answerable"
        answerable = fields.answerable(answerable)
        field = "expected_facts"
        facts = fields.facts_json(facts)
        field = "embedding"
        emb = fields.embedding(embedding)
        if emb is not None:
            dims.check(emb[1], f"{src.label}:{line}")
    except ValueError as exc:
        raise fail(str(exc), field) from None
    chunks, grades, sources = _judgements(relevant, grade_map, fail)
    if answerable and not any(grades):
        why = (
            "has no relevant chunk"
            if relevant is None or not chunks
            else "judges every chunk grade 0"
        )
        raise fail(
            f"query '{qid}' is answerable but {why}: give at least one chunk of grade "
            '1-3, or mark it "answerable": false',
            "relevant",
        )
    if not answerable:
        for chunk, grade in zip(chunks, grades):
            if grade > 0:
                raise fail(
                    f"query '{qid}' is marked unanswerable but chunk '{chunk}' has grade "
                    f"{grade}: an unanswerable query has no relevant chunk",
                    "relevant",
                )
    return Row(
        file_idx,
        line,
        qid,
        True,
        text,
        types,
        answerable,
        facts,
        None if emb is None else emb[0],
        chunks,
        grades,
        sources,
    )


def _judgements(
    relevant: object, grade_map: GradeMap, fail: Callable[[str, str], InputError]
) -> tuple[list[str], list[int], list[str | None]]:
    chunks: list[str] = []
    grades: list[int] = []
    sources: list[str | None] = []
    if relevant is None:
        return chunks, grades, sources
    if isinstance(relevant, dict):
        lookup = grade_map.lookup
        for chunk, value in relevant.items():
            try:
                chunk = fields.ident(chunk, "chunk id")
                grade, source = lookup(value)
            except ValueError as exc:
                raise fail(f"chunk '{fields.show(chunk)}': {exc}", "relevant") from None
            chunks.append(chunk)
            grades.append(grade)
            sources.append(source)
        if len(set(chunks)) != len(chunks):  # keys that differ only by surrounding blanks
            raise fail(f"chunk '{_first_duplicate(chunks)}' is judged twice", "relevant")
        return chunks, grades, sources
    if isinstance(relevant, list):
        for i, chunk in enumerate(relevant):
            try:
                chunk = fields.ident(chunk, f"item {i + 1}")
            except ValueError as exc:
                raise fail(str(exc), "relevant") from None
            chunks.append(chunk)
        if len(set(chunks)) != len(chunks):
            raise fail(f"chunk '{_first_duplicate(chunks)}' is listed twice", "relevant")
        return chunks, [1] * len(chunks), [None] * len(chunks)
    raise fail(
        "must be an object {chunk id: grade} or a list of chunk ids, found "
        f"{fields.kind_of(relevant)}",
        "relevant",
    )


def _first_duplicate(items: list[str]) -> str | None:
    seen = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def _lines(files: list[str], refs: Iterable[tuple[int, int]]) -> str:
    return " and ".join(f"{files[f]}:{line}" for f, line in refs)


def check_staged(cur: Any, files: list[str], labels: dict[str, str]) -> None:
    """Set rules over the staging table ``pg_temp.pgeval_stage``. ``labels`` names the fields of
    this format: 'query' (query id field of query rows), 'qrel' (query id field of judgement
    rows), 'chunk' (chunk id field of judgement rows)."""
    row = cur.execute("""
        SELECT query_id, array_agg(file ORDER BY file, line), array_agg(line ORDER BY file, line)
          FROM pg_temp.pgeval_stage WHERE is_query
         GROUP BY query_id HAVING count(*) > 1
         ORDER BY min(file * 2147483647::bigint + line) LIMIT 1""").fetchone()
    if row:
        qid, f, ln = row
        raise _twice(f"duplicate query id '{qid}'", files, f, ln, labels["query"])
    if labels.get("known_queries"):
        row = cur.execute("""
            SELECT j.query_id, j.file, j.line FROM pg_temp.pgeval_stage j
             WHERE NOT j.is_query AND NOT EXISTS (
                   SELECT 1 FROM pg_temp.pgeval_stage q WHERE q.is_query AND q.query_id = j.query_id)
             ORDER BY j.line LIMIT 1""").fetchone()
        if row:
            raise InputError(
                f"query id '{row[0]}' is not in the queries file {labels['known_queries']}",
                file=files[row[1]],
                line=row[2],
                field=labels["qrel"],
            )


def duplicate_judgement(cur: Any, files: list[str], field: str) -> InputError | None:
    """Called when inserting the judgements hit the primary key: find the two lines."""
    row = cur.execute("""
        SELECT query_id, chunk, array_agg(file ORDER BY file, line), array_agg(line ORDER BY file, line)
          FROM (SELECT s.query_id, u.chunk, s.file, coalesce(u.line, s.line) AS line
                  FROM pg_temp.pgeval_stage s, unnest(s.chunks, s.chunk_lines) AS u(chunk, line)) j
         GROUP BY query_id, chunk HAVING count(*) > 1
         ORDER BY min(line) LIMIT 1""").fetchone()
    if row is None:
        return None
    qid, chunk, f, ln = row
    return _twice(f"query '{qid}' judges chunk '{chunk}' twice", files, f, ln, field)


def _twice(what: str, files: list[str], f: list[int], ln: list[int], field: str) -> InputError:
    """The error at the second of the lines ``ln`` (of files ``f``) that say the same thing."""
    return InputError(f"{what} (also on line {ln[0]})", file=files[f[1]], line=ln[1], field=field)
