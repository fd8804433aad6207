"""A table's layout that a scratch copy (:mod:`.build_sweep`, advise's sample) keeps, and the
DDL advise prints for it.

- A partitioned table is copied partitioned the same way (the same key, the same partitions
  with their bounds, the key's columns copied): an index built on the copy is one index per
  partition, as ``CREATE INDEX`` on the table makes it, and a statement on the copy is planned
  as on the table (partition pruning for a tenant key, an Append of the partitions' index scans
  otherwise). A table partitioned on an expression, or whose partitions are partitioned in
  turn, is copied as one table; the copy's notes say so (its plans are not the table's).
- A table whose build is one partial index per group (a partial index whose WHERE names the
  group column: :func:`group_wheres`) keeps it on a grouped copy, which has that column: a build
  there is one partial index per group too (:func:`per_group`).
- The DDL (:func:`index_ddl`) is built as PostgreSQL allows it without blocking writes: on a
  partitioned table the parent's index ``ON ONLY`` (invalid, empty), each partition's
  ``CONCURRENTLY``, each attached; a partitioned index is dropped without ``CONCURRENTLY`` (the
  server has none for it, :func:`drop_index`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from .copied_rows import STEADY


@dataclass(frozen=True)
class Layout:
    """How a table is partitioned: ``key`` as the server prints it (``LIST (tenant)``), the
    columns it names, and each partition's name and bound (``FOR VALUES IN (1)``, ``DEFAULT``)."""

    key: str
    columns: tuple[str, ...]
    partitions: tuple[tuple[str, str], ...]


def layout(conn: Any, oid: int) -> tuple[Layout | None, str | None]:
    """(the layout of table ``oid``, None when it is not partitioned; why a partitioned one is
    copied as one table, else None)."""
    row = conn.execute(
        "SELECT pg_get_partkeydef(p.partrelid), p.partattrs::int2[], "
        "(SELECT array_agg(a.attname::text ORDER BY k.n) FROM unnest(p.partattrs::int2[]) "
        "WITH ORDINALITY k(num, n) JOIN pg_attribute a ON a.attrelid = p.partrelid "
        "AND a.attnum = k.num) FROM pg_partitioned_table p WHERE p.partrelid = %s",
        (oid,),
    ).fetchone()
    if row is None:
        return None, None
    key, attnums, names = row
    if 0 in list(attnums):
        return None, f"it is partitioned on an expression ({key})"
    parts = conn.execute(
        "SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid), c.relkind::text "
        "FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid WHERE h.inhparent = %s "
        "ORDER BY 1",
        (oid,),
    ).fetchall()
    nested = [name for name, _, kind in parts if kind == "p"]
    if nested:
        return None, f"its partition {nested[0]} is partitioned in turn"
    return Layout(key, tuple(names or ()), tuple((n, b) for n, b, _ in parts)), None


def of_source(conn: Any, source: Any) -> tuple[Layout | None, str | None]:
    """:func:`layout` of the ``source`` target's table (None, None: no such table)."""
    oid = conn.execute(
        "SELECT to_regclass(%s)::oid", (source.table_sql().as_string(conn),)
    ).fetchone()[0]
    return (None, None) if oid is None else layout(conn, oid)


def select_rows(
    source: Any,
    column: str | None,
    shape: Layout | None,
    labelled: sql.Composable | None = None,
) -> sql.Composable:
    """``SELECT`` of a copy's columns from the ``source`` target's table (its WHERE and order
    follow): the id, the vector searched, the group ``column``, the partition key's and
    ``labelled`` (``, expression AS labels``: a label-filtered design's, table/labels.py)."""
    carried = dict.fromkeys([column, *(shape.columns if shape else ())])
    extra = [x for x in carried if x not in (None, source.id_column, source.vector_column)]
    return sql.SQL("SELECT {id} AS {id}, {vec} AS {vcol}{extra}{labelled} FROM {src}").format(
        labelled=sql.SQL("") if labelled is None else labelled,
        id=sql.Identifier(source.id_column),
        vec=source.vector_expr(),
        vcol=sql.Identifier(source.vector_column),
        extra=sql.SQL("").join(sql.SQL(", {}").format(sql.Identifier(x)) for x in extra),
        src=source.table_sql(),
    )


def fill(
    conn: Any, schema: str, table: str, shape: Layout | None, select: sql.Composable, params: list
) -> None:
    """Create ``schema.table`` with the rows of ``select``: partitioned as ``shape`` (its
    columns' names and types those of ``select``), else one table."""
    dst = sql.Identifier(schema, table)
    if shape is None:
        conn.execute(
            sql.SQL("CREATE TABLE {}{} AS {}").format(dst, sql.SQL(STEADY), select), params
        )
        return
    staged = sql.Identifier(schema, f"{table}_columns")
    conn.execute(sql.SQL("CREATE TABLE {} AS {} WITH NO DATA").format(staged, select), params)
    conn.execute(
        sql.SQL("CREATE TABLE {} (LIKE {}) PARTITION BY {}").format(
            dst,
            staged,
            sql.SQL(shape.key),  # the server's own text of the table's key
        )
    )
    conn.execute(sql.SQL("DROP TABLE {}").format(staged))
    for name, bound in shape.partitions:
        conn.execute(
            sql.SQL("CREATE TABLE {} PARTITION OF {} {}{}").format(
                sql.Identifier(schema, name), dst, sql.SQL(bound), sql.SQL(STEADY)
            )
        )
    conn.execute(sql.SQL("INSERT INTO {} {}").format(dst, select), params)


def index_bytes(conn: Any, schema: str, name: str) -> int:
    """The bytes of index ``schema.name``; a partitioned index's: its partitions'."""
    row = conn.execute(
        "SELECT coalesce((SELECT sum(pg_relation_size(t.relid)) FROM pg_partition_tree(x) t), "
        "pg_relation_size(x))::bigint FROM to_regclass(%s) x",
        (sql.Identifier(schema, name).as_string(conn),),
    ).fetchone()
    return int(row[0])


def partition_names(conn: Any, target: Any) -> list[tuple[str, str]] | None:
    """(schema, name) of each partition of ``target``'s table, by name; None when the table is
    not partitioned."""
    found = conn.execute(
        "SELECT c.oid, c.relkind = 'p' FROM pg_class c WHERE c.oid = to_regclass(%s)",
        (target.table_sql().as_string(conn),),
    ).fetchone()
    if found is None or not found[1]:
        return None
    return [
        (r[0], r[1])
        for r in conn.execute(
            "SELECT n.nspname::text, c.relname::text FROM pg_inherits h "
            "JOIN pg_class c ON c.oid = h.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE h.inhparent = %s ORDER BY 2",
            (found[0],),
        ).fetchall()
    ]


def index_ddl(
    conn: Any, target: Any, name: str, body: sql.Composable, wheres: tuple[str, ...] = ()
) -> list[sql.Composable]:
    """The statements that build index ``name`` (``body``: ``USING method (key ops) WITH
    (...)``) on ``target``'s table without blocking its writes: ``CREATE INDEX CONCURRENTLY``
    on a plain table; on a partitioned one, the parent's index ``ON ONLY``, each partition's
    ``CONCURRENTLY`` and its ``ATTACH`` (a deeper tree: one ``CREATE INDEX``, which blocks
    writes while it runs). ``wheres``: the table's build per group (:func:`group_wheres`), one
    partial index per WHERE, named as :func:`per_group` names them."""
    table, ident = target.table_sql(), _in(target, name)
    parts = partition_names(conn, target)
    if wheres or parts is None:  # (partial on a partitioned table: not CONCURRENTLY there)
        how = "CREATE INDEX " + ("CONCURRENTLY " if parts is None else "")
        stmt = sql.SQL(how + "{{}} ON {} {}").format(table, body)
        return per_group(stmt, name, list(wheres), conn)[0]
    if any(partition_names(conn, _Rel(s, p)) is not None for s, p in parts):
        return [sql.SQL("CREATE INDEX {} ON {} {}").format(ident[-1], table, body)]
    out: list[sql.Composable] = [
        sql.SQL("CREATE INDEX {} ON ONLY {} {}").format(ident[-1], table, body)
    ]
    for schema, part in parts:
        own = f"{name}_{part}"[:63]
        out.append(
            sql.SQL("CREATE INDEX CONCURRENTLY {} ON {} {}").format(
                sql.Identifier(own), sql.Identifier(schema, part), body
            )
        )
        out.append(
            sql.SQL("ALTER INDEX {} ATTACH PARTITION {}").format(
                ident[0], sql.Identifier(schema, own)
            )
        )
    return out


class _Rel:
    """A relation as :func:`partition_names` reads a target: its ``table_sql()``."""

    def __init__(self, schema: str, table: str) -> None:
        self.schema, self.table = schema, table

    def table_sql(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.table)


def drop_index(conn: Any, target: Any, name: str, if_exists: bool = False) -> sql.Composable:
    """``DROP INDEX CONCURRENTLY`` of index ``name`` of ``target``'s table; a partitioned
    index's (one to be built on a partitioned table, too) without CONCURRENTLY (the server has
    none for it)."""
    row = conn.execute(
        "SELECT relkind::text FROM pg_class WHERE oid = to_regclass(%s)",
        (_in(target, name)[0].as_string(conn),),
    ).fetchone()
    parted = row[0] == "I" if row is not None else partition_names(conn, target) is not None
    how = "DROP INDEX " + ("" if parted else "CONCURRENTLY ") + ("IF EXISTS " if if_exists else "")
    return sql.SQL(how + "{}").format(_in(target, name)[0])


def _in(target: Any, name: str) -> tuple[sql.Identifier, sql.Identifier]:
    """(index ``name`` in the schema of ``target``'s table, as searched; unqualified)."""
    plain = sql.Identifier(name)
    return (sql.Identifier(target.schema, name) if target.schema else plain), plain


def group_wheres(conn: Any, target: Any, column: str | None, kind: Any) -> list[str]:
    """The WHERE (as the server prints it) of each partial index of ``target``'s table that
    serves a design of ``kind`` and names the group ``column``, by index name; none without
    ``column`` or such an index (one index over every row)."""
    from .table_index import per_group, serves_same, table_indexes

    if column is None:
        return []
    same = [
        ix
        for ix in table_indexes(conn, target)
        if ix.valid and ix.method == kind.index_method and serves_same(conn, target, kind, ix)
    ]
    return list(dict.fromkeys(str(ix.predicate) for ix in per_group(same, column)))


def per_group(
    stmt: sql.Composed, name: str, wheres: list[str], conn: Any
) -> tuple[list[sql.Composable], list[str]]:
    """(``stmt`` (``CREATE INDEX {} ON ...``, ``{}`` its name) as index ``name``, or once per
    WHERE of ``wheres``, a partial index named ``name``, ``name_1``, ...; the names)."""
    text = stmt.as_string(conn)

    def named(own: str) -> sql.Composable:
        return sql.SQL(text.replace("{}", sql.Identifier(own).as_string(conn), 1))

    if not wheres:
        return [named(name)], [name]
    names = group_names(name, len(wheres))
    return [
        sql.SQL("{} WHERE {}").format(named(own), sql.SQL(where))
        for own, where in zip(names, wheres, strict=True)
    ], names


def group_names(name: str, groups: int) -> list[str]:
    """The names of a build's indexes: ``name``; per group (``groups`` partial indexes),
    ``name``, ``name_1``, ..."""
    return [name if i == 0 else f"{name}_{i}"[:63] for i in range(max(groups, 1))]
