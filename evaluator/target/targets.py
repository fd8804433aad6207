"""Targets: where the knowledge base lives — table, chunk-id column, vector column (``vector`` or
``halfvec``), distance, optional text column and fixed filters. Stored as ``pgeval.target.spec``
(jsonb) in the results database; validated against the knowledge base's catalog when added.

SQL is composed only from :class:`psycopg.sql.Identifier` (names) and bound parameters (filter
values, query vectors); the only other fragments are fixed operator/type keywords chosen from the
tables below and integers (dimensions) checked to be integers.

The ``weknora`` preset describes WeKnora's layout: table ``embeddings``, column ``embedding
halfvec`` holding vectors of several dimensions, one partial HNSW index per dimension
``USING hnsw ((embedding::halfvec(N)) halfvec_cosine_ops) WHERE (dimension = N)``, several rows
per ``chunk_id`` (collapsed to the best distance), filters ``is_enabled`` and
``knowledge_base_id``. Queries cast the column and the query vector to ``halfvec(N)`` and add
``dimension = N`` so that the partial index is usable.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from psycopg import sql

from ..core.errors import Conflict, NotFound

DISTANCES = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}
VECTOR_TYPES = ("vector", "halfvec")
ANN_METHODS = ("hnsw", "ivfflat", "diskann")


@dataclass
class Target:
    name: str
    table: str
    id_column: str
    vector_column: str
    schema: str | None = None
    text_column: str | None = None
    distance: str = "cosine"
    vector_type: str = "vector"          # vector | halfvec (the column's type)
    dimension: int | None = None         # the query dimension (column typmod or preset N)
    dimension_column: str | None = None  # WeKnora: rows of this dimension only, cast to type(N)
    filters: dict[str, str] = field(default_factory=dict)
    unique_id: bool = False              # id column is unique: no duplicate collapsing needed
    preset: str | None = None

    # ---- spec (jsonb) ----------------------------------------------------------------------
    def spec(self) -> dict:
        d = asdict(self)
        d.pop("name")
        return d

    @classmethod
    def from_spec(cls, name: str, spec: dict) -> "Target":
        known = {k: v for k, v in spec.items() if k in cls.__dataclass_fields__ and k != "name"}
        return cls(name=name, **known)

    # ---- SQL pieces ------------------------------------------------------------------------
    @property
    def operator(self) -> str:
        return DISTANCES[self.distance]

    @property
    def casts(self) -> bool:
        """The vector expression is ``column::type(N)`` (mixed-dimension column, WeKnora)."""
        return self.dimension_column is not None

    def table_sql(self) -> sql.Composable:
        return (sql.Identifier(self.schema, self.table) if self.schema
                else sql.Identifier(self.table))

    def qualified(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table

    def _typ(self) -> sql.Composable:
        # fixed keywords and a checked integer only
        assert self.vector_type in VECTOR_TYPES
        if self.dimension is None:
            return sql.SQL(self.vector_type)
        return sql.SQL("{}({})").format(sql.SQL(self.vector_type), sql.SQL(str(int(self.dimension))))

    def vector_expr(self, alias: str | None = None) -> sql.Composable:
        col = sql.Identifier(alias, self.vector_column) if alias else sql.Identifier(self.vector_column)
        if self.casts:
            return sql.SQL("({})::{}").format(col, self._typ())
        return col

    def query_expr(self, param: sql.Composable) -> sql.Composable:
        """The query vector (sent as ``vector``) cast to the column's type and dimension."""
        if self.vector_type == "vector" and not self.casts:
            return sql.SQL("{}::vector").format(param)
        return sql.SQL("{}::vector::{}").format(param, self._typ())

    def distance_expr(self, param: sql.Composable, alias: str | None = None,
                      cast: bool = True) -> sql.Composable:
        """``vector_expr <op> query``: the bare operator, usable by an index in ORDER BY.
        ``cast=False`` when ``param`` is already of the column's type (:meth:`query_expr`)."""
        return sql.SQL("{} {} {}").format(self.vector_expr(alias), sql.SQL(self.operator),
                                          self.query_expr(param) if cast else param)

    def where(self, alias: str | None = None) -> tuple[sql.Composable, list]:
        """``WHERE ...`` (dimension predicate, filters) with ``%s`` placeholders and the list of
        their values (filters are bound parameters, never interpolated)."""
        return self._where(alias, lambda name: sql.Placeholder(), list)

    def where_named(self, alias: str | None = None, ph=sql.Placeholder) -> tuple[sql.Composable, dict]:
        """Like :meth:`where` with named placeholders ``ph("f0")`` (default ``%(f0)s``) and a dict
        of values — for statements that also bind other named parameters."""
        return self._where(alias, ph, dict)

    def _where(self, alias, ph, container):
        def col(name):
            return sql.Identifier(alias, name) if alias else sql.Identifier(name)

        parts, params = [], {}
        if self.dimension_column:
            parts.append(sql.SQL("{} = {}").format(col(self.dimension_column),
                                                   sql.Literal(int(self.dimension))))
        for i, (name, value) in enumerate(self.filters.items()):
            parts.append(sql.SQL("{} = {}").format(col(name), ph(f"f{i}")))
            params[f"f{i}"] = value
        out = params if container is dict else list(params.values())
        if not parts:
            return sql.SQL(""), out
        return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(parts), out

    def filter_literals(self) -> dict:
        """Filters as recorded in the experiment configuration."""
        out = dict(self.filters)
        if self.dimension_column:
            out[self.dimension_column] = int(self.dimension)
        return out


# ---- presets -------------------------------------------------------------------------------
def weknora(name: str, dimension: int, knowledge_base_id: str | None, *, schema: str | None = None,
            table: str = "embeddings", enabled_only: bool = True) -> Target:
    filters = {}
    if enabled_only:
        filters["is_enabled"] = "true"
    if knowledge_base_id is not None:
        filters["knowledge_base_id"] = str(knowledge_base_id)
    return Target(name=name, schema=schema, table=table, id_column="chunk_id",
                  vector_column="embedding", text_column="content", distance="cosine",
                  vector_type="halfvec", dimension=int(dimension), dimension_column="dimension",
                  filters=filters, preset="weknora")


# ---- storage in pgeval.target --------------------------------------------------------------
def save(conn, target: Target, *, replace: bool = False) -> None:
    with conn.transaction():
        row = conn.execute("SELECT spec FROM pgeval.target WHERE name = %s",
                           (target.name,)).fetchone()
        if row is not None:
            if row[0] == target.spec():
                return
            if not replace:
                raise Conflict(f"a target named '{target.name}' exists with another definition "
                               "(use --replace)")
            conn.execute("UPDATE pgeval.target SET spec = %s, created_at = now() WHERE name = %s",
                         (json.dumps(target.spec()), target.name))
            return
        conn.execute("INSERT INTO pgeval.target (name, spec) VALUES (%s, %s)",
                     (target.name, json.dumps(target.spec())))


def load(conn, name: str) -> Target:
    row = conn.execute("SELECT spec FROM pgeval.target WHERE name = %s", (name,)).fetchone()
    if row is None:
        raise NotFound(f"no target named '{name}' (see `pgeval target list`)")
    return Target.from_spec(name, row[0])


def list_targets(conn) -> list[dict]:
    rows = conn.execute("SELECT name, spec, created_at FROM pgeval.target ORDER BY name").fetchall()
    return [{"target": n, "table": Target.from_spec(n, s).qualified(), "id_column": s["id_column"],
             "vector_column": s["vector_column"], "type": s.get("vector_type"),
             "dimension": s.get("dimension"), "distance": s.get("distance"),
             "text_column": s.get("text_column"), "filters": s.get("filters") or {},
             "preset": s.get("preset"), "created_at": c} for n, s, c in rows]


def remove(conn, name: str) -> None:
    if conn.execute("DELETE FROM pgeval.target WHERE name = %s", (name,)).rowcount == 0:
        raise NotFound(f"no target named '{name}'")


# the catalog checks (validate, vector_indexes, check_identifiers) are in target.catalog

__all__ = ["ANN_METHODS", "DISTANCES", "VECTOR_TYPES", "Target", "list_targets", "load", "remove",
           "save", "weknora"]
