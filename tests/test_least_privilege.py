"""Least privilege (docs/least-privilege.md): pgeval works as a role that may only SELECT the
knowledge-base table and write schema pgeval — which may live in another database
(--results-dsn) — reads the knowledge base in READ ONLY transactions, and cancels any statement
past --statement-timeout (recorded with every run)."""

from __future__ import annotations

import json

import pytest
from robust_kb import dsn as _dsn
from robust_kb import ensure_table, pgeval_counts, vectors

from evaluator.core.db import Database
from evaluator.core.install import init

ROLE = "pgeval_least"
KB = "lp_kb"
RESULTS_DB = "pgeval_results_lp"

# What docs/least-privilege.md tells a DBA to run (after `pgeval init` as an owner).
GRANTS = """
GRANT USAGE ON SCHEMA public TO {role};
GRANT SELECT ON public.{kb} TO {role};
GRANT USAGE ON SCHEMA pgeval TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA pgeval TO {role};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgeval TO {role};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgeval TO {role};
"""


def _cases(tmp_path, n: int = 12):
    _, queries = vectors(300, n, 8)
    path = tmp_path / "cases.jsonl"
    path.write_text(
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
    return path


@pytest.fixture
def role(database, clean, conn):
    ensure_table(conn, KB, 300, 8)
    conn.execute(
        f"DROP OWNED BY {ROLE}"
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone()
        else "SELECT 1"
    )
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
    conn.execute(f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
    conn.execute(GRANTS.format(role=ROLE, kb=KB))
    yield ROLE
    conn.execute(f"DROP OWNED BY {ROLE}")
    conn.execute(f"DROP ROLE {ROLE}")


def _privileges(conn) -> tuple:
    return conn.execute(
        "SELECT has_table_privilege(%(r)s, %(t)s, 'INSERT'), has_table_privilege(%(r)s, %(t)s, "
        "'UPDATE'), has_table_privilege(%(r)s, %(t)s, 'DELETE'), "
        "has_table_privilege(%(r)s, %(t)s, 'SELECT')",
        {"r": ROLE, "t": KB},
    ).fetchone()


def _flow(pgeval, prefix: list[str], cases, name: str) -> dict:
    for args in (
        ["testset", "load", str(cases), "--name", "lp"],
        [
            "target",
            "add",
            "lp",
            "--table",
            KB,
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
            "lp",
            "--target",
            "lp",
            "--stages",
            "exact,hnsw",
            "--repeat",
            "1",
            "--depth",
            "10",
            "--name",
            name,
            "--statement-timeout",
            "30s",
        ],
    ):
        code, out, err = pgeval(*prefix, *args)
        assert code == 0, (args, err)
    code, out, err = pgeval(*prefix, "metrics", f"{name}.hnsw.1", "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_select_only_role_runs_the_whole_flow(role, database, conn, pgeval, tmp_path):
    assert _privileges(conn) == (False, False, False, True)
    doc = _flow(pgeval, ["--dsn", _dsn(database, ROLE)], _cases(tmp_path), "lp-exp")
    assert doc["summary"]["recall@10"] > 0
    params = conn.execute("SELECT params FROM pgeval.run WHERE name = 'lp-exp.hnsw.1'").fetchone()[
        0
    ]
    assert params["settings"]["statement_timeout"] == "30s"  # recorded with the run
    # the role cannot take what it was not given: --isolate-index (drop the other ANN index
    # inside the stage's transaction) needs the table's owner
    conn.execute(
        f"CREATE INDEX lp_kb_ivf ON {KB} USING ivfflat (embedding vector_cosine_ops) "
        "WITH (lists = 4)"
    )
    try:
        code, out, err = pgeval(
            "--dsn",
            _dsn(database, ROLE),
            "run",
            "pipeline",
            "--testset",
            "lp",
            "--target",
            "lp",
            "--stages",
            "hnsw",
            "--isolate-index",
            "--repeat",
            "1",
            "--name",
            "lp-iso",
        )
    finally:
        conn.execute("DROP INDEX lp_kb_ivf")
    assert code == 1 and "needs the table's owner" in err
    assert err.count("\n") == 2  # the --isolate-index warning + error
    assert (
        conn.execute("SELECT count(*) FROM pgeval.run WHERE name LIKE 'lp-iso%'").fetchone()[0] == 0
    )


def test_scratch_copies_need_create_and_say_so_before_any_work(role, database, conn, pgeval):
    """advise and sweep --build build on scratch copies in schemas of their own: with only the
    grants above (no CREATE on the database), each refuses in one line naming the GRANT, before
    measuring anything or storing a query set (issue 50: advise failed after its first design
    with a bare "permission denied for database")."""
    dsn = ["--dsn", _dsn(database, ROLE)]
    code, _, err = pgeval(
        *dsn, "target", "add", "lp", "--table", KB, "--id-column", "id",
        "--vector-column", "embedding",
    )  # fmt: skip
    assert code == 0, err
    before = pgeval_counts(conn)
    dbname = conn.execute("SELECT current_database()").fetchone()[0]
    grant = f'GRANT CREATE ON DATABASE "{dbname}" TO "{ROLE}"'
    for args in (
        ["advise", "--target", "lp", "--sample-queries", "10", "--designs", "hnsw"],
        ["sweep", "--target", "lp", "--sample-queries", "10", "--stage", "hnsw"]
        + ["--build", "m=8", "--param", "hnsw.ef_search=10,20"],
    ):
        code, out, err = pgeval(*dsn, *args)
        assert code == 1, (args, out, err)
        assert len(err.strip().splitlines()) == 1 and grant in err, (args, err)
        assert "Traceback" not in err
        assert pgeval_counts(conn) == before, args  # nothing stored
        leftover = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pgeval\\_scratch%'"
        ).fetchone()[0]
        assert leftover == 0


def test_results_in_another_database(role, database, conn, pgeval, tmp_path):
    """Knowledge base in one database (SELECT only), schema pgeval in another (--results-dsn)."""
    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (RESULTS_DB,)).fetchone():
        conn.execute(f"CREATE DATABASE {RESULTS_DB}")
    results_db = Database(dsn=_dsn(database, dbname=RESULTS_DB))
    init(results_db)  # as an owner, once
    with results_db.connect(autocommit=True) as rconn:
        rconn.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
        rconn.execute(
            GRANTS.split("GRANT USAGE ON SCHEMA pgeval")[0]
            .replace("GRANT SELECT ON public.{kb} TO {role};", "")
            .format(role=ROLE, kb=KB)
        )
        rconn.execute(
            "GRANT USAGE ON SCHEMA pgeval"
            + GRANTS.split("GRANT USAGE ON SCHEMA pgeval")[1].format(role=ROLE)
        )
        before_main = pgeval_counts(conn)
        prefix = ["--dsn", _dsn(database, ROLE), "--results-dsn", _dsn(database, ROLE, RESULTS_DB)]
        doc = _flow(pgeval, prefix, _cases(tmp_path), "lp-remote")
        assert doc["summary"]["recall@10"] > 0
        assert pgeval_counts(conn) == before_main  # nothing written beside the KB
        n = rconn.execute(
            "SELECT count(*) FROM pgeval.run WHERE name LIKE 'lp-remote.%'"
        ).fetchone()[0]
        assert n == 2
        # the knowledge base itself is not in the results database
        assert rconn.execute("SELECT to_regclass(%s)", (KB,)).fetchone()[0] is None
        rconn.execute(f"DROP OWNED BY {ROLE}")  # its grants there, before DROP ROLE


def test_knowledge_base_is_read_in_read_only_transactions(clean, conn, pgeval, tmp_path):
    """A view whose reading would write (a volatile function inserting into a log): inside the
    READ ONLY transaction the write is refused, so the stage fails and nothing is logged."""
    ensure_table(conn, KB, 300, 8)
    conn.execute("CREATE TABLE IF NOT EXISTS lp_log (at timestamptz)")
    conn.execute("TRUNCATE lp_log")
    conn.execute(
        "CREATE OR REPLACE FUNCTION lp_touch() RETURNS int LANGUAGE plpgsql VOLATILE AS "
        "$$BEGIN INSERT INTO lp_log VALUES (now()); RETURN 1; END$$"
    )
    conn.execute(f"CREATE OR REPLACE VIEW lp_trap AS SELECT k.*, lp_touch() AS touched FROM {KB} k")
    code, out, err = pgeval("testset", "load", str(_cases(tmp_path)), "--name", "lp")
    assert code == 0, err
    code, out, err = pgeval(
        "target",
        "add",
        "trap",
        "--table",
        "lp_trap",
        "--id-column",
        "id",
        "--vector-column",
        "embedding",
    )
    assert code == 1 and "read-only transaction" in err, err
    assert conn.execute("SELECT count(*) FROM lp_log").fetchone()[0] == 0
    # as if the view had turned into a trap after the target was added
    from evaluator.targets.targets import Target, save

    save(
        conn,
        Target(
            name="trap",
            table="lp_trap",
            id_column="id",
            vector_column="embedding",
            vector_type="vector",
            dimension=8,
        ),
    )
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "lp",
        "--target",
        "trap",
        "--stages",
        "exact",
        "--repeat",
        "1",
        "--name",
        "lp-trap",
    )
    assert code == 1 and "read-only transaction" in err, err
    assert "Traceback" not in err
    assert conn.execute("SELECT count(*) FROM lp_log").fetchone()[0] == 0


def test_change_log_needs_the_owner_and_serves_a_select_only_role(
    role, database, conn, pgeval, tmp_path
):
    """`target track` as the select-only role: one line naming what it needs, nothing created
    on the table. Tracked by the owner, the role reads the log (no grant needed) and its runs
    reuse the checksum without a scan."""
    prefix = ["--dsn", _dsn(database, ROLE)]
    _flow(pgeval, prefix, _cases(tmp_path), "lp-log")
    code, out, err = pgeval(*prefix, "target", "track", "lp")
    assert code == 1 and not out
    assert err.count("\n") == 1 and "cannot track table" in err and "owner" in err
    assert conn.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass", (KB,)
    ).fetchone() == (0,)
    code, out, err = pgeval("target", "track", "lp")  # as the owner
    assert code == 0, err
    try:
        for name in ("lp-log2", "lp-log3"):  # the first fills the log's entry, the second uses it
            code, out, err = pgeval(
                *prefix, "run", "pipeline", "--testset", "lp", "--target", "lp", "--stages",
                "exact", "--repeat", "1", "--name", name,
            )  # fmt: skip
            assert code == 0, err
        note = conn.execute(
            "SELECT fingerprint -> 'info' ->> 'checksum' FROM pgeval.run WHERE name = %s",
            ("lp-log3.exact.1",),
        ).fetchone()[0]
        assert "change log unchanged" in note
    finally:
        code, out, err = pgeval("target", "untrack", "lp")
        assert code == 0, err
