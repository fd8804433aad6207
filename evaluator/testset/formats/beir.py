"""BEIR folders: ``queries.jsonl`` (``{"_id": ..., "text": ...}``) and ``qrels/test.tsv``
(tab separated with the header ``query-id corpus-id score``).

``queries.jsonl`` usually holds the queries of every split: those no test judgement names are
skipped and counted. A judgement for a query id that ``queries.jsonl`` lacks is an error. A query
whose judgements are all grade 0 loads and is counted as having no relevant chunk.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..records import Row
from .jsonl import parse_line
from .trec import qrels, query_row

if TYPE_CHECKING:
    from ..grademap import GradeMap
    from ..plan import Plan
    from ..source import Source

COLUMNS = ("query-id", "corpus-id", "score")


def _is_header(parts: list[str]) -> bool:
    return [p.strip().lower() for p in parts] == list(COLUMNS) or not parts[-1].strip().lstrip(
        "-"
    ).isdigit()


def queries_jsonl(src: Source, file_idx: int) -> Iterator[Row]:
    for n, text in src.nonblank("the file is empty (no queries)"):
        obj = parse_line(src, n, text)
        yield query_row(src, file_idx, n, obj.get("_id"), obj.get("text"), "_id")


def parse(plan: Plan, grade_map: GradeMap) -> Iterator[Row]:
    yield from queries_jsonl(plan.sources[1], 1)
    yield from qrels(plan.sources[0], 0, grade_map, COLUMNS, skip_header=_is_header)
