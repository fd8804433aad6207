"""`pgeval init` as a database owner who is not a superuser (the embedded server's pgvector is, as
everywhere, not a trusted extension): one message with the exact SQL a superuser must run once,
exit 1, nothing created; after the superuser ran it, init works. (tests/test_pg15.py checks the
same on Debian's PostgreSQL 15, with a separate results database.)"""

from __future__ import annotations

import pytest
from robust_kb import dsn as _dsn

ROLE = "pgver_owner"
DB = "pgver_owner_db"


@pytest.fixture
def owner_db(database, conn):
    conn.execute(f"DROP DATABASE IF EXISTS {DB}")
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
    conn.execute(f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
    conn.execute(f"CREATE DATABASE {DB} OWNER {ROLE}")
    yield _dsn(database, ROLE, DB)
    conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


def test_owner_init_prints_the_superuser_sql(database, owner_db, pgeval):
    import psycopg

    code, out, err = pgeval("--dsn", owner_db, "init")
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 1 and len(lines) == 1, err
    assert (
        f'role "{ROLE}" may not create extension "vector" (pgvector is not a trusted '
        f"extension: only a superuser can create it). Have a superuser run once, in database "
        f'"{DB}": CREATE EXTENSION IF NOT EXISTS vector;'
    ) in lines[0]
    assert f"psql -d {DB} -c 'CREATE EXTENSION IF NOT EXISTS vector;'" in lines[0]
    with psycopg.connect(_dsn(database, dbname=DB), autocommit=True) as su:
        assert su.execute("SELECT to_regnamespace('pgeval') IS NULL").fetchone()[0]
        su.execute("CREATE EXTENSION IF NOT EXISTS vector;")  # what init said, as superuser
    code, out, err = pgeval("--dsn", owner_db, "init")
    assert code == 0, err
    assert "schema pgeval at revision" in out
    # the optional extensions the owner may not create: named, with the statement
    assert (
        'vectorscale (role "pgver_owner" may not create it: a superuser may run '
        'CREATE EXTENSION IF NOT EXISTS "vectorscale" CASCADE;)' in err
    )
