"""Checking a target against the knowledge base's catalog (`pgeval target add`): the table or
view, the columns, the vector type and dimension, the filter values, the uniqueness of the chunk
id, and the ANN indexes over the vector column that match the distance."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from ..core.errors import InputError, first_line, param
from . import introspect
from .targets import ANN_METHODS, DISTANCES, VECTOR_TYPES, Target


def _relation(kb: Any, schema: str | None, table: str) -> int:
    name = sql.Identifier(schema, table) if schema else sql.Identifier(table)
    oid = kb.execute("SELECT to_regclass(%s)::oid", (name.as_string(kb),)).fetchone()[0]
    if oid is None:
        raise InputError(
            f"table '{schema + '.' if schema else ''}{table}' does not exist in the "
            f"knowledge base (or is not on the search_path; give {param('schema')})",
            field=param("table"),
        )
    kind = kb.execute("SELECT relkind FROM pg_class WHERE oid = %s", (oid,)).fetchone()[0]
    if kind not in ("r", "p", "v", "m", "f"):
        raise InputError(f"'{table}' is not a table or view", field=param("table"))
    return oid


def column_types(kb: Any, oid: int | None) -> dict[str, tuple[str, str, int]]:
    """name -> (type name, formatted type, typmod) of relation ``oid``'s columns ({}: None, no
    such relation)."""
    rows = kb.execute(
        "SELECT a.attname, t.typname, format_type(a.atttypid, a.atttypmod), a.atttypmod "
        "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped",
        (oid,),
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


NAMEDATALEN = 63  # PostgreSQL silently cuts longer identifiers: another object could answer


def check_identifiers(target: Target) -> None:
    """Names are quoted (psycopg.sql.Identifier) wherever they are used; here they are only
    refused when PostgreSQL would not take them as given: empty, or longer than 63 bytes."""
    if not target.name or not target.name.strip():
        raise InputError("the target name must not be empty", field="NAME")
    for opt, ident in (
        (param("schema"), target.schema),
        (param("table"), target.table),
        *_named_columns(target),
    ):
        if ident is None:
            continue
        if ident == "" or "\x00" in ident:
            raise InputError(f"'{ident}' is not a usable name", field=opt)
        if len(ident.encode("utf-8")) > NAMEDATALEN:
            raise InputError(
                f"'{ident}' is longer than {NAMEDATALEN} bytes: PostgreSQL would cut "
                "it short and could find another object",
                field=opt,
            )


def _named_columns(target: Target) -> list[tuple[str, str | None]]:
    """(option, column) of every column the target names (None: not given)."""
    return [
        (param("id_column"), target.id_column),
        (param("vector_column"), target.vector_column),
        (param("text_column"), target.text_column),
        (param("dimension_column"), target.dimension_column),
        (param("group_by"), target.group_by),
        *((param("where"), c) for c in target.filters),
    ]


def columns(kb: Any, target: Target) -> dict:
    """The target table's columns: name -> (type name, formatted type, typmod)."""
    return column_types(kb, _relation(kb, target.schema, target.table))


def validate(kb: Any, target: Target) -> list[str]:
    """Check ``target`` against the knowledge base's catalog; fill in type, dimension and
    uniqueness; return warnings. Raises InputError naming the option at fault."""
    warnings: list[str] = []
    if target.distance not in DISTANCES:
        raise InputError(
            f"unknown distance '{target.distance}' (cosine, l2 or ip)", field=param("distance")
        )
    check_identifiers(target)
    oid = _relation(kb, target.schema, target.table)
    cols = column_types(kb, oid)
    where = target.qualified()
    for opt, column in _named_columns(target):
        if column is not None and column not in cols:
            raise InputError(
                f"column '{column}' does not exist in {where} (columns: {', '.join(sorted(cols))})",
                field=opt,
            )
    typname, formatted, typmod = cols[target.vector_column]
    if typname not in VECTOR_TYPES:
        raise InputError(
            f"column '{target.vector_column}' of {where} is {formatted}, not a "
            "pgvector vector or halfvec",
            field=param("vector_column"),
        )
    target.vector_type = typname
    column_dim = typmod if typmod and typmod > 0 else None
    if target.dimension is None:
        target.dimension = column_dim
    elif column_dim is not None and column_dim != target.dimension:
        raise InputError(
            f"column '{target.vector_column}' is {formatted} but {param('dimension')} is {target.dimension}",
            field=param("dimension"),
        )
    if target.dimension_column and target.dimension is None:
        raise InputError(
            f"{param('dimension_column')} needs {param('dimension')} N (the query dimension)",
            field=param("dimension"),
        )
    if target.dimension is None:
        cur = kb.execute(
            sql.SQL("SELECT vector_dims({}) FROM {} WHERE {} IS NOT NULL LIMIT 1").format(
                sql.Identifier(target.vector_column),
                target.table_sql(),
                sql.Identifier(target.vector_column),
            )
        )
        row = cur.fetchone()
        if row is not None:
            target.dimension = row[0]
            warnings.append(
                f"column '{target.vector_column}' has no declared dimension; "
                f"found {row[0]} in a sample row (declare {typname}({row[0]}) or "
                "give --dimension)"
            )
    target.unique_id = introspect.is_unique_column(kb, oid, target.id_column)
    where_sql, params = target.where()
    try:
        with kb.transaction():
            row = kb.execute(
                sql.SQL("SELECT EXISTS (SELECT 1 FROM {}{})").format(target.table_sql(), where_sql),
                params,
            ).fetchone()
    except Exception as exc:
        first = first_line(exc)
        raise InputError(
            f"filter {target.filter_literals()} is not valid for {where}: {first}",
            field=param("where"),
        ) from None
    if not row[0]:
        warnings.append(f"no row of {where} matches the filters {target.filter_literals()}")
    if not vector_indexes(kb, target):
        warnings.append(
            f"no vector index on {where}.{target.vector_column} for distance "
            f"{target.distance}: only the exact stage can run"
        )
    return warnings


def vector_indexes(kb: Any, target: Target, methods: tuple[str, ...] = ANN_METHODS) -> list[dict]:
    """ANN indexes over the target's vector column (plain or cast expression) with an operator
    class for the target's distance: [{name, schema, method, opclass, predicate, definition}]
    (a partitioned table's: its partitions', with ``partition`` and ``of``, the partitioned
    index)."""
    oid = _relation(kb, target.schema, target.table)
    rows = introspect.vector_index_rows(kb, oid, methods)
    out = []
    for name, schema, method, opclass, pred, definition, key, exprs, partition, root in rows:
        on_column = (
            key == target.vector_column
            if key
            else (exprs is not None and target.vector_column in exprs)
        )
        # the operator class of the type searched: a halfvec index of a vector column serves
        # hnsw-halfvec, not hnsw (and the other way round); a bit index, binary quantization
        if not on_column or opclass != target.searched.opclass(target.distance):
            continue
        if not target.searched.serves(exprs):  # bit_hamming_ops on binary_quantize(col) only
            continue
        out.append(
            {
                "name": name,
                "schema": schema,
                "method": method,
                "opclass": opclass,
                "predicate": pred,
                "definition": definition,
                # a partition's index: the partition, and the partitioned index it belongs to
                **({} if partition is None else {"partition": partition, "of": root}),
            }
        )
    return out


def serving_as(indexes: list[dict], name: str) -> list[str]:
    """The indexes of ``indexes`` (:func:`vector_indexes`) that serve the statement for index
    ``name`` (``--index``): a partitioned index's, its partitions' indexes; a partial index's,
    itself and the same build over other rows (``WHERE tenant = 2`` beside ``WHERE tenant =
    3``: each group's own index); else none."""
    parts = [i["name"] for i in indexes if i.get("of") == name]
    own = next((i for i in indexes if i["name"] == name and i["predicate"]), None)
    if parts or own is None:
        return parts
    return [i["name"] for i in indexes if i["predicate"] and _build(i) == _build(own)]


def _build(ix: dict) -> str:
    """An index's definition without its name and WHERE: what it builds, over which rows aside."""
    body = ix["definition"].split(" ON ", 1)[-1]
    return body.rsplit(" WHERE ", 1)[0] if ix["predicate"] else body
