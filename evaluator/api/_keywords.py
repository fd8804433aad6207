"""Helpers of the API's methods: cut-off lists, the query-vector source of the keywords."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.errors import InputError, param

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from ..testset.query_source import QuerySource

C = TypeVar("C", bound="DataclassInstance")


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


def config_of(cls: type[C], keywords: Mapping[str, Any], **own: Any) -> C:
    """The configuration ``cls`` (the option groups' dataclass a method builds) of the method's
    ``keywords`` (its ``locals()`` on entry) named as its fields, as given, and of ``own``: the
    fields the method turns from its keywords (the query source, lists, a renamed keyword)."""
    names = {f.name for f in fields(cls)} - own.keys()
    return cls(**{name: keywords[name] for name in names if name in keywords}, **own)


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
