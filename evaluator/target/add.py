"""Adding a target: build the spec (or a preset's), check it in the catalog, store it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.errors import InputError
from . import catalog
from . import targets as t


@dataclass
class AddedTarget:
    """A stored target, the vector indexes the knowledge base has for it, and the catalog's
    warnings."""

    target: t.Target
    indexes: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"target": self.target.name, "spec": self.target.spec(), "indexes": self.indexes,
                "warnings": self.warnings}


def make_target(name: str, *, table: str | None = None, schema: str | None = None,
                id_column: str | None = None, vector_column: str | None = None,
                text_column: str | None = None, distance: str | None = None,
                where: dict[str, str] | None = None, dimension: int | None = None,
                dimension_column: str | None = None, preset: str | None = None,
                knowledge_base_id: str | None = None) -> t.Target:
    """The target these options describe (not checked against the catalog yet)."""
    filters = dict(where or {})
    if preset is not None and preset != "weknora":
        raise InputError(f"unknown preset '{preset}' (known: weknora)", field="--preset")
    if preset == "weknora":
        if dimension is None:
            raise InputError("--preset weknora needs --dimension N (the embedding model's "
                             "dimension: the partial index WHERE dimension = N)", field="--dimension")
        tg = t.weknora(name, dimension, knowledge_base_id, schema=schema,
                       table=table or "embeddings")
        tg.filters.update(filters)
        if text_column:
            tg.text_column = text_column
        if distance:
            tg.distance = distance
        return tg
    missing = [o for o, v in (("--table", table), ("--id-column", id_column),
                              ("--vector-column", vector_column)) if not v]
    if missing:
        raise InputError(f"{', '.join(missing)} required (or use --preset)", field=missing[0])
    if knowledge_base_id is not None:
        raise InputError("--knowledge-base-id goes with --preset weknora; use --where "
                         "COLUMN=VALUE", field="--knowledge-base-id")
    return t.Target(name=name, schema=schema, table=table, id_column=id_column,
                    vector_column=vector_column, text_column=text_column,
                    distance=distance or "cosine", dimension=dimension,
                    dimension_column=dimension_column, filters=filters)


def add_target(database, name: str, *, replace: bool = False, **options) -> AddedTarget:
    """Check the target ``options`` describe (see :func:`make_target`) in the knowledge base's
    catalog (read only), then store it under ``name``."""
    tg = make_target(name, **options)
    with database.connect(results=False, autocommit=True, read_only=True) as kb:
        warnings = catalog.validate(kb, tg)
        indexes = catalog.vector_indexes(kb, tg)
    with database.connect() as conn:
        t.save(conn, tg, replace=replace)
    return AddedTarget(tg, indexes, warnings)
