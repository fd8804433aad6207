"""Database access: DSN resolution order, the embedded server's lifecycle, `pgeval init`
idempotence, and passwords kept out of messages."""

import re

import psycopg
import pytest

from evaluator.core import server
from evaluator.core.db import Database, redact


def test_resolution_order(monkeypatch, tmp_path):
    monkeypatch.delenv("PGEVAL_DSN", raising=False)
    monkeypatch.setenv("PGEVAL_DATADIR", str(tmp_path / "d"))
    db = Database.resolve()
    assert db.embedded and db.datadir == (tmp_path / "d").resolve()
    assert Database.resolve(datadir=str(tmp_path / "x")).datadir == (tmp_path / "x").resolve()
    monkeypatch.setenv("PGHOST", "/nowhere")
    db = Database.resolve()
    assert not db.embedded and db.dsn == "" and "PG*" in db.source
    monkeypatch.setenv("PGEVAL_DSN", "postgresql://u:secret@h/db")
    db = Database.resolve()
    assert db.dsn == "postgresql://u:secret@h/db" and "secret" not in db.describe()
    assert Database.resolve(dsn="postgresql://a@b/c").source == "--dsn"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("postgresql://user:s3cr3t@host:5432/db", "postgresql://user:***@host:5432/db"),
        (
            "postgres://user:p%40ss@host/db?sslmode=require",
            "postgres://user:***@host/db?sslmode=require",
        ),
        ("host=h user=u password=s3cr3t dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h password='a b c' dbname=d", "host=h password=*** dbname=d"),
        ("postgresql://user@host/db", "postgresql://user@host/db"),
        ("POSTGRESQL://user:s3cr3t@host/db", "POSTGRESQL://user:***@host/db"),
        ("postgresql://user:a@b@c@host:5432/db", "postgresql://user:***@host:5432/db"),
        ("host=h password='a b c", "host=h password=***"),
        (
            "http://u:k3y@h/v1?api_key=abc&x=1&token=def",
            "http://u:***@h/v1?api_key=***&x=1&token=***",
        ),
        ("Authorization: Bearer sk-0123456789", "Authorization: Bearer ***"),
    ],
)
def test_redact(text, expected):
    assert redact(text) == expected


def test_connection_error_names_no_password(pgeval):
    code, out, err = pgeval(
        "--dsn", "postgresql://alice:hunter2@127.0.0.1:1/kb?connect_timeout=2", "metrics", "x"
    )
    assert code == 1
    assert "hunter2" not in out + err and "cannot connect" in err and "***" in err
    assert "Traceback" not in err


def test_embedded_lifecycle_and_autostart(pgeval, tmp_path):
    datadir = str(tmp_path / "pg")
    code, out, _ = pgeval("--datadir", datadir, "db", "status")
    assert code == 3 and out.startswith("stopped")  # pg_ctl status's convention
    try:
        # a command that needs the server starts it
        code, out, err = pgeval("--datadir", datadir, "init")
        assert code == 0, err
        assert err.count("created a new, empty data directory") == 1 and datadir in err, err
        assert "PGEVAL_DATADIR" not in err  # --datadir named it
        assert "schema pgeval at revision" in out
        code, out, _ = pgeval("--datadir", datadir, "db", "uri")
        assert code == 0 and out.strip().splitlines()[-1].startswith("postgresql://")
        code, out, _ = pgeval("--datadir", datadir, "db", "start")
        assert code == 0 and out.startswith("already running")
        assert server.is_running(tmp_path / "pg")
        code, out, _ = pgeval("--datadir", datadir, "db", "status")
        assert code == 0 and out.startswith("running")
        # the data directory's size and schema pgeval's (issue 40, item 8)
        assert re.search(r"^data directory: [\d.]+ [kMG]B$", out, re.M), out
        assert re.search(r"^schema pgeval: revision \w+, [\d.]+ [kMG]B; 0 test set", out, re.M)
        # the host/port form a connection dialog asks for, which connects
        code, out, _ = pgeval("--datadir", datadir, "db", "uri", "--keywords")
        fields = dict(f.split("=", 1) for f in out.split())
        assert fields["port"].isdigit() and fields["host"] == datadir, out
        with psycopg.connect(out.strip()) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
    finally:
        code, out, _ = pgeval("--datadir", datadir, "db", "stop")
    assert code == 0 and out.startswith("stopped")
    assert not server.is_running(tmp_path / "pg")
    code, out, _ = pgeval("--datadir", datadir, "db", "stop")
    assert out.startswith("not running")


def test_running_server_read_as_pgserver_reads_it(database, tmp_path):
    """A command finds the running embedded server from postmaster.pid without importing
    pgserver: the same answer as pgserver's own reading, for a running server, a stale file
    (its process gone) and no file; a file being written is left to pgserver."""
    info = server._postmaster(database.datadir)
    assert info is not None and info.is_running()
    assert server._pid_file(database.datadir) == (True, info.get_uri())
    assert server.uri(database.datadir) == info.get_uri()
    copy = tmp_path / "pgdata"
    copy.mkdir()
    (copy / "PG_VERSION").write_text("18\n")
    assert server._pid_file(copy) == (False, None) and server.uri(copy) is None
    lines = (database.datadir / "postmaster.pid").read_text().splitlines()
    (copy / "postmaster.pid").write_text("\n".join(["999999999", *lines[1:]]) + "\n")
    assert server._pid_file(copy) == (False, None)
    assert not server.is_running(copy) and not server._postmaster(copy).is_running()
    (copy / "postmaster.pid").write_text("\n".join(lines[:3]) + "\n")  # still being written
    assert server._pid_file(copy) is None


def _catalog(conn):
    return (
        conn.execute(
            "SELECT p.oid::regprocedure::text, md5(pg_get_functiondef(p.oid)) "
            "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'pgeval' AND p.prokind <> 'a' ORDER BY 1"
        ).fetchall(),
        conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'pgeval' ORDER BY 1, 2"
        ).fetchall(),
        conn.execute("SELECT version_num FROM pgeval.alembic_version").fetchall(),
    )


def test_init_twice_changes_nothing(pgeval, conn):
    before = _catalog(conn)
    code, out, err = pgeval("init")
    assert code == 0, err
    assert "(was" not in out  # no revision change
    assert _catalog(conn) == before


def test_init_reports_extensions(pgeval):
    code, out, err = pgeval("init", "--format", "json")
    assert code == 0, err
    import json

    data = json.loads(out)
    assert data["extensions"]["vector"] and "vectorscale" in data["extensions"]
    assert data["sql_files"] == sorted(data["sql_files"])


def test_dsn_to_the_same_server(pgeval, database):
    code, out, err = pgeval("--dsn", database.uri(), "run", "list", "--format", "json")
    assert code == 0, err
    assert out.strip().startswith("[")


def test_commands_before_init_say_run_init(pgeval, tmp_path, monkeypatch):
    """A mistyped PGEVAL_DATADIR starts a new, empty server: the first command says so, and
    where, in one line of its own (issue 50); each command then says to run `pgeval init`."""
    datadir = tmp_path / "fresh"
    monkeypatch.setenv("PGEVAL_DATADIR", str(datadir))
    try:
        commands = (("metrics", "x"), ("run", "list"), ("stage-report", "x"), ("testset", "list"))
        for i, args in enumerate(commands):
            code, out, err = pgeval(*args)
            assert code == 1, args
            assert "pgeval init" in err and "Traceback" not in err, (args, err)
            created = [line for line in err.splitlines() if "new, empty data directory" in line]
            if i == 0:
                assert created == [
                    "pgeval: created a new, empty data directory for the embedded server: "
                    f"{datadir.resolve()} (PGEVAL_DATADIR)"
                ], err
            else:
                assert not created, err  # said once: the directory exists now
    finally:
        pgeval("db", "stop")
