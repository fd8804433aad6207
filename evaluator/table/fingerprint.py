"""The configuration fingerprint: everything that can change
a retrieval number, read from the catalog, so that two runs can be compared and the difference
named.

``capture(kb_conn, target, ...)`` returns a plain dict; ``config_hash(fp)`` is the sha256 of its
canonical JSON (sorted keys, no whitespace) without the ``info`` part, which holds facts that are
shown but do not define the configuration (capture time, sizes, the DDL text, index options that
were spelled out rather than left at their default).

What is hashed — only what can change a retrieval number:

- ``server``: PostgreSQL version and which server answered (system identifier, in recovery or
  not, the host and port of the connection string); ``extensions``: the versions of the extensions retrieval uses
  (vector, vectorscale, pg_textsearch) — not every installed one: creating pg_prewarm or any
  other extension changes no result and no hash;
- ``target``: table, id/vector/text columns, vector type (``vector(384)``);
- ``indexes``: every index of the target table, keyed by name: method, operator classes, key
  columns, predicate (partial index), validity and options (reloptions, with the access method's
  documented defaults filled in, so that ``WITH (m = 16)`` and no WITH clause hash the same), and
  ``build``: the index's OID and file node, which identify one build of it — REINDEX, DROP and
  CREATE, VACUUM FULL or CLUSTER make a new build (an HNSW graph built twice from the same rows
  and options is not the same graph: its lists differ), and so a new hash;
- ``query_settings``: every ``hnsw.*`` / ``ivfflat.*`` / ``diskann.*`` setting as the stage sees
  it (current value overlaid with the stage's ``SET LOCAL`` settings);
- ``planner``: work_mem, parallel workers, jit, random_page_cost, effective_cache_size,
  shared_buffers, every ``enable_*`` that is off and any other core setting the stage sets
  (but timeouts, which stop a statement and change none of its results);
- ``data``: row count and content checksum of the target (its filter applied) — see
  :func:`capture_data` for the cost, and :mod:`evaluator.table.data_checksum` for the cache that
  reuses the checksum of an unchanged table;
- ``stage_settings`` (only when a setting is scoped to a stage, ``--set STAGE:GUC=VALUE``):
  for every stage, the settings it SETs — those given to every stage and its own — as the
  server shows them; ``query_settings`` and ``planner`` then hold the common ones;
- ``embedding`` (model and dimension), ``chunking`` label, ``filters`` in force, ``testset``
  (content hash), and ``stage`` when the caller passes it;
- ``measurement``: what of the caller's configuration (``extra``) decides the numbers — the
  stages and their options, depth, batch, server timing, index isolation; a sweep's k,
  concurrency, index and build options. The rest of ``extra`` (repeat count, names, values
  already hashed above) is kept in ``info.config``, shown but not hashed, as are the test set's
  and the target's names.

``server`` also says which server answered (:func:`server_info`: system identifier, whether in
recovery, the host and port the connection string names), so that a standby, a replica or
another host is its own configuration; each index's ``state`` (:func:`indexes`) what changed its
answers after its build (a VACUUM). No connection string or password is ever read; string values
pass through :func:`evaluator.core.masking.mask` all the same.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

from ..core.canonical import canonical_json, sha256_hex
from ..core.db import Database
from ..core.errors import param
from ..core.masking import mask_value
from ..kinds.registry import build_defaults, index_methods
from . import data_checksum
from .copied_rows import is_scratch_copy
from .target_table import resolve_table, vector_column

FINGERPRINT_VERSION = 3  # 3: the server that answered, and each index's state

# the extensions whose version can change what retrieval returns (the others are not hashed)
RETRIEVAL_EXTENSIONS = ("vector", "vectorscale", "pg_textsearch")
# settings that stop a statement but cannot change its result (never hashed)
NON_RESULT_SETTINGS = (
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "transaction_timeout",
    "idle_session_timeout",
    "application_name",
)
# keys of ``extra`` that decide what a stage measures; a sweep's are under extra["sweep"]
MEASUREMENT_KEYS = (
    "stages",
    "options",
    "depth",
    "batch",
    "server_timing",
    "isolate_index",
    "k",
    "concurrency",
    "index",
    "build",
    "services",
    "plan",
)

# GUC families whose value changes what an ANN scan returns (read after loading the libraries).
QUERY_GUC_PREFIXES = ("hnsw.", "ivfflat.", "diskann.", "bq.")
QUERY_GUCS = (
    "hnsw.ef_search",
    "hnsw.iterative_scan",
    "hnsw.max_scan_tuples",
    "ivfflat.probes",
    "diskann.query_search_list_size",
    "diskann.query_rescore",
)
PLANNER_GUCS = (
    "work_mem",
    "max_parallel_workers_per_gather",
    "jit",
    "random_page_cost",
    "effective_cache_size",
    "shared_buffers",
)

# index options' documented defaults (kinds.registry): an explicit default hashes as an omitted one
INDEX_DEFAULTS = {method: build_defaults(method) for method in index_methods()}


# -- catalog readers -------------------------------------------------------------------------------


def load_extension_libraries(conn: Any) -> None:
    """Load pgvector's and pgvectorscale's libraries so that their settings exist in this session
    (``current_setting('hnsw.ef_search', true)`` is NULL until the library is loaded). Called
    inside the transaction that reads them (behind a pooler the next transaction may run on
    another server session): a missing pgvector does not abort it (the error is swallowed
    inside the one statement)."""
    from ..stages import gucs

    # no pgvector here: its settings are simply absent from the fingerprint (the error is
    # swallowed inside the statement: one round trip, no savepoint)
    conn.execute(gucs.LOAD_LIBRARIES_IF_ANY)


def server_info(conn: Any) -> dict:
    """The server that answers: its version, and which server it is. A standby or a replica has
    its primary's system identifier but is in recovery; another host, or a pooler in front, is
    reached at another host and port (those the connection string names: no password)."""
    # EXECUTE on pg_control_system() revoked from this role: no system identifier (the host,
    # port and recovery state stay)
    version, num, recovery, system = conn.execute(
        "SELECT current_setting('server_version'), current_setting('server_version_num')::int, "
        "pg_is_in_recovery(), CASE WHEN has_function_privilege('pg_control_system()', "
        "'EXECUTE') THEN (SELECT system_identifier::text FROM pg_control_system()) END"
    ).fetchone()
    return {
        "version": version,
        "version_num": num,
        "system_identifier": system,
        "in_recovery": bool(recovery),
        "host": conn.info.host,
        "port": str(conn.info.port),
    }


def extensions(conn: Any, only: tuple[str, ...] | None = None) -> dict:
    """Every installed extension's version (plpgsql left out: for the health check), or those
    of ``only`` (:data:`RETRIEVAL_EXTENSIONS`: the fingerprint's)."""
    return dict(
        conn.execute(
            "SELECT extname, extversion FROM pg_extension WHERE extname <> 'plpgsql' "
            "AND (%s::text[] IS NULL OR extname = ANY(%s)) ORDER BY extname",
            (None if only is None else list(only),) * 2,
        ).fetchall()
    )


def reloptions(items: list[str] | None) -> dict[str, str]:
    """An index's ``reloptions`` (``["m=16"]``) as a dict (``{"m": "16"}``)."""
    return dict(item.partition("=")[::2] for item in items or [])


def indexes(conn: Any, table_oid: int, remade: bool = False) -> tuple[dict, dict]:
    """(hashed, info): every index on the table keyed by name, and its size/DDL for display.
    ``remade``: the table is a scratch copy pgeval makes again on each run (advise's sample), the
    indexes it carries with it: their build identity (oid, filenode) is left out of the hash, as
    a new one each run would make every stored sweep of the copy look changed.

    An index's ``state`` is what changes its answers after its build: its size in pages (rows
    added to the graph) and the table's dead tuples as the server's statistics count them. A
    ``VACUUM`` after updates or deletes removes them and repairs an HNSW graph (recall at a small
    ef_search rises), with the rows, the build and the size unchanged; a vacuum with nothing to
    remove (an insert-only table's autovacuum) changes neither, so it changes no hash."""
    from ..targets import introspect

    rows = introspect.all_index_rows(conn, table_oid)
    block, dead = conn.execute(
        "SELECT current_setting('block_size')::int, pg_stat_get_dead_tuples(%s)", (table_oid,)
    ).fetchone()
    hashed, info = {}, {}
    for name, method, relopts, valid, pred, opclasses, keys, ddl, size, oid, node, *_ in rows:
        explicit = reloptions(relopts)
        hashed[name] = {
            "method": method,
            "opclasses": list(opclasses or []),
            "columns": list(keys or []),
            "predicate": pred,
            "valid": bool(valid),
            "options": {**INDEX_DEFAULTS.get(method, {}), **explicit},
            **({} if remade else {"build": {"oid": oid, "filenode": node}}),
            "state": {"pages": int(size) // int(block), "dead_tuples": int(dead or 0)},
        }
        info[name] = {"definition": ddl, "bytes": int(size), "explicit_options": explicit}
    return hashed, info


# a stage's settings as the server shows them (the settings applied before, in the same
# transaction): every ANN setting (the families' names in pg_settings, the known ones and the
# stage's own), the planner's named settings in order, and every enable_* that is off; one
# scan of pg_settings (the CTE s, read twice)
_SEEN = """
WITH s AS (SELECT name FROM pg_settings
            WHERE name LIKE ANY(%(prefixes)s) OR name LIKE 'enable\\_%%'),
a AS (SELECT DISTINCT x.n FROM (SELECT name FROM s WHERE name LIKE ANY(%(prefixes)s)
                               UNION ALL SELECT unnest(%(ann)s::text[])) x(n))
SELECT ARRAY(SELECT n FROM a ORDER BY n), ARRAY(SELECT current_setting(n, true) FROM a ORDER BY n),
       ARRAY(SELECT current_setting(p.n) FROM unnest(%(planner)s::text[]) WITH ORDINALITY p(n, i)
              ORDER BY p.i),
       ARRAY(SELECT name FROM s WHERE name LIKE 'enable\\_%%' AND current_setting(name) = 'off'
              ORDER BY name)
"""


def settings_seen(conn: Any, settings: dict | None = None) -> tuple[dict, dict]:
    """(query settings, planner settings) as a stage running with ``settings`` (``SET LOCAL``)
    sees them, read in one transaction (rolled back):

    - query settings: every ANN setting (``hnsw.*``, ``ivfflat.*``, ``diskann.*``, ``bq.*`` once
      their libraries are loaded, the known ones, and any extension setting the stage sets);
    - planner settings: the core settings that change plans, any core setting the stage sets
      (extension settings, with a dot, are query settings; timeouts change no result), and
      ``enable_off``: every ``enable_*`` that is off."""
    from ..stages import gucs

    settings = {str(k): v for k, v in (settings or {}).items()}
    planner = list(PLANNER_GUCS) + sorted(
        k
        for k in settings
        if "." not in k
        and k not in PLANNER_GUCS
        and not k.startswith("enable_")
        and k not in NON_RESULT_SETTINGS
    )
    ann = sorted(set(QUERY_GUCS) | {k for k in settings if "." in k})
    with conn.transaction(force_rollback=True):
        load_extension_libraries(conn)
        gucs.apply_local(conn, settings)
        names, values, planned, off = conn.execute(
            _SEEN,
            {"prefixes": [p + "%" for p in QUERY_GUC_PREFIXES], "ann": ann, "planner": planner},
        ).fetchone()
    query = dict(sorted(zip(names, values)))
    out = dict(zip(planner, planned))
    out["enable_off"] = list(off)
    return query, out


def stage_settings(conn: Any, settings: dict | None, stages: Any) -> dict:
    """{stage: {setting: value as the server shows it}}: what each stage SETs, the settings
    given to every stage and those scoped to it (``STAGE:GUC=VALUE``), timeouts left out."""
    from ..stages import gucs

    out = {}
    for stage in stages:
        wanted = {
            k: str(v)
            for k, v in gucs.scope(settings or {}, stage).items()
            if k not in NON_RESULT_SETTINGS
        }
        with conn.transaction(force_rollback=True):
            load_extension_libraries(conn)
            out[stage] = {
                k: conn.execute("SELECT set_config(%s, %s, true)", (k, v)).fetchone()[0]
                for k, v in sorted(wanted.items())
            }
    return out


def capture_data(conn: Any, target: Any, *, checksum: bool = True, cache: Any = None) -> dict:
    """Row count and content checksum of the target's rows (its filters applied).

    The checksum is order-independent: the sum, modulo 2^64, of ``hashtextextended`` over each
    row's id, the md5 of its vector's binary form and the md5 of its text. It costs one sequential
    scan of the table (about the time of ``SELECT count(*)`` plus two md5 per row: on the order of
    a second per million 384-dimension rows) — unless ``cache``
    (:class:`evaluator.table.data_checksum.ChecksumCache`) holds it for the table's current version,
    read by a scan about seven times cheaper (see :mod:`evaluator.table.data_checksum`).
    ``checksum=False`` (``--no-checksum``) keeps only the row count — cheap on big tables, but
    then a changed vector goes unnoticed.
    """
    return data_checksum.measure(conn, target, checksum=checksum, cache=cache).data


# -- the fingerprint ---------------------------------------------------------------------------------


def _scrub(value: Any) -> Any:
    return mask_value(value, known=False)  # a hash must not depend on the DSN's password


def measurement(extra: dict | None) -> tuple[dict | None, dict | None]:
    """(hashed, shown): the keys of ``extra`` that decide what a stage measures (a sweep's
    ``extra["sweep"]`` flattened into them), and the whole of ``extra`` for display."""
    if not extra:
        return None, None
    source = {**extra, **(extra.get("sweep") or {})}
    hashed = {k: source.get(k) for k in MEASUREMENT_KEYS}
    hashed["options"] = hashed["options"] or {}
    for key in ("batch", "server_timing", "isolate_index"):
        hashed[key] = bool(hashed[key])
    hashed["concurrency"] = int(hashed["concurrency"] or 1)
    for key in [k for k in ("services", "plan") if hashed.get(k) is None]:  # (earlier hashes
        hashed.pop(key)  # stay: service stages and the planner's plan mode hashed where given)
    return hashed, extra


def settings_free(kb_conn: Any, target: Any) -> dict:
    """What :func:`capture` reads that no setting changes: the server, the retrieval extensions,
    the database and (with a ``target``) its table's column type, indexes and size. Read once
    for fingerprints taken together (a sweep's exact stage and its points): ``capture(...,
    common=settings_free(...))``; captured again, it is read again."""
    out: dict[str, Any] = {
        "server": server_info(kb_conn),
        "extensions": extensions(kb_conn, RETRIEVAL_EXTENSIONS),
        "database": kb_conn.execute("SELECT current_database()").fetchone()[0],
    }
    if target is not None:
        oid = resolve_table(kb_conn, target)
        out["column_type"] = vector_column(kb_conn, oid, target.vector_column).get("type")
        out["indexes"] = indexes(kb_conn, oid, remade=is_scratch_copy(target))
        out["table_bytes"] = kb_conn.execute("SELECT pg_table_size(%s)", (oid,)).fetchone()[0]
    return out


def capture(
    kb_conn: Any,
    target: Any,
    *,
    settings: dict | None = None,
    embedder: str | None = None,
    dimension: int | None = None,
    testset_hash: str | None = None,
    testset_name: str | None = None,
    chunking: str | None = None,
    filters: dict | None = None,
    stage: str | None = None,
    checksum: bool = True,
    data: dict | None = None,
    data_note: str | None = None,
    cache: Any = None,
    extra: dict | None = None,
    common: dict | None = None,
) -> dict:
    """The fingerprint of one stage run on ``target`` (:class:`evaluator.targets.targets.Target`, or None
    for stages without one: no table, index or data part) with ``settings`` applied as the stage
    applies them (``SET LOCAL``; rolled back here).

    ``data`` reuses a :func:`capture_data` result (a sweep computes it once; ``data_note`` says
    how, for ``info.checksum``); ``checksum=False`` skips the content checksum; ``cache`` (a
    :class:`evaluator.table.data_checksum.ChecksumCache`) reuses a checksum of unchanged rows; ``filters`` adds filters in force beyond the target's own (e.g.
    DiskANN labels). ``common``: :func:`settings_free` read for fingerprints taken together
    (else read here). Nothing is written.
    """
    from ..stages import gucs

    if common is None:
        common = settings_free(kb_conn, target)
    scoped = gucs.scoped_stages(settings or {})
    if scoped:  # settings scoped to a stage: the common ones above, each stage's set below
        named = [s.get("name") for s in ((extra or {}).get("stages") or []) if isinstance(s, dict)]
        per_stage = stage_settings(
            kb_conn, settings, list(dict.fromkeys([n for n in named if n] + scoped))
        )
        settings = gucs.unscoped(settings)
    seen = settings_seen(kb_conn, settings)
    fp: dict[str, Any] = {
        "fingerprint_version": FINGERPRINT_VERSION,
        "server": dict(common["server"]),
        "extensions": dict(common["extensions"]),
        "target": None,
        "indexes": {},
        "data": None,
        "query_settings": seen[0],
        "planner": seen[1],
        "embedding": {"model": embedder, "dimension": dimension},
        "chunking": chunking,
        "filters": {str(k): v for k, v in (filters or {}).items()},
        "testset": {"hash": testset_hash},
        "stage": stage,
        "info": {
            "captured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "database": common["database"],
            "testset": testset_name,
        },
    }
    if target is not None:
        fp["indexes"], idx_info = copy.deepcopy(common["indexes"])
        if data is None:
            measured = data_checksum.measure(kb_conn, target, checksum=checksum, cache=cache)
            data, data_note = measured.data, measured.note
        fp["data"] = data
        fp["info"]["target"] = target.name
        fp["target"] = {**target.searched_as(), "column_type": common["column_type"]}
        if dimension is None:
            fp["embedding"]["dimension"] = target.dimension
        fp["filters"] = {
            **{k: str(v) for k, v in target.filter_literals().items()},
            **fp["filters"],
        }
        fp["info"].update(
            indexes=idx_info,
            table_bytes=common["table_bytes"],
            checksum=(
                "skipped (--no-checksum)"
                if data.get("checksum") is None
                else data_note or data_checksum.CONTENT_NOTE
            ),
        )
    if scoped:
        fp["stage_settings"] = per_stage
    hashed, shown = measurement(extra)
    if hashed is not None:
        fp["measurement"], fp["info"]["config"] = hashed, shown
    return _scrub(fp)


def canonical(fp: dict) -> str:
    return canonical_json({k: v for k, v in fp.items() if k != "info"})


def config_hash(fp: dict) -> str:
    """sha256 (hex) of the fingerprint's canonical JSON, the ``info`` part left out."""
    return sha256_hex({k: v for k, v in fp.items() if k != "info"})


def short_hash(value: str | None) -> str:
    return value[:12] if value else "—"


def testset_hash(conn: Any, name: str | None) -> str | None:
    from ..testset.catalog import resolve_testset

    if not name:
        return None
    return resolve_testset(conn, name)[1]


def capture_for(
    database: Database,
    target_name: str,
    *,
    testset: str | None = None,
    embedder: Any = None,
    settings: dict | None = None,
    stage: str | None = None,
    checksum: bool = True,
    chunking: Any = None,
) -> Any:
    """(fingerprint, config hash) of target ``target_name`` with these settings, test set,
    embedder, stage and chunking labels (`pgeval fingerprint --target`)."""
    from ..core.errors import InputError, first_line
    from ..targets.targets import load
    from .data_checksum import ChecksumCache

    with database.connect(autocommit=True) as res:
        target = load(res, target_name)
        ts_hash = testset_hash(res, testset)
    with database.connect(results=False, autocommit=True, read_only=True) as kb:
        try:
            fp = capture(
                kb,
                target,
                settings=settings,
                embedder=embedder,
                testset_hash=ts_hash,
                testset_name=testset,
                stage=stage,
                checksum=checksum,
                chunking=chunking,
                cache=ChecksumCache(database=database),
            )
        except Exception as exc:
            if exc.__class__.__module__.startswith("psycopg") and settings:
                first = first_line(exc, "invalid setting")
                raise InputError(first, field=param("settings")) from None
            raise
    return fp, config_hash(fp)
