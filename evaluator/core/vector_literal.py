"""The one text form of a vector for pgvector (``'[0.1,-2.5,3.0]'``): every float written with
``repr``, which round-trips a float32 or float64 exactly, so the server reads back the same
numbers the client holds (``vector``, ``halfvec`` and ``float8[]`` all parse it)."""

from __future__ import annotations

from collections.abc import Iterable


def vector_literal(values: Iterable[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in values) + "]"
