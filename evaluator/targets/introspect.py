"""The one place that reads the knowledge base's index catalog (``pg_index``) for a table of the
user's: its ANN indexes, the unique and the invalid ones, the bm25 and GIN indexes of a text
column, and every index with its definition (for the fingerprint). Callers turn the rows into
their findings; nothing here writes.

A partitioned table's ANN indexes are its partitions' (``pg_partition_tree``): the planner
serves a statement on the parent through each partition's own index (a Merge Append, or one
partition after pruning), so those are the indexes a plan names and a target is served by."""

from __future__ import annotations

from typing import Any

from .targets import ANN_METHODS

# the relation %(oid)s and, when it is partitioned, every relation of its partition tree
IN_TREE = (
    "(i.indrelid = %(oid)s OR i.indrelid IN (SELECT relid FROM pg_partition_tree(%(oid)s::oid)))"
)
# a relation's name, unqualified
RELNAME = "(SELECT r.relname::text FROM pg_class r WHERE r.oid = {})"
ON_REL = RELNAME.format("i.indrelid")  # the relation an index is on
ROOT = RELNAME.format("coalesce(pg_partition_root(i.indexrelid), i.indexrelid)")  # its top index
# an index's bytes: a partitioned index's are its partitions' (it has no storage of its own)
TREE_BYTES = (
    "coalesce((SELECT sum(pg_relation_size(t.relid)) FROM pg_partition_tree(i.indexrelid) t), "
    "pg_relation_size(i.indexrelid))::bigint"
)


def ann_indexes(
    conn: Any, relation_oid: int, methods: tuple[str, ...] = ANN_METHODS
) -> list[tuple[str, str, int, int]]:
    """[(index name, method, index oid, bytes)] of the relation's indexes of access method
    ``methods`` (any column, any operator class), its partitions' too, by name; a partitioned
    index (no storage: its partitions' indexes serve) is not one."""
    return [
        (n, m, int(o), int(b))
        for n, m, o, b in conn.execute(
            "SELECT c.relname, am.amname, c.oid, pg_relation_size(c.oid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam "
            f"WHERE {IN_TREE} AND am.amname = ANY(%(methods)s) AND c.relkind = 'i' "
            "ORDER BY c.relname",
            {"oid": relation_oid, "methods": list(methods)},
        ).fetchall()
    ]


def vector_index_rows(
    conn: Any, relation_oid: int, methods: tuple[str, ...] = ANN_METHODS
) -> list[tuple[Any, ...]]:
    """(name, schema, method, first operator class, predicate, definition, first key column's
    name (None for an expression), expressions, the partition it is on (None: the relation
    itself), the partitioned index it belongs to (else itself)) of the relation's indexes of
    ``methods``, its partitions' too; not a partitioned index (its partitions' indexes serve)."""
    return conn.execute(
        f"""SELECT ic.relname, n.nspname, am.amname, opc.opcname,
                  pg_get_expr(i.indpred, i.indrelid), pg_get_indexdef(i.indexrelid),
                  a.attname, pg_get_expr(i.indexprs, i.indrelid),
                  CASE WHEN i.indrelid <> %(oid)s THEN {ON_REL} END,
                  {ROOT}
             FROM pg_index i
             JOIN pg_class ic ON ic.oid = i.indexrelid
             JOIN pg_namespace n ON n.oid = ic.relnamespace
             JOIN pg_am am ON am.oid = ic.relam
             JOIN pg_opclass opc ON opc.oid = i.indclass[0]
             LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
            WHERE {IN_TREE} AND am.amname = ANY(%(methods)s) AND ic.relkind = 'i'
            ORDER BY ic.relname""",
        {"oid": relation_oid, "methods": list(methods)},
    ).fetchall()


def is_unique_column(conn: Any, relation_oid: int, column: str) -> bool:
    """Whether a unique index (not partial, not on an expression) has ``column`` as its only
    key."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = i.indkey[0] WHERE i.indrelid = %s AND i.indisunique AND i.indnkeyatts = 1 "
        "AND i.indpred IS NULL AND i.indexprs IS NULL AND a.attname = %s)",
        (relation_oid, column),
    ).fetchone()
    return bool(row[0])


def invalid_indexes(conn: Any, relation_oid: int) -> list[str]:
    """Names of the relation's invalid indexes (a failed CREATE INDEX CONCURRENTLY)."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = %s AND NOT i.indisvalid ORDER BY 1",
            (relation_oid,),
        ).fetchall()
    ]


def bm25_index_rows(conn: Any, relation_oid: int, column: str) -> list[tuple[Any, ...]]:
    """(name, regclass text, reloptions) of the pg_textsearch (``bm25``) indexes on ``column``."""
    return conn.execute(
        """SELECT ic.relname, i.indexrelid::regclass::text, ic.reloptions
             FROM pg_index i
             JOIN pg_class ic ON ic.oid = i.indexrelid
             JOIN pg_am am ON am.oid = ic.relam
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
            WHERE i.indrelid = %s AND am.amname = 'bm25' AND a.attname = %s
            ORDER BY ic.relname""",
        (relation_oid, column),
    ).fetchall()


def gin_index_rows(conn: Any, relation_oid: int) -> list[tuple[Any, ...]]:
    """(name, expression, first key column name) of the relation's valid single-key GIN indexes
    that are not partial."""
    return conn.execute(
        """SELECT ic.relname, pg_get_expr(i.indexprs, i.indrelid), a.attname
             FROM pg_index i
             JOIN pg_class ic ON ic.oid = i.indexrelid
             JOIN pg_am am ON am.oid = ic.relam
             LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
            WHERE i.indrelid = %s AND am.amname = 'gin' AND i.indnatts = 1
              AND i.indpred IS NULL AND i.indisvalid
            ORDER BY ic.relname""",
        (relation_oid,),
    ).fetchall()


def all_index_rows(conn: Any, relation_oid: int) -> list[tuple[Any, ...]]:
    """Every index of the relation and of its partitions, by name: (name, method, reloptions,
    valid, predicate, operator classes, key definitions, definition, bytes (a partitioned
    index's: its partitions'), oid, filenode, the partition it is on (None: the relation
    itself), whether it is a partition of a partitioned index)."""
    return conn.execute(
        f"""SELECT c.relname, am.amname, c.reloptions, i.indisvalid,
                  pg_get_expr(i.indpred, i.indrelid),
                  (SELECT array_agg(opc.opcname ORDER BY k.n)
                     FROM unnest(i.indclass::oid[]) WITH ORDINALITY k(oid, n)
                     JOIN pg_opclass opc ON opc.oid = k.oid),
                  (SELECT array_agg(pg_get_indexdef(i.indexrelid, k, true) ORDER BY k)
                     FROM generate_series(1, i.indnkeyatts) k),
                  pg_get_indexdef(i.indexrelid), {TREE_BYTES},
                  i.indexrelid::bigint, pg_relation_filenode(i.indexrelid)::bigint,
                  CASE WHEN i.indrelid <> %(oid)s THEN {ON_REL} END,
                  c.relispartition
             FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
             JOIN pg_am am ON am.oid = c.relam
            WHERE {IN_TREE} ORDER BY c.relname""",
        {"oid": relation_oid},
    ).fetchall()


# every index on the table %(oid)s as one text value (SQL, for tuning/watch/epoch.py's one
# statement): its catalog rows' values and row versions (a REINDEX, ALTER INDEX ... SET, a
# changed valid/ready/live state rewrites them), its file node and its size in pages
INDEXES_EPOCH_SQL = """
(SELECT string_agg(concat_ws(':', ic.relname, i.indexrelid, i.indisvalid, i.indisready,
                             i.indislive, i.xmin::text, ic.relfilenode, ic.relpages,
                             ic.reltuples, ic.xmin::text, pg_relation_size(i.indexrelid)),
                   ',' ORDER BY i.indexrelid)
   FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid WHERE i.indrelid = %(oid)s)
"""
