"""Shared fixtures: one real embedded PostgreSQL (pgvector, pgvectorscale, pg_textsearch) for the
whole test session, schema pgeval installed once; never mocks.

- ``database``: the :class:`evaluator.core.db.Database` (embedded server in a temporary directory).
- ``conn``: an autocommit psycopg connection to it.
- ``clean``: empties schema pgeval's data before the test (tables stay).
- ``pgeval``: runs the CLI in-process: ``code, out, err = pgeval("metrics", "r1")``.
- ``shared_dir``: ``../shared`` of the checkout, or the test is skipped when it is absent.
- ``en_us_database``: a second database on the same server whose collation is en_US.UTF-8 (what
  most production servers use), schema pgeval installed; ``en_us_conn``: an autocommit connection
  to it with schema pgeval's data emptied. Skipped only when the machine lacks the locale.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

for _var in (
    "PGEVAL_DSN",
    "PGEVAL_RESULTS_DSN",
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGDATABASE",
    "PGUSER",
    "PGSERVICE",
    "PGPASSWORD",
):
    os.environ.pop(_var, None)

_TMP = Path(tempfile.mkdtemp(prefix="pgeval-test-"))
os.environ["PGEVAL_DATADIR"] = str(_TMP / "pgdata")

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
DATA = Path(__file__).resolve().parent / "data"


def pytest_runtest_setup(item):
    """A prerequisite CI requires (tests/prerequisites.py, ``PGEVAL_REQUIRE``) fails its tests."""
    marker = item.get_closest_marker("prerequisite_missing")
    if marker is not None:
        import prerequisites

        prerequisites.fail(*marker.args)


def pytest_sessionfinish(session, exitstatus):
    """Remove the session's temporary directory (the embedded server's data directory is 225 MB),
    after making sure no server still runs in it."""
    from evaluator.core import server

    datadir = _TMP / "pgdata"
    if datadir.exists():
        try:
            server.stop(datadir)
        except Exception:  # noqa: BLE001 - already stopped, or never fully created
            pass
    shutil.rmtree(_TMP, ignore_errors=True)


@pytest.fixture(scope="session")
def database():
    from evaluator.core import server
    from evaluator.core.db import Database
    from evaluator.core.install import init

    db = Database.resolve()
    init(db)
    yield db
    server.stop(db.datadir)


@pytest.fixture
def conn(database):
    with database.connect(autocommit=True) as c:
        yield c


@pytest.fixture
def clean(database):
    with database.connect(autocommit=True) as c:
        c.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
    return database


EN_US_DB = "pgeval_en_us"


@pytest.fixture(scope="session")
def en_us_database(database):
    import psycopg
    from psycopg.conninfo import make_conninfo

    from evaluator.core.db import Database
    from evaluator.core.install import init

    with database.connect(autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {EN_US_DB}")
        try:
            c.execute(
                f"CREATE DATABASE {EN_US_DB} TEMPLATE template0 ENCODING 'UTF8' "
                "LOCALE 'en_US.UTF-8'"
            )
        except psycopg.Error as exc:
            if "locale" not in str(exc).lower():
                raise
            import prerequisites

            prerequisites.skip(
                "locale",
                "the locale en_US.UTF-8 is not installed on this machine (Debian: "
                "apt-get install locales, enable it in /etc/locale.gen, locale-gen, then "
                f"start the server): {str(exc).strip().splitlines()[0]}",
            )
    db = Database(dsn=make_conninfo(database.uri(), dbname=EN_US_DB))
    with db.connect(autocommit=True) as c:
        assert (
            c.execute(
                "SELECT datcollate FROM pg_database WHERE datname = current_database()"
            ).fetchone()[0]
            == "en_US.UTF-8"
        )
    init(db)
    return db


@pytest.fixture
def en_us_conn(en_us_database):
    with en_us_database.connect(autocommit=True) as c:
        c.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
        yield c


@pytest.fixture
def pgeval(database):
    """Run the CLI in-process and return (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    from evaluator.cli import main

    def run(*args: str, input: str | None = None):
        argv = list(args) if len(args) != 1 or " " not in args[0] else shlex.split(args[0])
        runner = CliRunner()
        with runner.isolation(input=input) as streams:
            code = main(argv)
        out, err = streams[0].getvalue().decode(), streams[1].getvalue().decode()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def shared_dir():
    if not (SHARED / "data" / "cranfield").is_dir():
        pytest.skip("../shared/data/cranfield is not present (a user's clone has no ../shared)")
    return SHARED


@pytest.fixture
def tmp_file(tmp_path):
    """Write text (or bytes) to a file in tmp_path and return its path."""

    def write(name: str, content: str | bytes) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
        return p

    return write
