"""CSV with a header row and the JSONL fields as columns: ``id``, ``query`` (required),
``relevant``, ``type``, ``answerable``, ``expected_facts``, ``embedding`` (optional; other columns
are ignored). Comma separated, RFC 4180 quoting (a cell may span lines inside quotes).

List and object cells take either form:

- JSON: ``{"c12": 3, "c40": 1}``, ``["c12", "c40"]``, ``["fuzzy", "multi_answer"]``, ``[0.1, 0.2]``
- compact, ``;`` separated: ``c12:3;c40:1`` (chunk:grade, split at the last ``:``), ``c12;c40``
  (grade 1 each), ``fuzzy;multi_answer``, ``0.1;0.2``. Chunk ids holding ``;`` need the JSON form.

``answerable``: true/false, yes/no, 1/0, or empty (true).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...core import strict_json
from .. import fields
from ..records import Row
from ..validate import query_row

if TYPE_CHECKING:
    from ..grademap import GradeMap
    from ..plan import Plan
    from ..source import Source

COLUMNS = ("id", "query", "relevant", "type", "answerable", "expected_facts", "embedding")
REQUIRED = ("id", "query")
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}

csv.field_size_limit(max(csv.field_size_limit(), 1 << 27))  # long embedding cells


def _lines(src: Source, where: list[int]) -> Iterator[str]:
    for n, text in src:
        where[0] = n
        yield text + "\n"


def _json_cell(src: Source, n: int, field: str, cell: str) -> Any:
    try:
        return strict_json.loads(cell)
    except strict_json.DuplicateKey as exc:
        raise src.error(str(exc), line=n, field=field) from None
    except (ValueError, RecursionError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "cannot be read"
        raise src.error(
            f"cell starts with '{cell[0]}' but is not valid JSON: {msg}", line=n, field=field
        ) from None


def _items(cell: str) -> list[str]:
    return [item.strip() for item in cell.split(";") if item.strip()]


def _relevant(src: Source, n: int, cell: str) -> Any:
    cell = cell.strip()
    if not cell:
        return None
    if cell[0] in "{[":
        return _json_cell(src, n, "relevant", cell)
    items = _items(cell)
    graded = [":" in item for item in items]
    if not any(graded):
        return items
    if not all(graded):
        raise src.error(
            "write every item as chunk:grade, or none of them (grade 1 each)",
            line=n,
            field="relevant",
        )
    out = {}
    for item in items:
        chunk, _, grade = item.rpartition(":")
        chunk = chunk.strip()
        if chunk in out:
            raise src.error(
                f"chunk '{fields.show(chunk)}' is judged twice", line=n, field="relevant"
            )
        out[chunk] = grade.strip()
    return out


def _list(src: Source, n: int, field: str, cell: str) -> Any:
    cell = cell.strip()
    if not cell:
        return None
    return _json_cell(src, n, field, cell) if cell[0] == "[" else _items(cell)


def _embedding(src: Source, n: int, cell: str) -> Any:
    cell = cell.strip()
    if not cell:
        return None
    if cell[0] == "[":
        return _json_cell(src, n, "embedding", cell)
    out = []
    for item in cell.replace(";", " ").split():
        try:
            out.append(float(item))
        except ValueError:
            raise src.error(
                f"'{fields.show(item, 40)}' is not a number", line=n, field="embedding"
            ) from None
    return out


def _answerable(src: Source, n: int, cell: str) -> bool | None:
    value = cell.strip().lower()
    if not value:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise src.error(f"'{fields.show(cell, 40)}' is not true/false", line=n, field="answerable")


def records(
    src: Source, columns: tuple[str, ...], required: tuple[str, ...], empty: str
) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, {column: cell})`` for each row of a CSV file with a header (``columns`` read,
        others ignored; blank rows skipped; the line is where the row starts). InputError naming the
        line and field: a ``required`` column missing, a column twice, a row of another width; ``empty``
    the message when the file has no header."""
    where = [0]
    reader = csv.reader(_lines(src, where), strict=True)
    header, end = None, 0
    while True:
        start = end + 1
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            raise src.error(f"not valid CSV: {exc}", line=where[0]) from None
        end = where[0]
        if cells is None:
            break
        if not any(c.strip() for c in cells):
            continue
        if header is None:
            header = [c.strip().lower() for c in cells]
            for name in required:
                if name not in header:
                    raise src.error(
                        f"the header has no '{name}' column (columns: {', '.join(columns)})",
                        line=start,
                        field=name,
                    )
            dup = next((h for h in header if h and header.count(h) > 1), None)
            if dup:
                raise src.error(
                    f"column '{fields.show(dup)}' appears twice in the header",
                    line=start,
                    field=fields.show(dup),
                )
            index = {name: header.index(name) for name in columns if name in header}
            continue
        if len(cells) != len(header):
            raise src.error(
                f"expected {len(header)} columns as in the header, found {len(cells)}", line=start
            )
        yield start, {name: cells[i] for name, i in index.items()}
    if header is None:
        raise src.error(empty)


def parse(plan: Plan, grade_map: GradeMap) -> Iterator[Row]:
    src = plan.sources[0]
    dims = fields.Dimensions()
    count = 0
    for start, cell in records(src, COLUMNS, REQUIRED, "the file is empty (no header, no queries)"):
        count += 1
        yield query_row(
            src,
            0,
            start,
            "id",
            qid=cell["id"],
            text=cell["query"],
            relevant=_relevant(src, start, cell.get("relevant", "")),
            types=_list(src, start, "type", cell.get("type", "")),
            answerable=_answerable(src, start, cell.get("answerable", "")),
            facts=_list(src, start, "expected_facts", cell.get("expected_facts", "")),
            embedding=_embedding(src, start, cell.get("embedding", "")),
            grade_map=grade_map,
            dims=dims,
        )
    if count == 0:
        raise src.error("the file has a header but no queries")
