"""`pgeval init`: extensions, Alembic ``upgrade head`` for the tables, then every ``sql/*.sql``
in file-name order. Idempotent: running it twice changes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import resources
from .errors import DatabaseError, first_line, param
from .held_lock import HeldLock

if TYPE_CHECKING:
    from alembic.config import Config

    from .db import Database

SCHEMA = "pgeval"
INIT_LOCK = 1885824375  # the advisory lock that serialises concurrent `pgeval init` calls
REQUIRED_EXTENSIONS = ("vector",)
OPTIONAL_EXTENSIONS = ("vectorscale", "pg_textsearch")


@dataclass
class InitReport:
    extensions: dict[str, str | None] = field(default_factory=dict)  # name -> installed version
    database: str | None = None  # the results database, where ``extensions`` were read
    # the knowledge base's own database and extension versions, when results live elsewhere
    # (--results-dsn): another server may have another pgvector
    kb_database: str | None = None
    kb_extensions: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # optional ones not on the server
    revision_before: str | None = None
    revision_after: str | None = None
    sql_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what a superuser must still do


def _alembic_config(connection: Any) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.migrations_dir()))
    cfg.attributes["connection"] = connection
    return cfg


# The revisions of migrations/versions, oldest first, as this pgeval ships them: a command checks
# the schema against them without importing Alembic (only `pgeval init` does).
# tests/test_migrations.py keeps them equal to Alembic's revision chain: a new revision adds its id.
REVISIONS = (
    "0001",
    "0002",
    "0003_order",
    "0004_service",
    "0004_owntable",
    "0005_storage",
    "0006_checksum",
    "0007_run_rows",
    "0008_list_storage",
    "0009_probe",
    "0010_probe_via",
    "0011_ground_truth_versions",
    "0012_captured",
    "0014_grades",
)
HEAD_REVISION = REVISIONS[-1]

_REVISION = "SELECT version_num FROM pgeval.alembic_version"


def current_revision(conn: Any) -> str | None:
    """The Alembic revision of schema pgeval, or None when pgeval was never installed: one
    SELECT. Where it fails for want of the schema or the table, the connection is left as it
    was (the transaction the SELECT began rolled back; inside the caller's own transaction, the
    SELECT ran in a savepoint)."""
    import contextlib

    import psycopg
    from psycopg.pq import TransactionStatus

    began = not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
    inside = conn.info.transaction_status != TransactionStatus.IDLE
    try:
        with conn.transaction() if inside else contextlib.nullcontext():
            row = conn.execute(_REVISION).fetchone()
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        if began:
            conn.rollback()
        return None
    return row[0] if row else None


def create_sql(name: str) -> str:
    """The statement a superuser runs once to create extension ``name``."""
    return (
        f'CREATE EXTENSION IF NOT EXISTS "{name}" CASCADE;'
        if name != "vector"
        else "CREATE EXTENSION IF NOT EXISTS vector;"
    )


def _where(conn: Any) -> tuple[str, str]:
    """(role, database) of a connection."""
    return tuple(conn.execute("SELECT current_user::text, current_database()::text").fetchone())


def superuser_needed(name: str, role: str, databases: list[str]) -> DatabaseError:
    """One message: who may not create ``name``, and the exact SQL a superuser must run once in
    each database that needs it (pgvector is not a trusted extension: only a superuser, or
    a role the server's administrator trusts, can create it)."""
    import shlex

    dbs = " and in ".join(f'database "{d}"' for d in databases)
    cmds = "; ".join(
        f"psql -d {shlex.quote(d)} -c {shlex.quote(create_sql(name))}" for d in databases
    )
    return DatabaseError(
        f'role "{role}" may not create extension "{name}" (pgvector is not a trusted '
        f"extension: only a superuser can create it). Have a superuser run once, in {dbs}: "
        f"{create_sql(name)}  (e.g. {cmds}), then run `pgeval init` again"
    )


def _has_extension(conn: Any, name: str) -> str | None:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", (name,)).fetchone()
    return row[0] if row else None


def ensure_extensions(conn: Any, report: InitReport, kb_conn: Any = None) -> None:
    """Create the extensions the server has; ``kb_conn``: the knowledge base's database when
    it is another one (checked for pgvector, never changed)."""
    import psycopg

    available = dict(
        conn.execute("SELECT name, default_version FROM pg_available_extensions").fetchall()
    )
    kb_missing = []
    if kb_conn is not None and _has_extension(kb_conn, "vector") is None:
        kb_missing = [_where(kb_conn)[1]]
    for name in REQUIRED_EXTENSIONS + OPTIONAL_EXTENSIONS:
        if name not in available:
            if name in REQUIRED_EXTENSIONS:
                raise DatabaseError(
                    f"extension '{name}' (pgvector) is not available on this server; "
                    f"install it or use the embedded server (omit {param('dsn')})"
                )
            report.missing.append(name)
            continue
        installed = _has_extension(conn, name)
        if installed is None:
            try:
                with conn.transaction():
                    conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}" CASCADE')
            except psycopg.errors.InsufficientPrivilege:
                role, dbname = _where(conn)
                if name in REQUIRED_EXTENSIONS:
                    raise superuser_needed(name, role, [dbname, *kb_missing]) from None
                report.missing.append(
                    f'{name} (role "{role}" may not create it: a superuser '
                    f"may run {create_sql(name)})"
                )
                continue
            except Exception as exc:  # e.g. pg_textsearch without shared_preload_libraries
                if name in REQUIRED_EXTENSIONS:
                    raise DatabaseError(
                        f"cannot create extension '{name}': {first_line(exc)}"
                    ) from None
                report.missing.append(f"{name} ({first_line(exc)})")
                continue
            installed = _has_extension(conn, name)
        report.extensions[name] = installed
    if kb_missing:
        report.warnings.append(
            f"extension vector is not installed in the knowledge base's "
            f'database "{kb_missing[0]}": a superuser must run '
            f"{create_sql('vector')} there before a vector stage can run"
        )


def upgrade_tables(dsn: str, revision: str = "head") -> None:
    _alembic(dsn, "upgrade", revision)


def downgrade_tables(dsn: str, revision: str) -> None:
    _alembic(dsn, "downgrade", revision)


def _alembic(dsn: str, step: str, revision: str) -> None:
    """Alembic's ``upgrade`` or ``downgrade`` (``step``) to ``revision``, in one transaction."""
    from alembic import command

    from .db import sqlalchemy_engine

    engine = sqlalchemy_engine(dsn)
    with engine.begin() as connection:
        getattr(command, step)(_alembic_config(connection), revision)
    engine.dispose()


# Every function of schema pgeval except the trigger functions (the tables' triggers depend on
# them, and their signature never changes). sql/*.sql re-creates them all.
_API_FUNCTIONS = """
SELECT p.oid::regprocedure::text
  FROM pg_proc p
 WHERE p.pronamespace = 'pgeval'::regnamespace
   AND p.prokind = 'f' AND p.prorettype <> 'trigger'::regtype
   AND NOT EXISTS (SELECT 1 FROM pg_depend d
                    WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
 ORDER BY 1
"""


# two API functions of one name: an earlier signature left beside the current one (the API
# defines no overloads)
_OVERLOADED = f"""
SELECT split_part(f, '(', 1) FROM ({_API_FUNCTIONS}) AS a(f)
 GROUP BY split_part(f, '(', 1) HAVING count(*) > 1
"""


class _EarlierSignature(Exception):
    """An earlier pgeval's function left as an overload of the current one (:func:`apply_sql`)."""


def drop_api_functions(conn: Any) -> list[str]:
    """Drop the SQL API so that sql/*.sql can re-create it whatever an earlier pgeval defined:
    ``CREATE OR REPLACE`` cannot change a function's return type or argument names, so an upgrade
    that changed a signature would otherwise fail. Nothing but the API depends on these functions
    outside the API itself and the views sql/*.sql defines (dropped first); any other dependency
    makes the DROP fail loudly rather than cascade."""
    import re

    # the views sql/*.sql defines over the API (pgeval.probe_history, the dashboards' views) are
    # the API's too: dropped first and re-created with it (a migration's views are not touched)
    views = sorted(
        {
            m
            for path in resources.sql_files()
            for m in re.findall(
                r"CREATE\s+OR\s+REPLACE\s+VIEW\s+pgeval\.(\w+)", path.read_text("utf-8"), re.I
            )
        }
    )
    for view in views:
        conn.execute(f"DROP VIEW IF EXISTS pgeval.{view}")  # (names: pgeval's own files)
    names = [r[0] for r in conn.execute(_API_FUNCTIONS).fetchall()]
    if names:
        # one statement: dependencies among the API's own functions (an argument's default that
        # calls another) are allowed, any other dependent object makes it fail (no CASCADE).
        # regprocedure text is schema-qualified and quoted as needed.
        conn.execute("DROP FUNCTION " + ", ".join(names))
    return names


def _apply_files(conn: Any, report: InitReport) -> None:
    for path in resources.sql_files():
        with conn.transaction():
            conn.execute(path.read_text(encoding="utf-8"))
        report.sql_files.append(path.name)


def apply_sql(conn: Any, report: InitReport) -> None:
    """Apply every ``sql/*.sql`` in file-name order, in one transaction: a concurrent reader sees
    the old API or the new one, never a mix, and a failure leaves the old one in place.

    ``CREATE OR REPLACE`` keeps each function's owner and grants. Where an earlier pgeval defined
    a function with another signature (return type, argument names, defaults), PostgreSQL refuses
    to replace it (SQLSTATE 42P13); where it had fewer arguments, ``CREATE OR REPLACE`` adds an
    overload beside the old one, and a call that both match is ambiguous (42725, or two functions
    of one name left after the files: the API has no overloads). Then the whole API is dropped and
    re-created instead, in the same transaction, owned by the role running init (functions no
    longer shipped go too)."""
    import psycopg

    with conn.transaction():
        try:
            with conn.transaction():
                _apply_files(conn, report)
                if conn.execute(_OVERLOADED).fetchone() is not None:
                    raise _EarlierSignature
        except (
            psycopg.errors.InvalidFunctionDefinition,
            psycopg.errors.AmbiguousFunction,
            _EarlierSignature,
        ):
            report.sql_files.clear()
            drop_api_functions(conn)
            try:
                _apply_files(conn, report)
            except Exception as exc:
                raise DatabaseError(f"{_failing_file(report)}: {first_line(exc)}") from None
        except Exception as exc:
            raise DatabaseError(f"{_failing_file(report)}: {first_line(exc)}") from None


def _failing_file(report: InitReport) -> str:
    """The file being applied when an error came: the one after the last applied."""
    files = [p.name for p in resources.sql_files()]
    return files[len(report.sql_files)] if len(report.sql_files) < len(files) else "sql"


def init(db: Database) -> InitReport:
    """Create or upgrade schema pgeval on ``db`` (a :class:`evaluator.core.db.Database`)."""
    report = InitReport()
    dsn = db.results_uri()
    with db.connect(autocommit=True) as conn, HeldLock(conn, (INIT_LOCK,)):
        # one init at a time: concurrent `pgeval init` calls serialise on this lock
        report.database = _where(conn)[1]
        if db.results_dsn and db.results_dsn != db.uri():
            with db.connect(results=False, autocommit=True) as kb_conn:
                ensure_extensions(conn, report, kb_conn)
                report.kb_database = _where(kb_conn)[1]
                report.kb_extensions = dict(
                    kb_conn.execute(
                        "SELECT extname, extversion FROM pg_extension WHERE extname = ANY(%s) "
                        "ORDER BY extname",
                        (list(REQUIRED_EXTENSIONS + OPTIONAL_EXTENSIONS),),
                    ).fetchall()
                )
        else:
            ensure_extensions(conn, report)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        report.revision_before = current_revision(conn)
        upgrade_tables(dsn)
        report.revision_after = current_revision(conn)
        apply_sql(conn, report)
    return report


def head_revision() -> str:
    """The newest Alembic revision this pgeval ships (migrations/versions)."""
    return HEAD_REVISION


def ensure_installed(conn: Any) -> None:
    """Raise a clear error when schema pgeval is missing or older than this pgeval."""
    rev = current_revision(conn)
    if rev is None:
        raise DatabaseError("schema pgeval is not installed in this database: run `pgeval init`")
    head = head_revision()
    if rev != head:
        if rev not in REVISIONS:
            raise DatabaseError(
                f"schema pgeval is at revision {rev}, which this pgeval does not "
                f"know (it ships up to {head}): a newer pgeval installed it"
            )
        raise DatabaseError(
            f"schema pgeval is at revision {rev}, this pgeval needs {head}: run "
            "`pgeval init` to upgrade it"
        )
