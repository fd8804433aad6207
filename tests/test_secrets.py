"""Passwords in a DSN never reach output, error messages, stored rows (runs, experiments,
fingerprints, targets), or reports — whether the server cannot be reached or accepts the login.

The embedded server trusts its unix socket, so a role created WITH a password logs in and the
password is ignored: good enough to prove pgeval never copies it anywhere."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, quote, urlparse

import pytest
from psycopg import sql

from robust_kb import ensure_table, pgeval_counts, vectors

PASSWORD = "Pw-s3cr3t-X9z"
SPACED = "two words s3cr3t"
ROLE = "pgeval_secret_user"


def _no_secret(*texts: str) -> None:
    for text in texts:
        for secret in (PASSWORD, quote(PASSWORD), SPACED):
            assert secret not in text, text


@pytest.mark.parametrize("dsn", [
    f"postgresql://alice:{PASSWORD}@127.0.0.1:1/kb?connect_timeout=3",
    f"postgres://alice:{quote(PASSWORD)}@nonexistent.invalid/kb?connect_timeout=3",
    f"host=127.0.0.1 port=1 user=alice password={PASSWORD} dbname=kb connect_timeout=3",
    f"host=127.0.0.1 port=1 user=alice password='{SPACED}' dbname=kb connect_timeout=3",
    f"host=127.0.0.1 port=1 user=alice PASSWORD = {PASSWORD} connect_timeout=3",
])
@pytest.mark.parametrize("how", ["--dsn", "--results-dsn", "PGEVAL_DSN"])
def test_unreachable_server_error_hides_password(dsn, how, database, pgeval, monkeypatch):
    prefix = []
    if how == "PGEVAL_DSN":
        monkeypatch.setenv("PGEVAL_DSN", dsn)
    else:
        prefix = [how, dsn]
    for args in (["metrics", "r1"], ["run", "list"], ["init"], ["db", "status"],
                 ["target", "add", "t", "--table", "x", "--id-column", "i", "--vector-column", "v"],
                 ["run", "pipeline", "--testset", "t", "--target", "t", "--stages", "exact"]):
        code, out, err = pgeval(*prefix, *args)
        _no_secret(out, err)
        if args[0] == "db" and how == "--results-dsn":
            continue      # `db status` is about the embedded server, which --dsn did not replace
        assert code == 1, (args, out, err)
        assert err.startswith("pgeval: ") and err.count("\n") == 1, err


def test_pgpassword_and_db_uri_hide_password(database, pgeval, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", "1")
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "3")
    code, out, err = pgeval("run", "list")
    assert code == 1
    _no_secret(out, err)
    monkeypatch.delenv("PGPASSWORD")
    code, out, err = pgeval("--dsn", f"postgresql://u:{PASSWORD}@127.0.0.1:1/x", "db", "uri")
    assert code == 0 and out.strip() == "postgresql://u:***@127.0.0.1:1/x"


@pytest.fixture
def secret_dsns(database, clean, conn):
    """(URI, key=value DSN) of a role with a password on the embedded server."""
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
        sql.Identifier(ROLE), sql.Literal(PASSWORD)))
    uri = urlparse(database.uri())
    socket = parse_qs(uri.query)["host"][0]
    db = uri.path.lstrip("/")
    yield (f"postgresql://{ROLE}:{quote(PASSWORD)}@/{db}?host={quote(socket)}",
           f"host={socket} dbname={db} user={ROLE} password={PASSWORD}")
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


def _stored_text(conn) -> str:
    """Every row of every pgeval table, as text."""
    parts = []
    for table in pgeval_counts(conn):
        parts += [r[0] for r in conn.execute(sql.SQL("SELECT t::text FROM {} t").format(
            sql.Identifier("pgeval", table))).fetchall()]
    return "\n".join(parts)


@pytest.mark.parametrize("form", ["uri", "keywords"])
def test_password_never_leaves_the_dsn(form, secret_dsns, conn, pgeval, tmp_path):
    dsn = secret_dsns[0 if form == "uri" else 1]
    ensure_table(conn, "sec_kb", 300, 8)
    _, queries = vectors(300, 12, 8)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"q{i}", "query": f"question {i}",
                                         "relevant": {f"c{i + 1}": 2, f"c{i + 40}": 1},
                                         "embedding": [float(x) for x in v]}) + "\n"
                             for i, v in enumerate(queries)), encoding="utf-8")
    commands = [
        ["init"],
        ["testset", "load", str(cases), "--name", "sec"],
        ["target", "add", "sec", "--table", "sec_kb", "--id-column", "id", "--vector-column",
         "embedding", "--text-column", "body"],
        ["run", "pipeline", "--testset", "sec", "--target", "sec", "--stages", "exact,hnsw",
         "--repeat", "1", "--depth", "10", "--name", "sec-exp", "--format", "json"],
        ["metrics", "sec-exp.hnsw.1", "--format", "json", "--per-query"],
        ["stage-report", "sec-exp", "--format", "json"],
        ["fingerprint", "--target", "sec", "--format", "json"],
        ["fingerprint", "--run", "sec-exp.hnsw.1", "--format", "json"],
        ["diff", "sec-exp.exact.1", "sec-exp.hnsw.1", "--format", "json"],
        ["compare", "sec-exp.exact.1", "sec-exp.hnsw.1", "--format", "json"],
        ["health", "--target", "sec", "--format", "json"],
        ["run", "list", "--format", "json"],
        ["run", "export", "sec-exp.hnsw.1", "--format", "jsonl"],
        ["db", "uri"],
    ] + [["report", "sec-exp.hnsw.1", "--format", f, "--out", str(tmp_path / f"report.{f}")]
         + (["--no-plots"] if f == "html" else []) for f in ("json", "md", "html")]
    for args in commands:
        code, out, err = pgeval("--dsn", dsn, *args)
        assert code == 0, (args, err)
        _no_secret(out, err)
    # errors from the real server, and a wrong database in the same DSN
    for args in (["metrics", "nosuch"], ["run", "pipeline", "--testset", "sec", "--target", "sec",
                                         "--stages", "hnsw", "--set", "hnsw.ef_search=-1"]):
        code, out, err = pgeval("--dsn", dsn, *args)
        assert code == 1
        _no_secret(out, err)
    wrong = dsn.replace("/postgres?", "/nosuchdb?") if form == "uri" else dsn.replace(
        "dbname=postgres", "dbname=nosuchdb")
    code, out, err = pgeval("--dsn", wrong, "run", "list")
    assert code == 1 and "nosuchdb" in err
    _no_secret(out, err)
    for path in tmp_path.glob("report.*"):
        _no_secret(path.read_text(encoding="utf-8"))
    stored = _stored_text(conn)
    assert "sec-exp.hnsw.1" in stored
    _no_secret(stored)
