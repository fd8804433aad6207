"""The JSON pgeval prints for scripts and writes in reports: indented, UTF-8 as it is, keys in
the order given; NaN and infinity as null (JSON has neither), dates and times in ISO 8601."""

from __future__ import annotations

import json
import math
from typing import Any


def json_value(value: Any) -> Any:
    """A value as JSON can hold it (NaN and infinity: null; a date: its ISO 8601 text)."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def to_json_line(row: dict) -> str:
    """One JSON Lines record (no indentation)."""
    return json.dumps(
        {k: json_value(v) for k, v in row.items()}, ensure_ascii=False, default=json_value
    )


def to_json(data: Any) -> str:
    return json.dumps(data, default=json_value, ensure_ascii=False, indent=2, sort_keys=False)
