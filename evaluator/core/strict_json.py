"""JSON as pgeval reads users' files: a key that appears twice in one object is an error, never
"the last value wins" (``{"c1": 1, "c1": 3}`` would otherwise load as grade 3 without a word)."""

from __future__ import annotations

import json
from typing import Any


class DuplicateKey(ValueError):
    """``key`` appears twice in one object; ``field`` is the top-level key it sits under (the key
    itself for a duplicate at the top level)."""

    def __init__(self, field: str, key: str):
        self.field, self.key = field, key
        super().__init__(
            f"'{key}' appears twice in the same object (JSON would keep only the last value)"
        )


class _Dup(dict):
    duplicate: str


def loads(text: str) -> Any:
    """``json.loads`` that raises :class:`DuplicateKey` (a ValueError) on a repeated key."""
    found = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) == len(items):
            return obj
        seen = set()
        # seen.add(k) is None (falsy): the idiom records k and goes on
        dup = next(k for k, _ in items if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        found.append(dup)
        marked = _Dup(obj)
        marked.duplicate = dup
        return marked

    obj = json.loads(text, object_pairs_hook=pairs)
    if found:  # rare: find where, for the error message
        hit = _where(obj, None)
        assert hit is not None  # pairs() saw the duplicate: it is in obj
        raise DuplicateKey(*hit)
    return obj


def _where(value: object, field: str | None) -> tuple[str, str] | None:
    if isinstance(value, _Dup):
        return field or value.duplicate, value.duplicate
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for k, v in items:
        if isinstance(v, (dict, list)):
            hit = _where(
                v, field or (str(k) if isinstance(value, dict) else None)
            )  # JSON keys: str
            if hit:
                return hit
    return None
