"""Adding a target: build the spec (or a preset's), check it in the catalog, store it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, param
from . import catalog
from . import statement as stmt
from . import targets as t

if TYPE_CHECKING:
    from ..core.db import Database


@dataclass
class AddedTarget:
    """A stored target, the vector indexes the knowledge base has for it, and the catalog's
    warnings."""

    target: t.Target
    indexes: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "target": self.target.name,
            "spec": self.target.spec(),
            "indexes": self.indexes,
            "warnings": self.warnings,
        }


def parse_filter_options(
    filters: dict,
    null_true: tuple[str, ...],
    min_similarity: float | None,
    max_distance: float | None,
) -> tuple[list[str], dict | None]:
    """(null_true columns, threshold) checked against the --where filters."""
    cols: list[str] = []
    for col in null_true:
        if col not in filters:
            raise InputError(
                f"column '{col}' has no {param('where')} filter (give {param('where')} {col}=VALUE: "
                "NULL then passes as well)",
                field=param("null_true"),
            )
        if col not in cols:
            cols.append(col)
    if min_similarity is not None and max_distance is not None:
        raise InputError(
            f"give {param('min_similarity')} or {param('max_distance')}, not both",
            field=param("max_distance"),
        )
    threshold = None
    for opt, key, value in (
        (param("min_similarity"), "similarity", min_similarity),
        (param("max_distance"), "distance", max_distance),
    ):
        if value is not None:
            if not math.isfinite(value):
                raise InputError(f"{opt} must be a finite number", field=opt)
            threshold = {key: float(value)}
    return cols, threshold


def make_target(name: str, *, group_by: str | None = None, **options: Any) -> t.Target:
    """The target these options describe (not checked against the catalog yet, see
    :func:`_described`); ``group_by``: the column the application scopes each search by
    (sweeps then measure each group)."""
    tg = _described(name, **options)
    tg.group_by = group_by
    return tg


def _described(
    name: str,
    *,
    table: str | None = None,
    schema: str | None = None,
    id_column: str | None = None,
    vector_column: str | None = None,
    text_column: str | None = None,
    distance: str | None = None,
    where: dict[str, str] | None = None,
    dimension: int | None = None,
    dimension_column: str | None = None,
    preset: str | None = None,
    knowledge_base_id: str | list[str] | None = None,
    knowledge_id: list[str] | None = None,
    tag_id: list[str] | None = None,
    null_true: list[str] | None = None,
    min_similarity: float | None = None,
    max_distance: float | None = None,
) -> t.Target:
    """The target these options describe, without its grouping."""
    filters: dict[str, str | list[str]] = dict(where or {})
    kb_ids = (
        [knowledge_base_id] if isinstance(knowledge_base_id, str) else list(knowledge_base_id or [])
    )
    if preset is not None and preset != "weknora":
        raise InputError(f"unknown preset '{preset}' (known: weknora)", field=param("preset"))
    if preset == "weknora":
        if dimension is None:
            raise InputError(
                f"{param('preset')} weknora needs {param('dimension')} N (the embedding model's "
                "dimension: the partial index WHERE dimension = N)",
                field=param("dimension"),
            )
        tg = t.weknora(
            name,
            dimension,
            kb_ids,
            schema=schema,
            table=table or "embeddings",
            knowledge_ids=list(knowledge_id or []),
            tag_ids=list(tag_id or []),
        )
        tg.filters.update(filters)
        cols, threshold = parse_filter_options(
            tg.filters, tuple(null_true or ()), min_similarity, max_distance
        )
        tg.null_true = list(dict.fromkeys(tg.null_true + cols))
        tg.threshold = threshold
        if text_column:
            tg.text_column = text_column
        if distance:
            tg.distance = distance
        tg.max_distance()  # a similarity threshold needs cosine or ip
        return tg
    missing = [
        o
        for o, v in (
            (param("table"), table),
            (param("id_column"), id_column),
            (param("vector_column"), vector_column),
        )
        if not v
    ]
    if missing:
        raise InputError(
            f"{', '.join(missing)} required (or use {param('preset')})", field=missing[0]
        )
    assert table and id_column and vector_column  # (missing is empty)
    for opt, given in (
        (param("knowledge_base_id"), kb_ids),
        (param("knowledge_id"), knowledge_id),
        (param("tag_id"), tag_id),
    ):
        if given:
            raise InputError(
                f"{opt} goes with {param('preset')} weknora; use {param('where')} COLUMN=VALUE",
                field=opt,
            )
    cols, threshold = parse_filter_options(
        filters, tuple(null_true or ()), min_similarity, max_distance
    )
    tg = t.Target(
        name=name,
        schema=schema,
        table=table,
        id_column=id_column,
        vector_column=vector_column,
        text_column=text_column,
        distance=distance or "cosine",
        dimension=dimension,
        dimension_column=dimension_column,
        filters=filters,
        null_true=cols,
        threshold=threshold,
    )
    tg.max_distance()  # a similarity threshold needs cosine or ip
    return tg


def with_statement(tg: t.Target, text: str, got: stmt.Read, options: dict) -> None:
    """``tg`` defined by the application's statement ``text`` (read as ``got``): checked against
    the other options, its distance the statement's operator's."""
    given = [
        param(o)
        for o in ("preset", "where", "null_true", "min_similarity", "max_distance")
        if options.get(o)
    ]
    if options.get("dimension_column"):
        given.append(param("dimension_column"))
    if given:
        raise InputError(
            f"{param('statement')} is the search itself: write what {given[0]} says in the "
            "statement (its WHERE), or drop the statement",
            field=given[0],
        )
    stmt.check_text(got, tg.group_by)
    tg.distance = stmt.distance_of(got.code, options.get("distance"))
    tg.statement, tg.statement_template = text.strip(), got.template


def statement_text(text: str | None, path: str | None) -> str | None:
    """The statement of ``statement`` or of the file ``statement_file`` (not both)."""
    if text is not None and path is not None:
        raise InputError(
            f"give {param('statement')} or {param('statement_file')}, not both",
            field=param("statement_file"),
        )
    if path is not None:
        return stmt.read_file(path)
    return text


def add_target(
    database: Database,
    name: str,
    *,
    replace: bool = False,
    statement: str | None = None,
    statement_file: str | None = None,
    **options: Any,
) -> AddedTarget:
    """Check the target ``options`` describe (see :func:`make_target`) in the knowledge base's
    catalog (read only), then store it under ``name``. ``statement`` (or the file
    ``statement_file``): the application's statement, which then defines the search
    (target/statement.py)."""
    text = statement_text(statement, statement_file)
    tg = make_target(name, **options)
    if text is not None:
        with database.connect() as conn:
            with_statement(tg, text, stmt.read(conn, text), options)
    with database.connect(results=False, autocommit=True, read_only=True) as kb:
        warnings = catalog.validate(kb, tg)
        if tg.statement is not None:
            stmt.check(kb, tg)
        indexes = catalog.vector_indexes(kb, tg)
    with database.connect() as conn:
        t.save(conn, tg, replace=replace)
    return AddedTarget(tg, indexes, warnings)
