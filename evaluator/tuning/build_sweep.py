"""Build-time sweeps: every index variant is built on a scratch copy of the target's vectors in a
schema of pgeval's own (``pgeval_scratch_<pid>_<random>``) in the knowledge base's database —
never on the user's table. The schema is dropped on the way out, after an error, after Ctrl-C
and after SIGTERM (the handler turns it into KeyboardInterrupt so that ``finally`` runs).

Builds run with a ``maintenance_work_mem`` sized to the index (``--maintenance-work-mem`` sets it;
by default the estimate of :func:`sized_memory`, never below the server's); a build whose graph
no longer fitted (pgvector's NOTICE) is reported as spilled. Builds run under a
watchdog: ``statement_timeout`` on the build, plus a timer that cancels the backend (and then
terminates it) should the build not return — a DiskANN ``storage_layout=plain`` build at the
default 64MB was seen to hang forever after "Builder neighbor cache is full". On pgvector
versions with the parallel-HNSW-build advisory, HNSW builds run without parallel workers.

A target scoped to one group (``Target.scoped``: a grouped sweep's) is copied whole, every group
with its group column, and the copy is searched scoped to that group: the index a tenant is
searched through is the one index over every tenant, as on the user's table. Inside
``with shared():`` (advise) every Scratch of the same rows shares one copy and its last build:
the groups of a design are measured on one index, built once; the copies are dropped when the
block ends.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from psycopg import sql

from ..core.db import Database
from ..core.errors import DatabaseError, InputError, first_line, param
from ..core.warnings_once import once
from ..table import health, labels, partitions
from ..table.copied_rows import (
    SCRATCH_PREFIX,
    SCRATCH_TABLE,
    copied_rows,
    group_column,
    over_copy,
)
from . import spent
from .build_watchdog import Watchdog

DEFAULT_BUILD_TIMEOUT_S = 1800


# while ``shared()`` is open: the copy of each source (its key) -> the Scratch that owns it
_SHARED: dict[str, Scratch] | None = None
# scratch schemas of this process besides the Scratch copies (advise's sample): not leftovers
LIVE: set[str] = set()


@contextmanager
def shared() -> Iterator[None]:
    """Scratch copies (and their last build) shared by every Scratch entered inside; dropped
    when the block ends, also on Ctrl-C and on error. Nested: the outer block's."""
    global _SHARED
    if _SHARED is not None:
        yield
        return
    _SHARED = {}
    try:
        yield
    finally:
        pool, _SHARED = _SHARED, None
        for owner in pool.values():
            owner.close()


@contextmanager
def own_schema(database: Any, schema: str) -> Iterator[None]:
    """Scratch schema ``schema`` of this process (an advise's sample, a sweep's held-out
    copies) while the block runs; on exit, also on Ctrl-C and on error, it is dropped with the
    helper targets stored over it (``kb~sample1000``: none left pointing at nothing)."""
    from ..targets import targets

    LIVE.add(schema)
    try:
        yield
    finally:
        try:
            with database.connect(results=False, autocommit=True) as c:
                c.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
            with database.connect(autocommit=True) as conn:
                targets.remove_helpers(conn, schema)
        finally:
            LIVE.discard(schema)


def leftover_schemas(conn: Any, keep: str | None = None) -> list[str]:
    """Scratch schemas left by an earlier process that could not clean up (kill -9, crash)."""
    live = {keep or "", *LIVE, *(s.schema for s in (_SHARED or {}).values())}
    return [
        r[0]
        for r in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s ORDER BY 1",
            (SCRATCH_PREFIX.replace("_", r"\_") + "%",),
        ).fetchall()
        if r[0] not in live
    ]


def _kind(method: str, stage: str | None) -> Any:
    from ..kinds.registry import by_method, kind

    described = kind(stage) if stage else by_method(method)
    assert described is not None, f"no ANN kind is served by {method}"  # check_build refused it
    return described


def opclass(target: Any, method: str, stage: str | None = None) -> str:
    """The operator class a build of ``method`` for stage kind ``stage`` uses."""
    return _kind(method, stage).opclass(target.vector_type, target.distance)


def index_key(target: Any, method: str, stage: str | None = None) -> sql.Composable:
    """What a build indexes: the column, or the expression a cast kind searches
    (``((col)::halfvec(N))``, ``(binary_quantize(col)::bit(N))``)."""
    cast = _kind(method, stage).cast_type
    if cast is None:
        return sql.Identifier(target.vector_column)
    return sql.SQL("({})").format(replace(target, search_type=cast).vector_expr())


def index_body(
    target: Any, method: str, stage: str | None, options: dict, label: str | None = None
) -> sql.Composable:
    """``USING method (key opclass[, label]) [WITH (option = 'value', ...)]``: a build of
    ``method`` for stage kind ``stage``, as the scratch copy builds it and as advise prints its
    DDL (``label``: a label-filtered design's label column; option names: the registry's)."""
    labels = sql.SQL("") if label is None else sql.SQL(", {}").format(sql.Identifier(label))
    key, ops = index_key(target, method, stage), sql.SQL(opclass(target, method, stage))
    body = sql.SQL("USING {} ({} {}{})").format(sql.SQL(method), key, ops, labels)
    if not options:
        return body
    pairs = (sql.SQL("{} = {}").format(sql.SQL(k), sql.Literal(str(v))) for k, v in options.items())
    return sql.SQL("{} WITH ({})").format(body, sql.SQL(", ").join(pairs))


def estimate_bytes(rows: int, dimension: int | None, vector_type: str, options: dict) -> int:
    """Memory an in-memory index build of ``rows`` vectors needs: per element its vector, its
    neighbour lists (2·m at layer 0, 8 bytes each) and ~100 bytes of bookkeeping, plus a quarter."""
    vec = (2 if vector_type == "halfvec" else 4) * int(dimension or 1536)
    m = int(options.get("m", options.get("num_neighbors", 16)))
    return int(rows * (vec + 2 * m * 8 + 100) * 1.25)


def sized_memory(rows: int, dimension: int | None, vector_type: str, options: dict) -> str:
    """``maintenance_work_mem`` for a build: the estimate, in MB, between 64MB and 16GB."""
    mb = -(-estimate_bytes(rows, dimension, vector_type, options) // 1048576)
    return f"{min(max(mb, 64), 16384)}MB"


SPILL_MARK = "no longer fits into maintenance_work_mem"
# access methods built without parallel maintenance workers: a DiskANN build with them took about
# twice the CPU time at 200,000 x 384 on a 2-core machine (issue "advise on a million rows in
# minutes"); the DDL advise prints carries the same SET (build_settings)
SERIAL_BUILDS = ("diskann",)


class Scratch:
    """``with Scratch(database, target) as s:`` — ``s.target`` is a Target over the copy;
    ``s.build(method, options)`` (re)builds the one index on it."""

    def __init__(
        self,
        database: Database,
        target: Any,
        *,
        maintenance_work_mem: str | None = None,
        build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
        snapshot: str | None = None,
        rows_seen: Any = None,
        stage: str | None = None,
    ) -> None:
        self.database, self.source = database, target
        # the sweep's exported snapshot (tuning/sweep/snapshot.py): the rows copied are those the
        # exact answer read (None: the table as it is when copied); rows_seen: their version
        # value there (a shared copy of other rows is not reused)
        self.snapshot, self.rows_seen = snapshot, rows_seen
        self.maintenance_work_mem = maintenance_work_mem
        self.build_timeout_s = float(build_timeout_s)
        self.schema = f"{SCRATCH_PREFIX}{os.getpid()}_{secrets.token_hex(3)}"
        self.conn: Any = None  # the autocommit psycopg connection, once entered
        self.target: Any = None
        self.index: str | None = None
        self._group_indexes: list[str] = []  # the last build's indexes (one per group: per_group)
        self.rows = 0
        self.warnings: list[str] = []
        self.carried: list[str] = []  # the table's group-filter indexes copied (scratch_indexes)
        self._old_term: Any = None
        self._whole: Any = None  # the copy's target over every group (before any scope)
        self._owner: Scratch | None = None  # shared(): the Scratch whose copy this one uses
        self._pooled = False  # shared(): this copy is the pool's, dropped when it ends
        self._built: tuple | None = None  # shared(): (method, options, stage) of the index
        self._info: dict = {}
        # a label-filtered kind (diskann-labels): the copy's label column, derived from the group
        # column (table/labels.py), and each group searched by its label
        self.labelled = labels.wanted(target, stage)
        self.labels: Any = None  # labels.Labels, once copied

    # ---- lifecycle ---------------------------------------------------------------------------
    def _key(self) -> str:
        from ..core.canonical import canonical_json

        src = copied_rows(self.source)
        key = [
            src.spec(),
            self.maintenance_work_mem,
            self.build_timeout_s,
            group_column(self.source),
        ]
        return canonical_json(key + (["labels"] if self.labelled else []))

    def _scoped(self, whole: Any) -> Any:
        column = group_column(self.source)
        scope = self.source.scope
        if column is None or scope is None:
            return whole
        if self.labels is not None:  # the group searched by its label
            return whole.scoped(self.labels.column, str(self.labels.label(scope[1])))
        return whole.scoped(column, scope[1])

    def __enter__(self) -> Scratch:
        if _SHARED is not None:
            owner = _SHARED.get(self._key())
            if owner is not None and owner.rows_seen == self.rows_seen:  # the pool's copy
                self._owner, self.schema, self.rows = owner, owner.schema, owner.rows
                self.labels = owner.labels
                self._whole, self.target = owner._whole, self._scoped(owner._whole)
                return self
        self._old_term = (
            signal.getsignal(signal.SIGTERM)
            if threading.current_thread() is threading.main_thread()
            else None
        )
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self.conn = self.database.connect(results=False, autocommit=True)
            with spent.charge("copies"):
                self._create_copy()
        except BaseException:
            self.close()
            raise
        if _SHARED is not None and self._key() not in _SHARED:
            _SHARED[self._key()] = self
            self._pooled = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._owner is None and not self._pooled:
            self.close()

    def close(self) -> None:
        """Drop the scratch schema (from a fresh connection: the build one may be busy)."""
        if self.conn is not None:
            try:
                self.conn.cancel()
            except Exception:
                pass
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None
        try:
            with self.database.connect(results=False, autocommit=True) as c:
                c.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
                )
        finally:
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)
                self._old_term = None

    def _create_copy(self) -> None:
        src = self.source
        c = self.conn
        try:
            c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
        except Exception as exc:
            raise DatabaseError(
                f"cannot create the scratch schema {self.schema} for build "
                f"sweeps: {first_line(exc)} (the role needs CREATE on the "
                "database)"
            ) from None
        src = copied_rows(self.source)
        column = group_column(self.source)
        where, params = src.where()
        shape, why = partitions.of_source(c, src)
        if why:
            self.warnings.append(f"the scratch copy of {src.qualified()} is not partitioned: {why}")
        c.use_snapshot(self.snapshot)  # (None: each transaction its own snapshot, as before)
        with c.transaction():
            labelled: sql.Composable = sql.SQL("")
            if self.labelled and column is not None:  # (read in the copy's snapshot)
                self.labels = labels.read(c, src, column)
                labelled = sql.SQL(", {} AS {}").format(
                    self.labels.expression(), sql.Identifier(self.labels.column)
                )
            select = sql.SQL("{}{}").format(
                partitions.select_rows(src, column, shape, labelled), where
            )
            partitions.fill(c, self.schema, SCRATCH_TABLE, shape, select, params)
        c.use_snapshot(None)
        if column is not None:  # the group filter served as the table serves it (its btree)
            from ..table import scratch_indexes

            self.carried, skipped = scratch_indexes.copy(c, src, self.schema, SCRATCH_TABLE, column)
            if skipped:
                self.warnings.append(
                    f"the scratch copy does not carry {', '.join(skipped)} of {src.qualified()}: "
                    "a plan that uses it on the table is not reproduced on the copy"
                )
        c.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(self.schema, SCRATCH_TABLE)))
        columns = [] if self.labels is None else [self.labels.column]
        self._whole = over_copy(
            src, f"{src.name} (scratch copy)", self.schema, label_columns=columns
        )
        self.target = self._scoped(self._whole)
        self.rows = c.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(self.schema, SCRATCH_TABLE))
        ).fetchone()[0]

    # ---- builds ------------------------------------------------------------------------------
    def _build_settings(self, method: str, options: dict | None = None) -> str:
        """Apply the build's settings to the open transaction (``set_config(…, true)``: nothing
        outlives the build's transaction, so nothing is left on a pooled server connection);
        return the maintenance_work_mem in force."""
        c = self.conn
        current = c.execute(
            "SELECT pg_size_bytes(current_setting('maintenance_work_mem'))"
        ).fetchone()[0]
        memory = self.maintenance_work_mem or sized_memory(
            self.rows, self.source.dimension, self.source.vector_type, options or {}
        )
        try:
            wanted = c.execute("SELECT pg_size_bytes(%s)", (memory,)).fetchone()[0]
        except Exception:
            raise InputError(
                f"'{memory}' is not a memory size (e.g. 1GB)", field=param("maintenance_work_mem")
            ) from None
        if wanted > current:
            c.execute("SELECT set_config('maintenance_work_mem', %s, true)", (memory,))
        elif self.maintenance_work_mem and wanted < current:
            once(self.warnings)(
                f"--maintenance-work-mem {memory} is below the server's "
                f"maintenance_work_mem; builds use the server's setting"
            )
        in_force = c.execute("SELECT current_setting('maintenance_work_mem')").fetchone()[0]
        if method in SERIAL_BUILDS:
            c.execute("SELECT set_config('max_parallel_maintenance_workers', '0', true)")
        if method == "hnsw":
            from ..table.fingerprint import extensions

            found = health.advisories(extensions(c))
            if found:
                c.execute("SELECT set_config('max_parallel_maintenance_workers', '0', true)")
                once(self.warnings)(
                    f"HNSW builds run without parallel workers: {found[0]['extension']} "
                    f"{found[0]['version']} has {found[0]['id']} in parallel HNSW builds"
                )
        return in_force

    def build(self, method: str, options: dict, label: str = "", stage: str | None = None) -> dict:
        """Drop the previous index, build ``method`` with ``options`` (for stage kind ``stage``:
        a cast kind's index is on its expression); return {"index", "build_ms",
        "index_bytes"}."""
        if self._owner is not None:  # shared(): the pool's copy builds (once per index)
            info = self._owner.build(method, options, label, stage)
            self.index = self._owner.index
            self.warnings = self._owner.warnings
            return info
        wanted = (method, sorted((str(k), str(v)) for k, v in options.items()), stage)
        if self._pooled and self._built == wanted:
            return dict(self._info)
        c = self.conn
        for old in self._group_indexes:  # the last build's (one per group: per_group)
            c.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(self.schema, old)))
        if self.index:
            self.index, self._group_indexes = None, []
            self._built = None
        with c.transaction(), spent.charge("builds"):  # the build's settings: transaction-scoped
            info = self._build_in_transaction(method, options, label, stage)
        self._built, self._info = wanted, dict(info)
        return info

    def _build_in_transaction(
        self, method: str, options: dict, label: str, stage: str | None
    ) -> dict:
        c = self.conn
        memory = self._build_settings(method, options)
        name = f"{SCRATCH_TABLE}_{method}"
        column = None if self.labels is None else self.labels.column
        stmt = sql.SQL("CREATE INDEX {{}} ON {} {}").format(
            sql.Identifier(self.schema, SCRATCH_TABLE),
            index_body(self.source, method, stage, options, column),
        )
        # the table's build per group (one partial index per tenant), kept on a grouped copy
        wheres = partitions.group_wheres(
            c, self.source, group_column(self.source), _kind(method, stage)
        )
        stmts, names = partitions.per_group(stmt, name, wheres, c)
        # the server's pid (behind a pooler, the client's backend_pid is the pooler's)
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        dog = Watchdog(self.database, pid, self.build_timeout_s + 5.0)
        notices: list[str] = []

        def on_notice(diag: Any) -> None:
            if SPILL_MARK in (diag.message_primary or ""):
                notices.append(diag.message_primary)

        c.add_notice_handler(on_notice)
        # the build's timeout, set just before it: it is the build's, not the reads before it
        # (a 1 ms one cancelled the extensions' read before the build began)
        c.execute(
            "SELECT set_config('statement_timeout', %s, true)",
            (f"{int(self.build_timeout_s * 1000)}ms",),
        )
        t0 = time.perf_counter()
        dog.start()
        try:
            for one in stmts:
                c.execute(one)
        except Exception as exc:
            if dog.fired or "statement timeout" in str(exc):
                raise DatabaseError(
                    f"building {method} index {label or options} exceeded {param('build_timeout')} "
                    f"{self.build_timeout_s:g}s and was cancelled (raise {param('build_timeout')}, or "
                    f"{param('maintenance_work_mem')}: DiskANN storage_layout=plain builds were seen to "
                    "hang with a small maintenance_work_mem)"
                ) from None
            msg = first_line(exc)
            if "out of bounds" in msg or "invalid value" in msg or "unrecognized parameter" in msg:
                raise InputError(
                    f"{method} {label or options}: {msg}", field=param("build")
                ) from None
            raise DatabaseError(
                f"building {method} index {label or options} failed: {msg}"
            ) from None
        finally:
            dog.cancel()
            c.remove_notice_handler(on_notice)
        if notices:
            once(self.warnings)(
                f"building {method} index {label or options} spilled: {notices[0]} "
                f"(maintenance_work_mem {memory}; the build is several times slower: raise "
                "--maintenance-work-mem)"
            )
        build_ms = (time.perf_counter() - t0) * 1000.0
        self.index, self._group_indexes = name, names
        size = sum(partitions.index_bytes(c, self.schema, n) for n in names)
        c.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(self.schema, SCRATCH_TABLE)))
        workers = c.execute("SELECT current_setting('max_parallel_maintenance_workers')")
        return {
            "index": name,
            "build_ms": build_ms,
            "index_bytes": int(size),
            "maintenance_work_mem": memory,
            "max_parallel_maintenance_workers": workers.fetchone()[0],
            "spilled": bool(notices),
        }


def _raise_interrupt(signum: Any, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
