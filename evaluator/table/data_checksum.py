"""The fingerprint's data part (row count and content checksum), cached by table version.

The content checksum (:func:`content_sql`) hashes every row's id, vector and text: one scan that
costs about 4 µs per 384-dimension row (0.4 s at 100,000 rows, ~40 s at 10,000,000), paid by
every ``run pipeline`` and ``sweep`` although the data rarely changes. The *version value* costs
about a seventh of it: ``count(*)`` and the sum of a 64-bit hash of each row's
(tableoid, ctid, xmin) (:data:`VERSION_TERM`) over the target's rows, its filters applied. PostgreSQL never changes a row in place: a committed INSERT
adds a (ctid, xmin) pair, a DELETE removes one, an UPDATE (HOT or not) writes a new row version
at a new ctid with the updating transaction's xmin. So any committed change to the rows under the
filters changes the set of pairs, and the version value with it (up to a 64-bit hash collision of
the sum, or a row written at a freed ctid by a transaction whose 32-bit xid equals the old row's
after a wraparound). VACUUM FULL, CLUSTER or a table rewrite move rows without changing them:
the version value changes and the checksum is merely recomputed.

With the change log (:mod:`.change_log`, `pgeval target track`), the data is also cached under
the log's count, read in the same statement (the same snapshot) as the version value: while the
count is unchanged nothing of the table is read (``scans`` 0); when it moved, as below.

The cache, ``pgeval.data_checksum`` in the results database, maps a key to (rows, checksum). The
key is the sha256 of a canonical JSON of: the knowledge base's identity (``current_database()``,
``inet_server_addr()``, ``inet_server_port()``, the ``port`` and ``cluster_name`` settings, the
table's oid, kind and ``pg_relation_filenode``), the checksummed columns (name, number, type, the
vector type's send function), the filter SQL text and its bound values, and the version value.
On a hit only the cheap scan runs. On a miss the version value and the checksum are computed in
ONE statement (one scan, one snapshot: a write between two statements could otherwise attach a
new checksum to an old key), stored in a short transaction of its own, and returned.

Limit: the identity names a server by address and port, not by its physical history. Two copies
of one cluster (a restored backup, a promoted standby) that diverged after the copy, reachable at
the same address and port and the same database name, sharing one results database, could present
the same (oid, filenode, ctid, xmin) set for different contents. Use ``--no-checksum`` there, or
a results database per copy. A standby that replays its primary has the primary's contents: the
same key names the same data.

Views and foreign tables have no row versions: their checksum is computed every time, as is any
checksum when no results connection is given or the cache cannot be read or written (a role
without rights on the table, a results database at an older revision) — the value is the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from ..core.canonical import sha256_hex
from ..core.db import Database
from ..core.errors import first_line
from . import change_log
from .target_table import resolve_table, row_count, vector_column

RECIPE = 1  # the content checksum's definition; a new one makes every key new
CACHED_KINDS = ("r", "m", "p")  # table, materialized view, partitioned table
CONTENT_NOTE = "sum of hashtextextended(id | md5(vector) | md5(text))"
# the cache is optional: these leave it aside (the checksum is computed as without one)
UNAVAILABLE = (
    psycopg.errors.InsufficientPrivilege,
    psycopg.errors.UndefinedTable,
    psycopg.errors.ReadOnlySqlTransaction,
)


@dataclass
class DataChecksum:
    """``data`` is the fingerprint's data part ({"rows", "checksum"}); ``source`` says how the
    checksum was obtained (computed, reused, skipped); ``scans`` counts statements that read the
    table; ``note`` is the fingerprint's ``info.checksum`` line."""

    data: dict
    source: str
    scans: int
    note: str
    cached_at: str | None = None


class ChecksumCache:
    """``pgeval.data_checksum`` reached through ``conn`` (a results connection, used only while it
    has no transaction open: each use is a short transaction of its own, committed) or else a
    short connection of ``database``'s results DSN."""

    def __init__(self, conn: Any = None, database: Database | None = None) -> None:
        self.conn, self.database = conn, database
        self.unavailable: str | None = None

    @contextmanager
    def _session(self) -> Iterator[Any]:
        conn = self.conn
        if conn is not None and conn.info.transaction_status == TransactionStatus.IDLE:
            with conn.transaction():  # begins and commits its own transaction
                yield conn
        elif self.database is not None:
            with self.database.connect(autocommit=True) as short, short.transaction():
                yield short
        else:
            raise LookupError("no results connection free")

    def lookup(self, key: str) -> tuple[int, str, str] | None:
        try:
            with self._session() as c:
                row = c.execute(
                    "SELECT rows, checksum, computed_at FROM pgeval.data_checksum WHERE key = %s",
                    (key,),
                ).fetchone()
        except (LookupError, *UNAVAILABLE) as exc:
            self.unavailable = first_line(exc)
            return None
        if row is None:
            return None
        return int(row[0]), row[1], row[2].isoformat(timespec="seconds")

    def store(self, key: str, slot: str, table: str, data: dict, version: dict) -> None:
        try:
            with self._session() as c:
                c.execute(
                    "INSERT INTO pgeval.data_checksum "
                    "(key, slot, table_name, rows, checksum, version) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                    (key, slot, table, data["rows"], data["checksum"], json.dumps(version)),
                )
                # the table's earlier versions will not come back: keep its latest entry only
                c.execute(
                    "DELETE FROM pgeval.data_checksum WHERE slot = %s AND key <> %s", (slot, key)
                )
        except (LookupError, *UNAVAILABLE) as exc:
            self.unavailable = first_line(exc)


def content_sql(target: Any, vec: dict) -> sql.Composable:
    """The content term of one row: id | md5(vector's binary form) | md5(text)."""
    parts = [
        sql.SQL("coalesce({}::text, '')").format(sql.Identifier(target.id_column)),
        sql.SQL("coalesce(md5({}({})), 'null')").format(
            sql.SQL(vec["send"]), sql.Identifier(target.vector_column)
        ),
    ]
    if target.text_column:
        parts.append(
            sql.SQL("coalesce(md5({}::text), 'null')").format(sql.Identifier(target.text_column))
        )
    return sql.SQL("hashtextextended({}, 0)").format(sql.SQL(" || '|' || ").join(parts))


# each row version's (tableoid, ctid, xmin) hashed by the server's own hash functions for tid
# and xid, without building text: at 100,000 x 384 the scan takes 0.04 s, against 0.06 s for the
# same triple as text through hashtextextended and 0.30 s for the content checksum. Servers
# before 16 have no hashxidextended: xmin goes through text there (0.05 s).
VERSION_TERM = sql.SQL("hashtidextended(ctid, hashxidextended(xmin, tableoid::bigint))")
VERSION_TERM_15 = sql.SQL("hashtidextended(ctid, xmin::text::bigint # tableoid::bigint)")


def version_term(conn: Any) -> sql.Composable:
    """:data:`VERSION_TERM`, or its form for servers before 16."""
    return VERSION_TERM if conn.info.server_version >= 160000 else VERSION_TERM_15


def _sum(term: sql.Composable) -> sql.Composable:
    # sum(bigint) is exact (numeric result, an int128 accumulator): the value of
    # sum(term::numeric), without a numeric addition per row (a fifth of the version scan)
    return sql.SQL("coalesce(sum({}), 0)").format(term)


def _checksum(total: Any) -> str:
    return f"{int(total) % (1 << 64):016x}"


def identity(
    conn: Any, oid: int, target: Any, vec: dict, where: sql.Composable, params: list
) -> dict:
    """What the key hashes besides the version value: server, table, columns, filters."""
    db, addr, port, setting_port, cluster, kind, node = conn.execute(
        "SELECT current_database(), host(inet_server_addr()), inet_server_port(), "
        "current_setting('port'), current_setting('cluster_name'), c.relkind::text, "
        "pg_relation_filenode(c.oid) FROM pg_class c WHERE c.oid = %s",
        (oid,),
    ).fetchone()
    names = [target.id_column, target.vector_column, target.text_column]
    columns = conn.execute(
        "SELECT attname, attnum, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s AND attname = ANY(%s) AND NOT attisdropped ORDER BY attnum",
        (oid, [n for n in names if n]),
    ).fetchall()
    return {
        "recipe": RECIPE,
        "server": {"database": db, "addr": addr, "port": port, "port_setting": setting_port},
        "cluster_name": cluster,
        "table": {"oid": oid, "kind": kind, "filenode": node},
        "columns": {"id": names[0], "vector": names[1], "text": names[2], "send": vec["send"]},
        "attributes": [list(c) for c in columns],
        "filter": {"sql": where.as_string(conn), "params": params},
    }


def _key(body: dict) -> str:
    return sha256_hex(body)


def measure(
    conn: Any, target: Any, *, checksum: bool = True, cache: ChecksumCache | None = None
) -> Any:
    """Row count and content checksum of ``target``'s rows (its filters applied), reusing
    ``cache`` (see the module's docstring). ``checksum=False`` counts rows only."""
    oid = resolve_table(conn, target)
    vec = vector_column(conn, oid, target.vector_column)
    where, params = target.where()
    table = target.table_sql()
    if not checksum:
        data: dict[str, Any] = {"rows": row_count(conn, target), "checksum": None}
        return DataChecksum(data, "skipped", 1, "skipped (--no-checksum)")
    content = _sum(content_sql(target, vec))
    ident = identity(conn, oid, target, vec, where, params) if cache is not None else None
    if ident is None or ident["table"]["kind"] not in CACHED_KINDS:
        q = sql.SQL("SELECT count(*), {} FROM {}{}").format(content, table, where)
        n, total = conn.execute(q, params).fetchone()
        data = {"rows": int(n), "checksum": _checksum(total)}
        return DataChecksum(data, "computed", 1, f"{CONTENT_NOTE}: computed")
    slot = _key(ident)
    assert cache is not None
    # the change log (`pgeval target track`): an unchanged count names the data without a scan
    log = change_log.state(conn, oid) if ident["table"]["kind"] == "r" else None
    if log is not None:
        hit = cache.lookup(_key({**ident, "changes": log}))
        if hit is not None:
            data = {"rows": hit[0], "checksum": hit[1]}
            note = f"{CONTENT_NOTE}: reused (change log unchanged; cached at {hit[2]})"
            return DataChecksum(data, "reused", 0, note, hit[2])
    # the log's count in the scan's own statement: the same snapshot as the rows it names
    logged = sql.SQL(", {}").format(change_log.state_sql(oid)) if log is not None else sql.SQL("")
    q = sql.SQL("SELECT count(*), {}{} FROM {}{}").format(
        _sum(version_term(conn)), logged, table, where
    )
    row = conn.execute(q, params).fetchone()
    n, version = row[0], row[1]
    hit = cache.lookup(_key({**ident, "version": [int(n), str(version)]}))
    if hit is not None and hit[0] == int(n):
        data = {"rows": int(n), "checksum": hit[1]}
        _remember(cache, ident, log and change_log.from_array(row[2]), target, data)
        return DataChecksum(
            data, "reused", 1, f"{CONTENT_NOTE}: reused (cached at {hit[2]})", hit[2]
        )
    # one statement, one snapshot: the version value and the checksum of the same rows
    q = sql.SQL("SELECT count(*), {}, {}{} FROM {}{}").format(
        content, _sum(version_term(conn)), logged, table, where
    )
    row = conn.execute(q, params).fetchone()
    n, total, version = row[:3]
    data = {"rows": int(n), "checksum": _checksum(total)}
    value: dict[str, Any] = {**ident, "version": [int(n), str(version)]}
    if not cache.unavailable:
        cache.store(_key(value), slot, target.qualified(), data, value)
        _remember(cache, ident, log and change_log.from_array(row[3]), target, data)
    note = f"{CONTENT_NOTE}: computed"
    if cache.unavailable:
        note += f" (checksum cache unavailable: {cache.unavailable})"
    return DataChecksum(data, "computed", 2, note)


def _remember(cache: ChecksumCache, ident: dict, log: list | None, target: Any, data: dict) -> None:
    """Cache ``data`` under the change log's count too (read in the same snapshot), in a slot of
    its own: the next read with the same count skips the scan."""
    if log is None or cache.unavailable:
        return
    value = {**ident, "changes": log}
    cache.store(
        _key(value), _key({**ident, "log": change_log.SCHEMA}), target.qualified(), data, value
    )
