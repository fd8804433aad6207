"""Targets: where the knowledge base lives — table, chunk-id column, vector column (``vector`` or
``halfvec``), distance, optional text column and fixed filters. Stored as ``pgeval.target.spec``
(jsonb) in the results database; validated against the knowledge base's catalog when added.

SQL is composed only from :class:`psycopg.sql.Identifier` (names) and bound parameters (filter
values, query vectors); the only other fragments are fixed operator/type keywords chosen from the
tables below and integers (dimensions) checked to be integers.

The ``weknora`` preset describes WeKnora's layout: table ``embeddings``, column ``embedding
halfvec`` holding vectors of several dimensions, one partial HNSW index per dimension
``USING hnsw ((embedding::halfvec(N)) halfvec_cosine_ops) WHERE (dimension = N)``, several rows
per ``chunk_id`` (collapsed to the best distance), filters ``is_enabled`` (NULL counts as
enabled) and ``knowledge_base_id`` (one or several), optionally ``knowledge_id`` and ``tag_id``,
a similarity threshold, and WeKnora's own ``hnsw.*`` settings as defaults. Vector queries cast
the column and the query vector to ``halfvec(N)`` and add ``dimension = N`` so that the partial
index is usable; the keyword path has no dimension predicate. See docs/weknora.md.

Filters: ``filters`` maps a column to one value (``col = v``) or a list (``col IN (v1, ...)``);
a column in ``null_true`` also passes NULL (``(col IS NULL OR col = v)``). ``threshold``
(``{"similarity": s}`` or ``{"distance": d}``) drops results past it in the vector stages, and
the stage counts them. ``settings`` are query settings the application applies (``--set``
overrides them).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..core.errors import Conflict, InputError, NotFound, param
from ..core.search_types import DISTANCES, SearchType, search_type
from ..kinds.registry import index_methods

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

VECTOR_TYPES = ("vector", "halfvec")
# the schemas of pgeval's scratch copies (table/copied_rows.py): a target over one is a helper of
# a sweep or an advise (``kb~sample1000``), not the user's
SCRATCH_PREFIX = "pgeval_scratch_"
ANN_METHODS = index_methods()  # the access methods of the ANN stage kinds (kinds.registry)


@dataclass
class Target:
    name: str
    table: str
    id_column: str
    vector_column: str
    schema: str | None = None
    text_column: str | None = None
    distance: str = "cosine"
    vector_type: str = "vector"  # vector | halfvec (the column's type)
    dimension: int | None = None  # the query dimension (column typmod or preset N)
    dimension_column: str | None = None  # WeKnora: rows of this dimension only, cast to type(N)
    # column -> value (``col = value``) or list of values (``col IN (v1, v2, ...)``)
    filters: dict[str, str | list[str]] = field(default_factory=dict)
    unique_id: bool = False  # id column is unique: no duplicate collapsing needed
    preset: str | None = None
    null_true: list[str] = field(default_factory=list)  # filter columns where NULL passes too
    # results past it are dropped (and counted): {"similarity": s} or {"distance": d}
    threshold: dict[str, float] | None = None
    # query settings the application applies (a preset's defaults; --set overrides them)
    settings: dict[str, str] = field(default_factory=dict)
    # the type a stage kind searches the column as, both sides cast to it (hnsw-halfvec:
    # ``(col)::halfvec(N) <=> $1::vector::halfvec(N)``, served by an index on that expression);
    # None: the column's own type. Set by the stage (kinds.registry Kind.cast_type), never stored.
    search_type: str | None = None
    # the column the application scopes each search by (a tenant: WeKnora's knowledge_base_id):
    # sweeps measure every group on its own (``--group-by``, tuning/sweep/groups.py)
    group_by: str | None = None
    # the group this target is scoped to (:meth:`scoped`: ``(column, value)``), never stored: a
    # scratch copy for a build (tuning/build_sweep.py) copies every group and searches this one
    scope: tuple[str, str] | None = None
    # the application's statement (``target add --statement``): $1 the query vector, $2 the
    # group's value (``group_by``); sweeps, watch and pipelines time it, its exact twin is the
    # ground truth (target/statement.py). ``statement_template``: pgeval.checked_statement's
    # format() template of it (parameters ``%N$s``, every ``%`` doubled), read when it was added
    statement: str | None = None
    statement_template: str | None = None
    # a captured shape's statement (captured/shapes.py): per query id, the values of $2, $3 ...
    # the application sent with it, bound per query; never stored
    bound: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    # filter columns holding pgvectorscale labels (``smallint[]``): ``col && ARRAY[v]::smallint[]``
    # (a scratch copy of the design diskann-labels, table/labels.py), never stored
    label_columns: list[str] = field(default_factory=list)

    # ---- spec (jsonb) ----------------------------------------------------------------------
    def spec(self) -> dict:
        d = asdict(self)
        d.pop("name")
        d.pop("scope")  # a search's, not the target's
        d.pop("bound")  # a captured shape's queries', not the target's
        for key, empty in (
            ("null_true", []),
            ("threshold", None),
            ("settings", {}),
            ("search_type", None),
            ("group_by", None),
            ("statement", None),
            ("statement_template", None),
            ("label_columns", []),
        ):
            if d[key] == empty:  # a target without them keeps the spec (and hash) it had
                d.pop(key)
        return d

    @classmethod
    def from_spec(cls, name: str, spec: dict) -> Target:
        known = {
            k: v
            for k, v in spec.items()
            if k in cls.__dataclass_fields__ and k not in ("name", "scope", "bound")
        }
        return cls(name=name, **known)

    def searched_as(self) -> dict:
        """What a search of this target reads, as a configuration fingerprint records it (the
        statement only when there is one: the hashes of targets without stay)."""
        out = {
            "table": self.qualified(),
            "id_column": self.id_column,
            "vector_column": self.vector_column,
            "text_column": self.text_column,
            "distance": self.distance,
            "vector_type": self.vector_type,
            "dimension_column": self.dimension_column,
        }
        if self.statement is not None:
            out["statement"] = self.statement
        return out

    # ---- SQL pieces ------------------------------------------------------------------------
    @property
    def operator(self) -> str:
        return self.searched.operator(self.distance)

    @property
    def casts(self) -> bool:
        """The vector expression is ``column::type(N)`` (mixed-dimension column, WeKnora)."""
        return self.dimension_column is not None

    def table_sql(self) -> sql.Composable:
        return (
            sql.Identifier(self.schema, self.table) if self.schema else sql.Identifier(self.table)
        )

    def qualified(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table

    def _typ(self, vector_type: str | None = None) -> sql.Composable:
        # fixed keywords and a checked integer only
        vector_type = vector_type or self.vector_type
        assert vector_type in VECTOR_TYPES
        if self.dimension is None:
            return sql.SQL(vector_type)
        return sql.SQL("{}({})").format(sql.SQL(vector_type), sql.SQL(str(int(self.dimension))))

    def scoped(self, column: str, value: str) -> Target:
        """This target searched as the application searches one group: ``column = value`` added
        to its filters (replacing a filter on that column), no grouping left."""
        return replace(
            self,
            filters={**self.filters, column: value},
            null_true=[c for c in self.null_true if c != column],
            group_by=None,
            scope=(column, value),
        )

    def native(self) -> Target:
        """This target searched as its column's own type (no stage kind's cast)."""
        return replace(self, search_type=None) if self.search_type else self

    @property
    def searched_type(self) -> str:
        """The type the column is searched as: its own, or the stage kind's cast type."""
        return self.search_type or self.vector_type

    @property
    def searched(self) -> SearchType:
        """The description of :attr:`searched_type` (core.search_types)."""
        return search_type(self.searched_type)

    def vector_expr(self, alias: str | None = None) -> sql.Composable:
        col = (
            sql.Identifier(alias, self.vector_column)
            if alias
            else sql.Identifier(self.vector_column)
        )
        if self.searched.quantizer is not None:  # binary_quantize(col)::bit(N)
            return self._quantized(col)
        if self.search_type and self.search_type != self.vector_type:
            return sql.SQL("({})::{}").format(col, self._typ(self.search_type))
        if self.casts:
            return sql.SQL("({})::{}").format(col, self._typ())
        return col

    def _quantized(self, value: sql.Composable) -> sql.Composable:
        """``quantizer(value)::type(N)``: the searched type's quantizer, its dimension checked
        to be an integer (a fixed keyword and a number only)."""
        return sql.SQL("{}({})::{}({})").format(
            sql.SQL(self.searched.quantizer or ""),
            value,
            sql.SQL(self.searched_type),
            sql.SQL(str(int(self.dimension or 0))),
        )

    def query_expr(self, param: sql.Composable) -> sql.Composable:
        """The query vector (sent as ``vector``) cast to the column's type and dimension."""
        if self.searched.quantizer is not None:  # binary_quantize($1::vector)::bit(N)
            return self._quantized(sql.SQL("{}::vector").format(param))
        if self.search_type and self.search_type != self.vector_type:
            return sql.SQL("{}::vector::{}").format(param, self._typ(self.search_type))
        if self.vector_type == "vector" and not self.casts:
            return sql.SQL("{}::vector").format(param)
        return sql.SQL("{}::vector::{}").format(param, self._typ())

    def distance_expr(
        self, param: sql.Composable, alias: str | None = None, cast: bool = True
    ) -> sql.Composable:
        """``vector_expr <op> query``: the bare operator, usable by an index in ORDER BY.
        ``cast=False`` when ``param`` is already of the column's type (:meth:`query_expr`)."""
        return sql.SQL("{} {} {}").format(
            self.vector_expr(alias),
            sql.SQL(self.operator),
            self.query_expr(param) if cast else param,
        )

    def where(
        self, alias: str | None = None, *, vector: bool = True
    ) -> tuple[sql.Composable, list]:
        """``WHERE ...`` (dimension predicate, filters) with ``%s`` placeholders and the list of
        their values (filters are bound parameters, never interpolated). ``vector=False``: the
        keyword path, which searches text and has no dimension predicate."""
        return self._where(alias, lambda name: sql.Placeholder(), list, vector)

    def where_named(
        self,
        alias: str | None = None,
        ph: Callable[[str], sql.Composable] = sql.Placeholder,
        *,
        vector: bool = True,
    ) -> tuple[sql.Composable, dict]:
        """Like :meth:`where` with named placeholders ``ph("f0")`` (default ``%(f0)s``) and a dict
        of values — for statements that also bind other named parameters."""
        return self._where(alias, ph, dict, vector)

    def _where(
        self,
        alias: str | None,
        ph: Callable[[str], sql.Composable],
        container: type,
        vector: bool = True,
    ) -> tuple[sql.Composable, Any]:
        def col(name: str) -> sql.Identifier:
            return sql.Identifier(alias, name) if alias else sql.Identifier(name)

        parts: list[sql.Composable] = []
        params: dict[str, object] = {}
        if self.dimension_column and vector:
            assert self.dimension is not None, "a dimension column comes with a dimension"
            parts.append(
                sql.SQL("{} = {}").format(
                    col(self.dimension_column), sql.Literal(int(self.dimension))
                )
            )
        for i, (name, value) in enumerate(self.filters.items()):
            if isinstance(value, list):  # several values: col IN ($1, $2, ...)
                names = [f"f{i}_{j}" for j in range(len(value))]
                cond = sql.SQL("{} IN ({})").format(col(name), sql.SQL(", ").join(map(ph, names)))
                params.update(zip(names, value))
            elif name in self.label_columns:  # pgvectorscale's label filter
                cond = sql.SQL("{} && ARRAY[{}]::smallint[]").format(col(name), ph(f"f{i}"))
                params[f"f{i}"] = value
            else:
                cond = sql.SQL("{} = {}").format(col(name), ph(f"f{i}"))
                params[f"f{i}"] = value
            if name in self.null_true:  # NULL counts as the value (a flag's default)
                cond = sql.SQL("({} IS NULL OR {})").format(col(name), cond)
            parts.append(cond)
        out = params if container is dict else list(params.values())
        if not parts:
            return sql.SQL(""), out
        return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(parts), out

    def filter_literals(self) -> dict:
        """Filters as recorded in the experiment configuration (a NULL-as-true column as
        ``{"value": v, "or_null": true}``)."""
        out: dict[str, object] = {
            k: (list(v) if isinstance(v, list) else v) for k, v in self.filters.items()
        }
        for name in self.null_true:
            if name in out:
                out[name] = {"value": out[name], "or_null": True}
        if self.dimension_column:
            assert self.dimension is not None, "a dimension column comes with a dimension"
            out[self.dimension_column] = int(self.dimension)
        return out

    def max_distance(self) -> float | None:
        """The threshold as a bound on the stored distance (None: no threshold). A similarity
        ``s`` is ``1 - distance`` for cosine (kept: distance <= 1 - s, as WeKnora applies it) and
        the inner product for ip (``<#>`` is its negative: kept: distance <= -s)."""
        if not self.threshold:
            return None
        if "distance" in self.threshold:
            return float(self.threshold["distance"])
        s = float(self.threshold["similarity"])
        if self.distance == "cosine":
            return 1.0 - s
        if self.distance == "ip":
            return -s
        raise InputError(
            f"target '{self.name}': a similarity threshold needs distance cosine or "
            "ip (use a distance threshold for l2)",
            field=param("min_similarity"),
        )


# ---- presets -------------------------------------------------------------------------------
# WeKnora's vector retriever (internal/application/repository/retriever/postgres/repository.go)
# runs SET LOCAL hnsw.ef_search = its candidate budget (100 for a top-k up to 50) and
# hnsw.iterative_scan = strict_order; docs/weknora.md lists the source of every rule.
WEKNORA_SETTINGS = {"hnsw.ef_search": "100", "hnsw.iterative_scan": "strict_order"}


def _one_or_many(values: str | Iterable[object] | None) -> str | list[str] | None:
    if values is None or isinstance(values, str):
        return values
    texts = [str(v) for v in values]
    if not texts:
        return None
    return texts[0] if len(texts) == 1 else texts


def weknora(
    name: str,
    dimension: int,
    knowledge_base_id: str | Iterable[object] | None = None,
    *,
    schema: str | None = None,
    table: str = "embeddings",
    enabled_only: bool = True,
    knowledge_ids: str | Iterable[object] | None = None,
    tag_ids: str | Iterable[object] | None = None,
    min_similarity: float | None = None,
) -> Target:
    """WeKnora's ``embeddings`` table searched as WeKnora searches it: ``dimension = N`` (vector
    path only), ``knowledge_base_id IN (...)``, ``knowledge_id IN (...)``, ``tag_id IN (...)``,
    ``(is_enabled IS NULL OR is_enabled = true)``, results under ``min_similarity`` (``1 -
    cosine distance``) dropped, ef_search 100 and strict-order iterative scans; rows collapsed
    to chunks by best score. ``knowledge_base_id``, ``knowledge_ids``, ``tag_ids``: one value or
    several."""
    filters: dict = {}
    null_true: list[str] = []
    if enabled_only:
        filters["is_enabled"] = "true"
        null_true.append("is_enabled")
    for column, values in (
        ("knowledge_base_id", knowledge_base_id),
        ("knowledge_id", knowledge_ids),
        ("tag_id", tag_ids),
    ):
        value = _one_or_many(values)
        if value is not None:
            filters[column] = value
    return Target(
        name=name,
        schema=schema,
        table=table,
        id_column="chunk_id",
        vector_column="embedding",
        text_column="content",
        distance="cosine",
        vector_type="halfvec",
        dimension=int(dimension),
        dimension_column="dimension",
        filters=filters,
        preset="weknora",
        null_true=null_true,
        threshold=None if min_similarity is None else {"similarity": float(min_similarity)},
        settings=dict(WEKNORA_SETTINGS),
    )


# ---- storage in pgeval.target --------------------------------------------------------------
def save(conn: Any, target: Target, *, replace: bool = False) -> None:
    with conn.transaction():
        row = conn.execute(
            "SELECT spec FROM pgeval.target WHERE name = %s", (target.name,)
        ).fetchone()
        if row is not None:
            if row[0] == target.spec():
                return
            if not replace:
                raise Conflict(
                    f"a target named '{target.name}' exists with another definition (use {param('replace', True)})"
                )
            conn.execute(
                "UPDATE pgeval.target SET spec = %s, created_at = now() WHERE name = %s",
                (json.dumps(target.spec()), target.name),
            )
            return
        conn.execute(
            "INSERT INTO pgeval.target (name, spec) VALUES (%s, %s)",
            (target.name, json.dumps(target.spec())),
        )


def load(conn: Any, name: str) -> Target:
    row = conn.execute("SELECT spec FROM pgeval.target WHERE name = %s", (name,)).fetchone()
    if row is None:
        raise NotFound(f"no target named '{name}' (see `pgeval target list`)")
    return Target.from_spec(name, row[0])


def list_targets(conn: Any) -> list[dict]:
    """The user's targets: not the helpers over pgeval's scratch copies."""
    rows = conn.execute(
        "SELECT name, spec, created_at FROM pgeval.target "
        "WHERE coalesce(spec ->> 'schema', '') NOT LIKE %s ORDER BY name",
        (SCRATCH_PREFIX.replace("_", r"\_") + "%",),
    ).fetchall()
    return [
        {
            "target": n,
            "table": Target.from_spec(n, s).qualified(),
            "id_column": s["id_column"],
            "vector_column": s["vector_column"],
            "type": s.get("vector_type"),
            "dimension": s.get("dimension"),
            "distance": s.get("distance"),
            "text_column": s.get("text_column"),
            "filters": s.get("filters") or {},
            "preset": s.get("preset"),
            "group_by": s.get("group_by"),
            "statement": s.get("statement"),
            "created_at": c,
        }
        for n, s, c in rows
    ]


def remove(conn: Any, name: str) -> None:
    if conn.execute("DELETE FROM pgeval.target WHERE name = %s", (name,)).rowcount == 0:
        raise NotFound(f"no target named '{name}'")


def remove_helpers(conn: Any, schema: str) -> None:
    """Remove the helper targets over scratch schema ``schema`` (dropped with it)."""
    assert schema.startswith(SCRATCH_PREFIX), schema
    conn.execute("DELETE FROM pgeval.target WHERE spec ->> 'schema' = %s", (schema,))


# the catalog checks (validate, vector_indexes, check_identifiers) are in target.catalog

__all__ = [
    "ANN_METHODS",
    "DISTANCES",
    "VECTOR_TYPES",
    "WEKNORA_SETTINGS",
    "Target",
    "list_targets",
    "remove_helpers",
    "load",
    "remove",
    "save",
    "weknora",
]
