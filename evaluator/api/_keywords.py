"""Helpers of the API's methods: cut-off lists, the query-vector source of the keywords."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import InputError, param

if TYPE_CHECKING:
    from ..testset.query_source import QuerySource


def cut_offs(values: int | Iterable[int] | None, what: str) -> list[int] | None:
    """``5`` or ``[1, 5]`` -> ``[5]`` / ``[1, 5]``; None stays None."""
    if values is None:
        return None
    if isinstance(values, int):
        return [values]
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        raise InputError(f"'{values}' is not a list of cut-offs", field=param(what)) from None


def query_source(
    testset: str | None,
    sample_queries: int | None,
    seed: int | None,
    queries_sql: str | None,
    queries_file: str | Path | None,
    captured: str | None = None,
    window: str | None = None,
) -> QuerySource | None:
    """The query-vector source of the keywords (None: ``testset``); exactly one is given
    (``captured``: a set of `pgeval queries capture`, ``window`` its newest only)."""
    from ..testset.query_source import from_options

    return from_options(
        testset=testset,
        sample=sample_queries,
        seed=seed,
        queries_sql=queries_sql,
        queries_file=None if queries_file is None else str(queries_file),
        captured=captured,
        window=window,
    )
