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


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://alice:{PASSWORD}@127.0.0.1:1/kb?connect_timeout=3",
        f"postgres://alice:{quote(PASSWORD)}@nonexistent.invalid/kb?connect_timeout=3",
        f"host=127.0.0.1 port=1 user=alice password={PASSWORD} dbname=kb connect_timeout=3",
        f"host=127.0.0.1 port=1 user=alice password='{SPACED}' dbname=kb connect_timeout=3",
        f"host=127.0.0.1 port=1 user=alice PASSWORD = {PASSWORD} connect_timeout=3",
    ],
)
@pytest.mark.parametrize("how", ["--dsn", "--results-dsn", "PGEVAL_DSN"])
def test_unreachable_server_error_hides_password(dsn, how, database, pgeval, monkeypatch):
    prefix = []
    if how == "PGEVAL_DSN":
        monkeypatch.setenv("PGEVAL_DSN", dsn)
    else:
        prefix = [how, dsn]
    for args in (
        ["metrics", "r1"],
        ["run", "list"],
        ["init"],
        ["db", "status"],
        ["target", "add", "t", "--table", "x", "--id-column", "i", "--vector-column", "v"],
        ["run", "pipeline", "--testset", "t", "--target", "t", "--stages", "exact"],
    ):
        code, out, err = pgeval(*prefix, *args)
        _no_secret(out, err)
        if args[0] == "db" and how == "--results-dsn":
            continue  # `db status` is about the embedded server, which --dsn did not replace
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
    conn.execute(
        sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
            sql.Identifier(ROLE), sql.Literal(PASSWORD)
        )
    )
    uri = urlparse(database.uri())
    socket = parse_qs(uri.query)["host"][0]
    db = uri.path.lstrip("/")
    yield (
        f"postgresql://{ROLE}:{quote(PASSWORD)}@/{db}?host={quote(socket)}",
        f"host={socket} dbname={db} user={ROLE} password={PASSWORD}",
    )
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


def _stored_text(conn) -> str:
    """Every row of every pgeval table, as text."""
    parts = []
    for table in pgeval_counts(conn):
        parts += [
            r[0]
            for r in conn.execute(
                sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier("pgeval", table))
            ).fetchall()
        ]
    return "\n".join(parts)


@pytest.mark.parametrize("form", ["uri", "keywords"])
def test_password_never_leaves_the_dsn(form, secret_dsns, conn, pgeval, tmp_path):
    dsn = secret_dsns[0 if form == "uri" else 1]
    ensure_table(conn, "sec_kb", 300, 8)
    _, queries = vectors(300, 12, 8)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "query": f"question {i}",
                    "relevant": {f"c{i + 1}": 2, f"c{i + 40}": 1},
                    "embedding": [float(x) for x in v],
                }
            )
            + "\n"
            for i, v in enumerate(queries)
        ),
        encoding="utf-8",
    )
    commands = [
        ["init"],
        ["testset", "load", str(cases), "--name", "sec"],
        [
            "target",
            "add",
            "sec",
            "--table",
            "sec_kb",
            "--id-column",
            "id",
            "--vector-column",
            "embedding",
            "--text-column",
            "body",
        ],
        [
            "run",
            "pipeline",
            "--testset",
            "sec",
            "--target",
            "sec",
            "--stages",
            "exact,hnsw",
            "--repeat",
            "1",
            "--depth",
            "10",
            "--name",
            "sec-exp",
            "--format",
            "json",
        ],
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
    ] + [
        ["report", "sec-exp.hnsw.1", "--format", f, "--out", str(tmp_path / f"report.{f}")]
        + (["--no-plots"] if f == "html" else [])
        for f in ("json", "md", "html")
    ]
    for args in commands:
        code, out, err = pgeval("--dsn", dsn, *args)
        assert code == 0, (args, err)
        _no_secret(out, err)
    # errors from the real server, and a wrong database in the same DSN
    for args in (
        ["metrics", "nosuch"],
        [
            "run",
            "pipeline",
            "--testset",
            "sec",
            "--target",
            "sec",
            "--stages",
            "hnsw",
            "--set",
            "hnsw.ef_search=-1",
        ],
    ):
        code, out, err = pgeval("--dsn", dsn, *args)
        assert code == 1
        _no_secret(out, err)
    wrong = (
        dsn.replace("/postgres?", "/nosuchdb?")
        if form == "uri"
        else dsn.replace("dbname=postgres", "dbname=nosuchdb")
    )
    code, out, err = pgeval("--dsn", wrong, "run", "list")
    assert code == 1 and "nosuchdb" in err
    _no_secret(out, err)
    for path in tmp_path.glob("report.*"):
        _no_secret(path.read_text(encoding="utf-8"))
    stored = _stored_text(conn)
    assert "sec-exp.hnsw.1" in stored
    _no_secret(stored)


# -- a corpus of malformed DSNs and URLs: the driver's message quotes the bad token -------------

CORE = "Zq9s3cr3tK7w"  # in every password below; no 5 of its characters may be printed


def _no_core(*texts: str) -> None:
    pieces = {CORE[i : i + 5] for i in range(len(CORE) - 4)}
    for text in texts:
        leaked = [p for p in pieces if p in text]
        assert not leaked, (leaked, text)


MALFORMED_DSNS = [
    f"postgresql://u:50%off-{CORE}@127.0.0.1:1/db",  # invalid percent-encoded token
    f"postgresql://u:{CORE[:5]}%zz{CORE[5:]}@127.0.0.1:1/db",
    f"postgresql://u:two words {CORE}@127.0.0.1:1/db",  # spaces in a URI password
    f"POSTGRESQL://u:{CORE}@127.0.0.1:1/db",  # libpq knows no upper-case scheme
    f"Postgres://u:{CORE}@127.0.0.1:1/db",
    f"postgresql://u:ab@{CORE}@127.0.0.1:1/db?connect_timeout=3",  # '@' in the password
    f"postgresql://u:{CORE}@127.0.0.1:1/db?foo=bar",  # an unknown parameter
    f"postgresql://u:{CORE}@127.0.0.1:1/db?sslmode=bogus",
    f"postgresql://u:{CORE}@127.0.0.1:port/db",
    f"postgresql://u@127.0.0.1:1/db?password={CORE}&foo=1",
    f"postgresql://u@127.0.0.1:1/db?password=50%off{CORE}",
    f"host=127.0.0.1 port=1 password='ab cd {CORE}",  # unterminated quote
    f"host=127.0.0.1 port=1 password={CORE} user='x",
    f"host=127.0.0.1 port=1 password = {CORE} junk",  # a word without '='
    f"host=127.0.0.1 port=1 password='two words {CORE}' bogus=1",
    f"host=127.0.0.1 port=1 PASSWORD={CORE} connect_timeout=x",  # unknown keyword PASSWORD
    f"host=127.0.0.1 port=1 password={CORE} connect_timeout=3",  # well-formed, unreachable
]


@pytest.mark.parametrize("dsn", MALFORMED_DSNS)
@pytest.mark.parametrize("how", ["--dsn", "--results-dsn", "PGEVAL_DSN", "PGEVAL_RESULTS_DSN"])
def test_malformed_dsn_is_masked_in_the_drivers_message(dsn, how, database, pgeval, monkeypatch):
    prefix = []
    if how.startswith("PGEVAL"):
        monkeypatch.setenv(how, dsn)
    else:
        prefix = [how, dsn]
    for args in (["run", "list"], ["init"], ["metrics", "r1", "--format", "json"]):
        code, out, err = pgeval(*prefix, *args)
        _no_core(out, err)
        assert code == 1, (args, out, err)
        assert err.startswith("pgeval: ") and err.count("\n") == 1, err
        assert "Traceback" not in err
    if "RESULTS" not in how.upper():
        code, out, err = pgeval(*prefix, "db", "uri")
        _no_core(out, err)
        assert code == 0 and out.count("\n") == 1, (out, err)


@pytest.fixture
def http_404():
    """A real HTTP server that answers every POST with 404 (echoing the path it was asked)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            raw = json.dumps({"error": {"message": f"no route {self.path}"}}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def sec_kb(clean, conn, pgeval, tmp_path):
    """Test set `sec` (with texts) and target `sec` for the HTTP embedder and reranker cases."""
    ensure_table(conn, "sec_kb", 300, 8)
    _, queries = vectors(300, 4, 8)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "query": f"question {i}",
                    "relevant": {f"c{i + 1}": 1},
                    "embedding": [float(x) for x in v],
                }
            )
            + "\n"
            for i, v in enumerate(queries)
        ),
        encoding="utf-8",
    )
    assert pgeval("testset", "load", str(cases), "--name", "sec")[0] == 0
    assert (
        pgeval(
            "target",
            "add",
            "sec",
            "--table",
            "sec_kb",
            "--id-column",
            "id",
            "--vector-column",
            "embedding",
            "--text-column",
            "body",
        )[0]
        == 0
    )


HTTP_CASES = [
    ("base", "{url}/v1?api_key=" + CORE),
    ("base", "{url}/v1?x=1&key=" + CORE),
    ("base", "{url}/v1?token=" + CORE + "&x=1"),
    ("base", "{url}/v1?access_token=50%off" + CORE),
    ("base", "http://user:" + CORE + "@127.0.0.1:1/v1"),
    ("base", "HTTP://user:" + CORE + "@127.0.0.1:1/v1"),
    ("base", "ftp://user:" + CORE + "@127.0.0.1/v1"),
    ("base", "http://user:ab@" + CORE + "@127.0.0.1:1/v1"),
    ("rerank", "http:{url}/rerank?api_key=" + CORE),
    ("rerank", "tei:{url}/rerank?key=" + CORE),
    ("rerank", "http://user:" + CORE + "@127.0.0.1:1/rerank"),
    ("rerank", "cohere:https://u:" + CORE + "@h.invalid/rerank"),
    ("rerank", "nosuch:https://u:" + CORE + "@h.invalid/rerank"),
]


@pytest.mark.parametrize("kind,spec", HTTP_CASES)
def test_http_urls_with_keys_are_masked(kind, spec, sec_kb, http_404, pgeval, conn, monkeypatch):
    monkeypatch.setenv("RERANK_API_KEY", "")
    spec = spec.format(url=http_404)
    if kind == "base":
        runs = [
            [
                "embed",
                "--testset",
                "sec",
                "--embedder",
                "openai:m",
                "--base-url",
                spec,
                "--api-key-env",
                "",
                "--recompute",
            ],
            [
                "run",
                "pipeline",
                "--testset",
                "sec",
                "--target",
                "sec",
                "--stages",
                "exact",
                "--embedder",
                "openai:m",
                "--base-url",
                spec,
                "--api-key-env",
                "",
            ],
        ]
    else:
        runs = [
            [
                "run",
                "pipeline",
                "--testset",
                "sec",
                "--target",
                "sec",
                "--repeat",
                "1",
                "--stages",
                "exact,rerank",
                "--reranker",
                spec,
            ],
            [
                "run",
                "pipeline",
                "--testset",
                "sec",
                "--target",
                "sec",
                "--repeat",
                "1",
                "--stages",
                "exact,rerank",
                "--opt",
                f"rerank:reranker={spec}",
            ],
        ]
    for args in runs:
        code, out, err = pgeval(*args)
        _no_core(out, err)
        assert code == 1, (args, out, err)
        lines = [x for x in err.splitlines() if not x.startswith("rep ")]  # progress bars
        assert len(lines) == 1 and lines[0].startswith("pgeval: error: "), err
        assert "Traceback" not in err
    # runs and fingerprints hold the URL masked; only pgeval.experiment.config keeps the spec as
    # given (`run resume` calls the same URL again), and no command prints that column
    conn.execute("UPDATE pgeval.experiment SET config = '{}'")
    _no_core(_stored_text(conn))


def test_key_in_a_working_reranker_url_is_not_stored(sec_kb, pgeval, conn, monkeypatch):
    """A reranker URL whose query carries the key works; the run's parameters and the
    reports show it masked."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            doc = {
                "results": [
                    {"index": i, "relevance_score": 1.0 / (i + 1)}
                    for i in range(len(body["documents"]))
                ]
            }
            raw = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    monkeypatch.setenv("RERANK_API_KEY", "")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/rerank?api_key={CORE}"
        code, out, err = pgeval(
            "run",
            "pipeline",
            "--testset",
            "sec",
            "--target",
            "sec",
            "--repeat",
            "1",
            "--stages",
            "exact,rerank",
            "--reranker",
            url,
            "--name",
            "keyexp",
            "--format",
            "json",
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert code == 0, err
    _no_core(out, err)
    params = conn.execute(
        "SELECT params FROM pgeval.run WHERE name = 'keyexp.rerank.1'"
    ).fetchone()[0]
    assert params["reranker"].endswith("/rerank?api_key=***")
    for fmt in ("json", "md"):
        code, out, err = pgeval("report", "keyexp.rerank.1", "--format", fmt)
        assert code == 0, err
        _no_core(out, err)


def test_a_keyword_dsn_ending_in_its_password_keeps_the_messages_separator(database, pgeval):
    """`password=*** connection failed` read as one phrase (issue 40, item 8): the ':' after
    the masked DSN is the message's, not part of the password."""
    dsn = f"host=127.0.0.1 port=1 user=alice connect_timeout=3 password={PASSWORD}"
    code, out, err = pgeval("--dsn", dsn, "run", "list")
    assert code == 1
    _no_secret(out, err)
    assert "password=***: " in err, err


# -- the typo family (issue 50): a scheme misspelled or missing, a keyword mistyped ------------

TYPO_URIS = [
    f"{scheme}app:{CORE}@127.0.0.1:1/kbdb"
    for scheme in (
        "postgres//",  # the colon missing
        "postgresql//",
        "postgresql:/",  # a slash missing
        "postgres:/",
        "postgres:",  # both slashes missing
        "postgres:///",
        "postgres:://",
        "PostgreSQL//",
        "postgres/",
        "//",
        "",  # no scheme at all
    )
] + [
    f"postgres//app:{CORE}@127.0.0.1:1/kbdb?sslmode=disable",
    f"postgres//app:ab/{CORE}@127.0.0.1:1/kbdb",  # a '/' in the password
    f"postgresql:/app:ab@{CORE}@127.0.0.1:1/kbdb",  # an '@' in the password
]
TYPO_KEYWORDS = [
    f"host=127.0.0.1 port=1 user=app password={CORE} dbname",  # a word without '='
    f"host=127.0.0.1 port=1 password {CORE} dbname=kb",  # the '=' forgotten
    f"host=127.0.0.1 port=1 password='{CORE} dbname=kb",  # unterminated quote
    f'host=127.0.0.1 port=1 password="ab {CORE}" dbname=kb',  # double quotes libpq does not know
    f"host=127.0.0.1 port=1 pasword={CORE} dbname=kb",  # the keyword mistyped
    f"host=127.0.0.1 port=1 passwd='{CORE}' connect_timeout=3",
]


@pytest.mark.parametrize("dsn", TYPO_URIS + TYPO_KEYWORDS)
def test_a_mistyped_dsn_never_prints_its_password(dsn, database, pgeval, monkeypatch):
    """`--dsn 'postgres//app:PASSWORD@host/kb'` printed the password twice (pgeval's "cannot
    connect to ..." and libpq's quote of the token): every spelling, through --dsn and
    PGEVAL_DSN, from every command family, says one line with no piece of the password."""
    families = (
        ["init"],
        ["target", "list"],
        ["testset", "list"],
        ["sweep", "--target", "kb", "--stage", "hnsw", "--sample-queries", "10"],
        ["run", "list"],
        ["db", "uri"],
    )
    for how in ("--dsn", "PGEVAL_DSN"):
        monkeypatch.delenv("PGEVAL_DSN", raising=False)
        prefix = ["--dsn", dsn] if how == "--dsn" else []
        if how == "PGEVAL_DSN":
            monkeypatch.setenv("PGEVAL_DSN", dsn)
        for args in families:
            code, out, err = pgeval(*prefix, *args)
            _no_core(out, err)
            if args[0] == "db":
                assert code == 0 and "***" in out, (how, out, err)
                continue
            assert code == 1, (how, args, out, err)
            assert err.startswith("pgeval: ") and err.count("\n") == 1, err
