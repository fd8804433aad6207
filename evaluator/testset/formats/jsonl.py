"""JSONL: one query per line.

``{"id": "q1", "query": "退款多久到账", "relevant": {"c12": 3, "c40": 1}, "type": ["fuzzy"],
"answerable": true, "expected_facts": ["7 days"], "embedding": [0.1, ...]}``

``relevant`` is an object chunk id -> grade (mapped by ``--grade-map``) or a list of chunk ids
(grade 1 each). ``answerable`` defaults to true; ``type``, ``expected_facts``, ``embedding`` are
optional. Blank lines are skipped; other keys are ignored.
"""

from __future__ import annotations

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


def parse_line(src: Source, n: int, text: str) -> Any:
    try:
        obj = strict_json.loads(text)
    except strict_json.DuplicateKey as exc:
        raise src.error(str(exc), line=n, field=exc.field) from None
    except json.JSONDecodeError as exc:
        raise src.error(f"not valid JSON: {exc.msg} at column {exc.colno}", line=n) from None
    except (ValueError, RecursionError) as exc:
        raise src.error(
            f"not valid JSON: {str(exc)[:100] or 'nested too deeply'}", line=n
        ) from None
    if not isinstance(obj, dict):
        raise src.error(
            f'expected a JSON object {{"id": ..., "query": ...}}, found {fields.kind_of(obj)}',
            line=n,
        )
    return obj


def parse(plan: Plan, grade_map: GradeMap) -> Iterator[Row]:
    src = plan.sources[0]
    dims = fields.Dimensions()
    for n, text in src.nonblank("the file is empty (no queries)"):
        obj = parse_line(src, n, text)
        if "id" not in obj:
            raise src.error("the query id is missing", line=n, field="id")
        yield query_row(
            src,
            0,
            n,
            "id",
            qid=obj["id"],
            text=obj.get("query"),
            relevant=obj.get("relevant"),
            types=obj.get("type"),
            answerable=obj.get("answerable"),
            facts=obj.get("expected_facts"),
            embedding=obj.get("embedding"),
            grade_map=grade_map,
            dims=dims,
        )
