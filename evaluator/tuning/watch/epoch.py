"""A probe's configuration epoch: one digest of everything a probe's fingerprints and its stage's
catalog look-ups and plan check read, read fresh in a few statements (a probe's steady path:
tuning/sweep/remeasure.py; :func:`remember`).

A fingerprint is built from catalog reads (the server, the retrieval extensions, the table's
columns and indexes with their builds and state, every setting a stage sees) and the data version.
The epoch reads the same inputs, and a few more that could change a plan, as they are on the server
now, and hashes them: equal digests mean the fingerprints a fresh sweep would capture are the ones
the series' kept sweep was measured with, the plan check it passed would pass again, and the rows are
the same. It is not an inference from a timestamp: each input is read every probe.

What it reads, in one statement after the extension libraries are loaded (so that their settings
exist), with the table's change-log state read first:

- the server: version, recovery state, start time, the time its configuration files were loaded;
- the database, and every extension's version and catalog row version (``ALTER EXTENSION ...
  UPDATE`` rewrites it);
- the table's catalog row (its file, namespace, planner size estimates) and every column's type;
- every index on it: its index and class catalog rows (valid, ready, live, file node, the
  row versions a ``REINDEX`` or ``ALTER INDEX ... SET`` writes) and its size in pages;
- the table's size, dead tuples, and how often it was analyzed and vacuumed (a new plan, or an
  HNSW graph repaired);
- every setting a fingerprint reads (``hnsw.*``, ``ivfflat.*``, ``diskann.*``, ``bq.*``, every
  ``enable_*``, the planner settings, and those the series sets) as this session sees them before
  the probe applies its own: ``ALTER SYSTEM`` or a configuration file reloaded, ``ALTER DATABASE`` /
  ``ALTER ROLE ... SET``, connection options;
- the table's change-log state (`pgeval target track`): no state, no epoch (an untracked table's
  data version needs a pass over it, and the probe takes its lean path).

And from the client: the host and port connected to, pgeval's version and the target's stored row.
"""

from __future__ import annotations

from typing import Any

from ...core.canonical import sha256_hex
from ...targets.introspect import INDEXES_EPOCH_SQL

_READ = """
SELECT md5(concat_ws(E'\\n',
    current_setting('server_version_num'), pg_is_in_recovery()::text,
    pg_postmaster_start_time()::text, pg_conf_load_time()::text, current_database(),
    (SELECT string_agg(e.extname || '=' || e.extversion || '@' || e.xmin::text, ','
                       ORDER BY e.extname) FROM pg_extension e),
    (SELECT concat_ws(',', c.relnamespace, c.relfilenode, c.relpages, c.reltuples, c.relkind,
                      c.xmin::text)
       FROM pg_class c WHERE c.oid = %(oid)s),
    (SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod), ','
                       ORDER BY a.attnum)
       FROM pg_attribute a WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped),
    {indexes},
    concat_ws(',', pg_table_size(%(oid)s), pg_stat_get_dead_tuples(%(oid)s),
              pg_stat_get_analyze_count(%(oid)s), pg_stat_get_autoanalyze_count(%(oid)s),
              pg_stat_get_vacuum_count(%(oid)s), pg_stat_get_autovacuum_count(%(oid)s)),
    (SELECT string_agg(s.name || '=' || s.setting, ',' ORDER BY s.name)
       FROM pg_settings s
      WHERE s.name LIKE ANY(%(prefixes)s) OR s.name LIKE 'enable\\_%%'
         OR s.name = ANY(%(names)s))))
""".replace("{indexes}", INDEXES_EPOCH_SQL.strip())


def read(kb: Any, target: Any, settings: dict) -> str | None:
    """The epoch of ``target``'s table as a probe setting ``settings`` would see it, in the
    connection's current transaction (rolled back by the caller); None when the table is not
    tracked by a change log (:mod:`evaluator.table.change_log`)."""
    from ... import __version__
    from ...stages import gucs
    from ...table import change_log
    from ...table.fingerprint import PLANNER_GUCS, QUERY_GUC_PREFIXES, QUERY_GUCS
    from ...table.target_table import resolve_table

    oid = resolve_table(kb, target)
    state = change_log.state(kb, oid)
    if state is None:
        return None
    gucs.load_libraries(kb)
    names = sorted({*PLANNER_GUCS, *QUERY_GUCS, *(k.rpartition(":")[2] for k in settings)})
    server = kb.execute(
        _READ,
        {"oid": oid, "prefixes": [p + "%" for p in QUERY_GUC_PREFIXES], "names": names},
    ).fetchone()[0]
    return sha256_hex(
        {
            "server": server,
            "changes": state,
            "host": kb.info.host,
            "port": str(kb.info.port),
            "pgeval": __version__,
            "target": {"name": target.name, "spec": target.spec(), "scope": target.scope},
            "settings": dict(sorted(settings.items())),
        },
        ascii=True,
    )


def remember(database: Any, sweep_id: int, digest: str | None) -> None:
    """Record ``digest`` on the sweep's point run, whichever path measured it: the epoch read
    before it was measured (a change after that read makes the next probe's epoch another one:
    never a stale match)."""
    if digest is None:
        return
    with database.connect() as results:
        results.execute(
            "UPDATE pgeval.run p SET params = p.params || jsonb_build_object('epoch', %s::text) "
            "FROM pgeval.sweep_point sp WHERE sp.sweep_id = %s AND p.run_id = sp.run_id",
            (digest, sweep_id),
        )
        results.commit()
