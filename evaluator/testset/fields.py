"""Field checks shared by every format: ids, text, type tags, expected facts, embeddings.

Each check returns the normalised value or raises :class:`ValueError` with the reason; the format
parsers turn that into an :class:`~evaluator.core.errors.InputError` naming file, line and field.
"""

from __future__ import annotations

import json
import math

from ..core.ids import MAX_ID_BYTES, ident  # noqa: F401  (the one rule for ids, see evaluator.core.ids)
from ..core.text import CONTROL, clean_str, kind_of, show  # noqa: F401  (re-exported)
from ..core.vector_literal import vector_literal

MAX_DIM = 16000  # pgvector's limit for the vector type


def query_text(value: object, required: bool = True) -> str | None:
    if value is None:
        if required:
            raise ValueError("query text is missing")
        return None
    if not isinstance(value, str):
        raise ValueError(f"query text must be a string, found {kind_of(value)}")
    text = value.strip()
    if not text:
        if required:
            raise ValueError("query text is empty")
        return None
    return clean_str(text, "query text")


def string_list(value: object, what: str) -> list[str]:
    """A list of non-empty strings (a single string is a list of one); None is the empty list."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list of strings, found {kind_of(value)}")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError(f"{what} item {i + 1} must be a string, found {kind_of(item)}")
        item = item.strip()
        if not item:
            raise ValueError(f"{what} item {i + 1} is empty")
        out.append(clean_str(item, f"{what} item {i + 1}"))
    return out


def answerable(value: object) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        raise ValueError(f"answerable must be true or false, found {kind_of(value)}")
    return value


def embedding(value: object) -> tuple[str, int] | None:
    """A list of finite numbers -> (pgvector text '[1.0,2.5]', dimension); None stays None."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError(f"embedding must be a list of numbers, found {kind_of(value)}")
    if not value:
        raise ValueError("embedding is an empty list")
    if len(value) > MAX_DIM:
        raise ValueError(
            f"embedding has {len(value)} dimensions; pgvector stores at most {MAX_DIM}"
        )
    parts: list[float] = []
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ValueError(f"embedding item {i + 1} is not a number ({kind_of(x)})")
        try:
            f = float(x)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f) or abs(f) > 3.4e38:
            raise ValueError(f"embedding item {i + 1} is not a finite single-precision number")
        parts.append(f)
    return vector_literal(parts), len(value)


class Dimensions:
    """Every embedding of a test set has the dimension of the first one seen."""

    def __init__(self) -> None:
        self.dim: int | None = None
        self.where: str | None = None

    def check(self, dim: int, where: str) -> None:
        if self.dim is None:
            self.dim, self.where = dim, where
        elif dim != self.dim:
            raise ValueError(
                f"embedding has {dim} dimensions but the first one ({self.where}) has {self.dim}"
            )


def facts_json(value: object) -> str:
    return json.dumps(string_list(value, "expected_facts"), ensure_ascii=False)
