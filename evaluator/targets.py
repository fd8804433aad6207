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

from .errors import Conflict, InputError, NotFound

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


# ---- catalog validation --------------------------------------------------------------------
def _relation(kb, schema: str | None, table: str) -> int:
    name = sql.Identifier(schema, table) if schema else sql.Identifier(table)
    oid = kb.execute("SELECT to_regclass(%s)::oid", (name.as_string(kb),)).fetchone()[0]
    if oid is None:
        raise InputError(f"table '{schema + '.' if schema else ''}{table}' does not exist in the "
                         "knowledge base (or is not on the search_path; give --schema)",
                         field="--table")
    kind = kb.execute("SELECT relkind FROM pg_class WHERE oid = %s", (oid,)).fetchone()[0]
    if kind not in ("r", "p", "v", "m", "f"):
        raise InputError(f"'{table}' is not a table or view", field="--table")
    return oid


def _columns(kb, oid: int) -> dict[str, tuple[str, str, int]]:
    """name -> (type name, formatted type, typmod)"""
    rows = kb.execute(
        "SELECT a.attname, t.typname, format_type(a.atttypid, a.atttypmod), a.atttypmod "
        "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped", (oid,)).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _unique(kb, oid: int, column: str) -> bool:
    row = kb.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = i.indkey[0] WHERE i.indrelid = %s AND i.indisunique AND i.indnkeyatts = 1 "
        "AND i.indpred IS NULL AND i.indexprs IS NULL AND a.attname = %s)", (oid, column)).fetchone()
    return bool(row[0])


NAMEDATALEN = 63   # PostgreSQL silently cuts longer identifiers: another object could answer


def check_identifiers(target: Target) -> None:
    """Names are quoted (psycopg.sql.Identifier) wherever they are used; here they are only
    refused when PostgreSQL would not take them as given: empty, or longer than 63 bytes."""
    if not target.name or not target.name.strip():
        raise InputError("the target name must not be empty", field="NAME")
    for opt, ident in (("--schema", target.schema), ("--table", target.table),
                       ("--id-column", target.id_column), ("--vector-column", target.vector_column),
                       ("--text-column", target.text_column),
                       ("--dimension-column", target.dimension_column),
                       *(("--where", c) for c in target.filters)):
        if ident is None:
            continue
        if ident == "" or "\x00" in ident:
            raise InputError(f"'{ident}' is not a usable name", field=opt)
        if len(ident.encode("utf-8")) > NAMEDATALEN:
            raise InputError(f"'{ident}' is longer than {NAMEDATALEN} bytes: PostgreSQL would cut "
                             "it short and could find another object", field=opt)


def validate(kb, target: Target) -> list[str]:
    """Check ``target`` against the knowledge base's catalog; fill in type, dimension and
    uniqueness; return warnings. Raises InputError naming the option at fault."""
    warnings: list[str] = []
    if target.distance not in DISTANCES:
        raise InputError(f"unknown distance '{target.distance}' (cosine, l2 or ip)",
                         field="--distance")
    check_identifiers(target)
    oid = _relation(kb, target.schema, target.table)
    cols = _columns(kb, oid)
    where = target.qualified()
    for opt, column in (("--id-column", target.id_column), ("--vector-column", target.vector_column),
                        ("--text-column", target.text_column),
                        ("--dimension-column", target.dimension_column),
                        *(("--where", c) for c in target.filters)):
        if column is not None and column not in cols:
            raise InputError(f"column '{column}' does not exist in {where} (columns: "
                             f"{', '.join(sorted(cols))})", field=opt)
    typname, formatted, typmod = cols[target.vector_column]
    if typname not in VECTOR_TYPES:
        raise InputError(f"column '{target.vector_column}' of {where} is {formatted}, not a "
                         "pgvector vector or halfvec", field="--vector-column")
    target.vector_type = typname
    column_dim = typmod if typmod and typmod > 0 else None
    if target.dimension is None:
        target.dimension = column_dim
    elif column_dim is not None and column_dim != target.dimension:
        raise InputError(f"column '{target.vector_column}' is {formatted} but --dimension is "
                         f"{target.dimension}", field="--dimension")
    if target.dimension_column and target.dimension is None:
        raise InputError("--dimension-column needs --dimension N (the query dimension)",
                         field="--dimension")
    if target.dimension is None:
        cur = kb.execute(sql.SQL("SELECT vector_dims({}) FROM {} WHERE {} IS NOT NULL LIMIT 1")
                         .format(sql.Identifier(target.vector_column), target.table_sql(),
                                 sql.Identifier(target.vector_column)))
        row = cur.fetchone()
        if row is not None:
            target.dimension = row[0]
            warnings.append(f"column '{target.vector_column}' has no declared dimension; "
                            f"found {row[0]} in a sample row (declare {typname}({row[0]}) or "
                            "give --dimension)")
    target.unique_id = _unique(kb, oid, target.id_column)
    where_sql, params = target.where()
    try:
        with kb.transaction():
            row = kb.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {}{})").format(
                target.table_sql(), where_sql), params).fetchone()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise InputError(f"filter {target.filter_literals()} is not valid for {where}: {first}",
                         field="--where") from None
    if not row[0]:
        warnings.append(f"no row of {where} matches the filters {target.filter_literals()}")
    if not vector_indexes(kb, target):
        warnings.append(f"no vector index on {where}.{target.vector_column} for distance "
                        f"{target.distance}: only the exact stage can run")
    return warnings


def vector_indexes(kb, target: Target, methods: tuple[str, ...] = ANN_METHODS) -> list[dict]:
    """ANN indexes over the target's vector column (plain or cast expression) with an operator
    class for the target's distance: [{name, schema, method, opclass, predicate, definition}]."""
    oid = _relation(kb, target.schema, target.table)
    rows = kb.execute(
        """SELECT ic.relname, n.nspname, am.amname, opc.opcname,
                  pg_get_expr(i.indpred, i.indrelid), pg_get_indexdef(i.indexrelid),
                  i.indkey[0], pg_get_expr(i.indexprs, i.indrelid)
             FROM pg_index i
             JOIN pg_class ic ON ic.oid = i.indexrelid
             JOIN pg_namespace n ON n.oid = ic.relnamespace
             JOIN pg_am am ON am.oid = ic.relam
             JOIN pg_opclass opc ON opc.oid = i.indclass[0]
            WHERE i.indrelid = %s AND am.amname = ANY(%s)
            ORDER BY ic.relname""", (oid, list(methods))).fetchall()
    attnum = kb.execute("SELECT attnum FROM pg_attribute WHERE attrelid = %s AND attname = %s",
                        (oid, target.vector_column)).fetchone()
    out = []
    for name, schema, method, opclass, pred, definition, key, exprs in rows:
        on_column = (key == attnum[0]) if key else (
            exprs is not None and target.vector_column in exprs)
        if not on_column or not _opclass_matches(opclass, target.distance):
            continue
        out.append({"name": name, "schema": schema, "method": method, "opclass": opclass,
                    "predicate": pred, "definition": definition})
    return out


def _opclass_matches(opclass: str, distance: str) -> bool:
    suffix = {"cosine": "_cosine_ops", "l2": "_l2_ops", "ip": "_ip_ops"}[distance]
    return opclass.endswith(suffix)


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
