"""The change log (`pgeval target track`): an opt-in count of the write statements on a target's
table, so that "has the data changed?" costs one short read instead of a pass over the table.

Without it, the data checksum's cache (:mod:`.data_checksum`) is keyed by the *version value*, a
hash of every row version summed in one scan: exact, read only, and proportional to the table
(40-90 ms at 100,000 rows, seconds at 10 million), paid by every probe, sweep and pipeline run.
With it, the key is the change log's count, one read of a short table; the scan runs only when
the count moved (and then fills both keys, so the next unchanged read is short again).

What `track` installs in the knowledge base (it needs CREATE on the database and ownership of the
table; nothing else is changed and the application's roles need no grant):

- schema ``pgeval_changes``, table ``statement_log (relid oid, n bigint)``: one row ``(table, 1)``
  appended by every write statement, folded now and then into one row holding their sum. Any
  role may read it (table oids and counts: a probe's role needs nothing more); only its owner
  writes it, through ``SECURITY DEFINER`` functions;
- trigger ``pgeval_track_changes``: ``AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE FOR EACH
  STATEMENT``, ``ENABLE ALWAYS`` (it fires under ``session_replication_role = replica`` too);
- trigger ``pgeval_track_replica``: ``FOR EACH ROW WHEN (session_replication_role = replica)``,
  ``ENABLE ALWAYS``: logical replication's apply worker fires row triggers only, so on a
  subscriber each replicated row appends a row (elsewhere its condition is false).

A statement's row is written in the statement's own (sub)transaction: it is committed exactly
when the change is, and rolled back with it. An append takes no lock another transaction waits
for (no unique key, no row updated), so it adds no wait and no serialization failure to the
application's writes, at any isolation level.

The count (``sum(n)`` over the table's rows) read in one snapshot is the number of committed
write statements visible in it; it only grows, so an equal count means no write committed
between two reads. The fold keeps the log short: one in 256 write statements, in a READ COMMITTED
transaction that gets the table's fold lock without waiting (``pg_try_advisory_xact_lock``),
replaces the table's rows by one row with their sum (the sum, hence every key, unchanged);
`track` folds too. Transactions in REPEATABLE READ or SERIALIZABLE never fold (a fold there could
meet a concurrent fold's delete).

``pgeval_changes.state(table)`` reads the count with the triggers' own row versions
(``pg_trigger``'s oid and ``xmin``), in the calling statement's snapshot; pgeval and
``pgeval.run_probe`` key by it. ``ALTER TABLE ... DISABLE TRIGGER`` then ``ENABLE`` (writes in
between are not counted) writes new versions, so the count of an earlier trigger is never
trusted. A trigger missing or not ``ENABLE ALWAYS`` means untracked: the version scan, as without
a log. Limits: plain tables only (partitions, partitioned tables and inheritance parents have
writes that bypass the table's triggers); the log is pgeval's own (editing ``statement_log`` by
hand can make an old count come back).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from ..core.errors import Conflict, InputError, NotFound, first_line, param

SCHEMA = "pgeval_changes"
TRIGGER = "pgeval_track_changes"
# the apply worker of logical replication fires row triggers only (not statement ones): there,
# and only there (session_replication_role = replica), each row written appends one row
ROW_TRIGGER = "pgeval_track_replica"
FOLD_LOCK = 1885824377  # advisory lock class of a table's fold (next to watch's WATCH_LOCK)
FOLD_ONE_IN = 256

# idempotent: `track` runs it every time (a newer pgeval replaces the functions)
OBJECTS = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
REVOKE ALL ON SCHEMA {SCHEMA} FROM PUBLIC;
GRANT USAGE ON SCHEMA {SCHEMA} TO PUBLIC;
CREATE TABLE IF NOT EXISTS {SCHEMA}.statement_log (
    relid oid NOT NULL,
    n bigint NOT NULL DEFAULT 1
);
COMMENT ON TABLE {SCHEMA}.statement_log IS
    'pgeval target track: one row per write statement on a tracked table (n = 1), or the sum of '
    'folded rows. sum(n) per relid only grows; do not edit.';
-- a publication FOR ALL TABLES publishes it too: without a replica identity its fold's DELETE
-- would fail there
ALTER TABLE {SCHEMA}.statement_log REPLICA IDENTITY FULL;
REVOKE ALL ON {SCHEMA}.statement_log FROM PUBLIC;
GRANT SELECT ON {SCHEMA}.statement_log TO PUBLIC;
CREATE OR REPLACE FUNCTION {SCHEMA}.fold(p_relid oid) RETURNS bigint
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH gone AS (
        DELETE FROM {SCHEMA}.statement_log WHERE relid = p_relid RETURNING n
    ), kept AS (
        INSERT INTO {SCHEMA}.statement_log (relid, n)
        SELECT p_relid, sum(n) FROM gone HAVING count(*) > 0
        RETURNING n
    )
    SELECT count(*) FROM gone
$$;
CREATE OR REPLACE FUNCTION {SCHEMA}.count_statement() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {SCHEMA}.statement_log (relid) VALUES (TG_RELID);
    IF random() < 1.0 / {FOLD_ONE_IN}
       AND current_setting('transaction_isolation') = 'read committed'
       AND pg_try_advisory_xact_lock({FOLD_LOCK}, (TG_RELID::bigint - 2147483648)::int) THEN
        BEGIN  -- housekeeping: whatever goes wrong, the application's write goes on
            PERFORM {SCHEMA}.fold(TG_RELID);
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION {SCHEMA}.state(p_relid oid) RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY[string_agg(t.oid::text || ':' || t.xmin::text, ',' ORDER BY t.tgname),
                 (SELECT coalesce(sum(l.n), 0) FROM {SCHEMA}.statement_log l
                   WHERE l.relid = p_relid)::text]
      FROM pg_trigger t
     WHERE t.tgrelid = p_relid AND t.tgname IN ('{TRIGGER}', '{ROW_TRIGGER}')
       AND t.tgenabled = 'A'
    HAVING count(*) = 2
$$;
COMMENT ON FUNCTION {SCHEMA}.state(oid) IS
    'pgeval target track: ARRAY[the triggers'' oid:xmin, the write statements counted] of a '
    'tracked table, NULL unless both triggers are ENABLE ALWAYS; read by pgeval and '
    'pgeval.run_probe in the snapshot of the statement that calls it';
GRANT EXECUTE ON FUNCTION {SCHEMA}.state(oid) TO PUBLIC;
REVOKE ALL ON FUNCTION {SCHEMA}.fold(oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION {SCHEMA}.count_statement() FROM PUBLIC;
"""


def state_sql(oid: int) -> sql.Composable:
    """The table's change-log state as one scalar expression (``pgeval_changes.state``), to read
    it in the same statement, hence the same snapshot, as a scan of the table."""
    return sql.SQL("{}.state({})").format(sql.Identifier(SCHEMA), sql.Literal(oid))


def state(conn: Any, oid: int) -> list | None:
    """[the triggers' identity, the count] of a tracked table in one snapshot, else None (no log
    in this database or none this role may read, a trigger missing or not ENABLE ALWAYS). Two
    statements: the log's existence and rights first (a statement naming a missing table would
    abort the transaction)."""
    present = conn.execute(
        "SELECT has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT') "
        "AND has_function_privilege(to_regprocedure(n.nspname || '.state(oid)'), 'EXECUTE') "
        "AND EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = %s AND tgname = %s) "
        "FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid "
        "WHERE n.nspname = %s AND c.relname = 'statement_log'",
        (oid, TRIGGER, SCHEMA),
    ).fetchone()
    if not (present and present[0]):
        return None
    return from_array(conn.execute(sql.SQL("SELECT {}").format(state_sql(oid))).fetchone()[0])


def from_array(value: list | None) -> list | None:
    """:func:`state_sql`'s array as :func:`state` returns it."""
    return None if value is None else [value[0], value[1]]


def count(state: list) -> int:
    """The write statements counted, of a :func:`state`."""
    return int(state[1])


def _table(conn: Any, target: Any) -> tuple[int, sql.Composable]:
    from .target_table import resolve_table

    oid = resolve_table(conn, target)
    kind, partition, children = conn.execute(
        "SELECT c.relkind::text, c.relispartition, EXISTS (SELECT 1 FROM pg_inherits "
        "WHERE inhparent = c.oid) FROM pg_class c WHERE c.oid = %s",
        (oid,),
    ).fetchone()
    if kind != "r" or partition or children:
        what = {"v": "a view", "m": "a materialized view", "f": "a foreign table"}.get(
            kind, "a partitioned table"
        )
        if kind == "r":
            what = "a partition" if partition else "an inheritance parent"
        raise InputError(
            f"target '{target.name}': table '{target.qualified()}' is {what}; the change log "
            "tracks plain tables only (its writes can bypass the table's triggers): pgeval "
            "keeps measuring its data with the version scan"
        )
    return oid, target.table_sql()


def _lock_timeout(conn: Any, value: str) -> None:
    """SET LOCAL lock_timeout: the trigger's DDL waits at most this long for the table's lock
    (and makes the application's writes queue behind it no longer than that)."""
    try:
        conn.execute("SELECT set_config('lock_timeout', %s, true)", (str(value),))
    except psycopg.DataError as exc:
        conn.rollback()
        raise InputError(
            f"{first_line(exc)} (a duration such as 5s or 500ms)",
            field=param("lock_timeout"),
        ) from None


def install(conn: Any, target: Any, *, lock_timeout: str = "5s") -> dict:
    """Create the log and the trigger (idempotent), fold the table's rows; one transaction.
    Returns {"table", "trigger", "count", "installed"}."""
    oid, table = _table(conn, target)
    before = state(conn, oid)
    try:
        _lock_timeout(conn, lock_timeout)
        conn.execute(OBJECTS)
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE TRIGGER {} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {} "
                "FOR EACH STATEMENT EXECUTE FUNCTION {}.count_statement()"
            ).format(sql.Identifier(TRIGGER), table, sql.Identifier(SCHEMA))
        )
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE TRIGGER {} AFTER INSERT OR UPDATE OR DELETE ON {} FOR EACH ROW "
                "WHEN (pg_catalog.current_setting('session_replication_role') = 'replica') "
                "EXECUTE FUNCTION {}.count_statement()"
            ).format(sql.Identifier(ROW_TRIGGER), table, sql.Identifier(SCHEMA))
        )
        for name in (TRIGGER, ROW_TRIGGER):
            conn.execute(
                sql.SQL("ALTER TABLE {} ENABLE ALWAYS TRIGGER {}").format(
                    table, sql.Identifier(name)
                )
            )
        conn.execute(sql.SQL("SELECT {}.fold(%s)").format(sql.Identifier(SCHEMA)), (oid,))
        after = state(conn, oid)
        conn.commit()
    except psycopg.errors.LockNotAvailable:
        conn.rollback()
        raise Conflict(
            f"could not lock table '{target.qualified()}' within {lock_timeout} to add the "
            "trigger (a long transaction holds it): nothing was changed; try again, or give a "
            "longer --lock-timeout"
        ) from None
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction) as exc:
        conn.rollback()
        raise InputError(
            f"cannot track table '{target.qualified()}': {first_line(exc)} (tracking needs "
            "CREATE on the database and ownership of the table; connect as its owner)"
        ) from None
    assert after is not None
    return {
        "table": target.qualified(),
        "trigger": TRIGGER,
        "count": count(after),
        "installed": before is None,
    }


def remove(conn: Any, target: Any, *, lock_timeout: str = "5s") -> dict:
    """Drop the table's trigger and its rows of the log (the log itself stays for other tables)."""
    from .target_table import resolve_table

    oid = resolve_table(conn, target)
    present = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = %s AND tgname = %s)",
        (oid, TRIGGER),
    ).fetchone()[0]
    if not present:
        conn.rollback()
        raise NotFound(
            f"target '{target.name}': table '{target.qualified()}' is not tracked (no trigger "
            f"{TRIGGER}; `pgeval target track {target.name}` adds it)"
        )
    try:
        _lock_timeout(conn, lock_timeout)
        for name in (TRIGGER, ROW_TRIGGER):
            conn.execute(
                sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(
                    sql.Identifier(name), target.table_sql()
                )
            )
        conn.execute(
            sql.SQL("DELETE FROM {}.statement_log WHERE relid = %s").format(sql.Identifier(SCHEMA)),
            (oid,),
        )
        conn.commit()
    except psycopg.errors.LockNotAvailable:
        conn.rollback()
        raise Conflict(
            f"could not lock table '{target.qualified()}' within {lock_timeout} to drop the "
            "trigger (a long transaction holds it): nothing was changed; try again"
        ) from None
    except psycopg.errors.InsufficientPrivilege as exc:
        conn.rollback()
        raise InputError(
            f"cannot untrack table '{target.qualified()}': {first_line(exc)}"
        ) from None
    return {"table": target.qualified(), "trigger": TRIGGER, "removed": True}
