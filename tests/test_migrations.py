"""Migrations (Alembic, migrations/versions): upgrade an empty database, downgrade to base and
upgrade again, and `pgeval init` on a database left at an older revision upgrades it in place,
keeping its data. Each test gets a fresh database on the embedded server."""

from __future__ import annotations

import json

import pytest
from robust_kb import dsn, fresh_database

from evaluator.core import resources
from evaluator.core.db import Database
from evaluator.core.errors import DatabaseError
from evaluator.core.install import (
    HEAD_REVISION,
    REVISIONS,
    current_revision,
    downgrade_tables,
    ensure_installed,
    head_revision,
    init,
    upgrade_tables,
)

TABLES_0001 = {
    "testset",
    "query",
    "qrel",
    "query_embedding",
    "target",
    "experiment",
    "run",
    "result",
    "query_timing",
    "query_plan",
    "answer",
    "refusal_phrase",
}


def _tables(conn) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'pgeval' AND c.relkind IN ('r', 'p', 'v')"
        ).fetchall()
    }


def _run_columns(conn) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'pgeval.run'::regclass AND attnum > 0 "
            "AND NOT attisdropped"
        ).fetchall()
    }


@pytest.fixture
def fresh(database, conn, request):
    name = "pgeval_mig_" + request.node.name.split("[")[0][5:][:40]
    fresh_database(conn, name)
    db = Database(dsn=dsn(database, dbname=name))
    yield db
    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


HEAD = "0014_grades"


def test_head_is_the_byte_order_revision():
    assert head_revision() == HEAD


def test_shipped_revisions_are_alembics():
    """A command checks the schema against ``REVISIONS`` without importing Alembic: they are
    Alembic's revision chain of migrations/versions, oldest first, and its head is the last."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(resources.migrations_dir()))
    assert HEAD_REVISION == REVISIONS[-1] == scripts.get_current_head()
    chain = [s.revision for s in scripts.walk_revisions()]  # newest first
    assert tuple(reversed(chain)) == REVISIONS


def test_current_revision_leaves_the_connection_as_it_was(fresh):
    """One SELECT; without the schema it fails, and the connection is left as it was: idle, or
    in the caller's transaction with its work (the SELECT ran in a savepoint)."""
    from psycopg.pq import TransactionStatus

    with fresh.connect() as c:
        assert current_revision(c) is None
        assert c.info.transaction_status == TransactionStatus.IDLE
        c.execute("CREATE TEMP TABLE kept (x int)")
        assert current_revision(c) is None
        assert c.info.transaction_status == TransactionStatus.INTRANS
        assert c.execute("SELECT count(*) FROM kept").fetchone() == (0,)
        c.commit()
    with fresh.connect(autocommit=True) as c:
        c.execute("CREATE SCHEMA pgeval")  # the schema without the table
        assert current_revision(c) is None
        with pytest.raises(DatabaseError, match="not installed"):
            ensure_installed(c)
    init(fresh)
    with fresh.connect() as c:
        c.execute("SELECT 1")
        assert current_revision(c) == HEAD
        assert c.info.transaction_status == TransactionStatus.INTRANS
        c.rollback()
        c.execute("UPDATE pgeval.alembic_version SET version_num = '0012_from_a_newer_pgeval'")
        with pytest.raises(DatabaseError) as info:
            ensure_installed(c)
        assert str(info.value) == (
            "schema pgeval is at revision 0012_from_a_newer_pgeval, which this pgeval does not "
            f"know (it ships up to {HEAD}): a newer pgeval installed it"
        )


def test_upgrade_from_an_empty_database(fresh):
    with fresh.connect(autocommit=True) as c:
        assert current_revision(c) is None
        with pytest.raises(DatabaseError, match="not installed"):
            ensure_installed(c)
    report = init(fresh)
    assert (report.revision_before, report.revision_after) == (None, HEAD)
    assert report.sql_files and "vector" in report.extensions
    with fresh.connect(autocommit=True) as c:
        assert _tables(c) >= TABLES_0001 | {"run_progress", "alembic_version"}
        assert {"pid", "host", "heartbeat_at"} <= _run_columns(c)
        ensure_installed(c)
        # the SQL API works on the new tables
        assert (
            c.execute("SELECT count(*) FROM pgeval.summary(0, ARRAY['recall@10'], 1)").fetchone()
            is not None
        )
    again = init(fresh)  # idempotent
    assert (again.revision_before, again.revision_after) == (HEAD, HEAD)


def test_downgrade_to_base_and_upgrade_again(fresh, pgeval):
    init(fresh)
    uri = fresh.uri()
    downgrade_tables(uri, "0001")
    with fresh.connect(autocommit=True) as c:
        assert current_revision(c) == "0001"
        assert "run_progress" not in _tables(c)
        assert not {"pid", "host", "heartbeat_at"} & _run_columns(c)
        with pytest.raises(DatabaseError, match=f"at revision 0001, this pgeval needs {HEAD}"):
            ensure_installed(c)
    downgrade_tables(uri, "base")
    with fresh.connect(autocommit=True) as c:
        assert current_revision(c) is None
        assert _tables(c) <= {"alembic_version"}
    upgrade_tables(uri)
    report = init(fresh)  # the SQL API comes back with the tables
    assert report.revision_after == HEAD
    with fresh.connect(autocommit=True) as c:
        assert _tables(c) >= TABLES_0001 | {"run_progress"}
    # and the whole schema works: a test set, a run, its metrics
    code, out, err = pgeval("--dsn", uri, "metrics", "nosuch")
    assert code == 1 and "no run named 'nosuch'" in err


def test_init_upgrades_an_older_revision_and_keeps_data(fresh, pgeval, tmp_path):
    uri = fresh.uri()
    with fresh.connect(autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute("CREATE SCHEMA pgeval")
    upgrade_tables(uri, "0001")  # a database set up by an older pgeval
    with fresh.connect(autocommit=True) as c:
        assert current_revision(c) == "0001"
        tid = c.execute(
            "INSERT INTO pgeval.testset (name, content_hash, source_format, "
            "n_queries, n_judgements) VALUES ('old', 'h', 'test', 1, 1) "
            "RETURNING testset_id"
        ).fetchone()[0]
        c.execute(
            "INSERT INTO pgeval.query (testset_id, query_id, position) VALUES (%s, 'q1', 1)", (tid,)
        )
        c.execute("INSERT INTO pgeval.qrel VALUES (%s, 'q1', 'c1', 2, NULL)", (tid,))
        rid = c.execute(
            "INSERT INTO pgeval.run (name, testset_id, stage, order_rule, status) "
            "VALUES ('old-run', %s, 'import', 'as given', 'complete') "
            "RETURNING run_id",
            (tid,),
        ).fetchone()[0]
        c.execute("INSERT INTO pgeval.result VALUES (%s, 'q1', 1, 'c1', 1.0)", (rid,))
    # commands that need the new schema say so instead of failing on a missing column
    code, out, err = pgeval(
        "--dsn", uri, "run", "pipeline", "--testset", "old", "--stages", "exact", "--target", "t"
    )
    assert code == 1 and f"at revision 0001, this pgeval needs {HEAD}: run `pgeval init`" in err, (
        err
    )
    code, out, err = pgeval("--dsn", uri, "init", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["revision_before"], doc["revision_after"]) == ("0001", HEAD)
    with fresh.connect(autocommit=True) as c:
        c.execute("SELECT pgeval.refresh_ideal(testset_id) FROM pgeval.testset")
        assert "run_progress" in _tables(c)
        assert c.execute(
            "SELECT pid, host, heartbeat_at, status FROM pgeval.run WHERE name = 'old-run'"
        ).fetchone() == (None, None, None, "complete")
    code, out, err = pgeval("--dsn", uri, "metrics", "old-run", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["recall@3"] == 1.0


def test_init_replaces_functions_that_gained_an_argument(fresh, pgeval):
    """An earlier pgeval's function with fewer arguments (this stop's ``p_judged_only``, added
    last with a default) is not replaced by ``CREATE OR REPLACE`` but overloaded: a view calling
    it with the earlier arguments is then ambiguous ("function pgeval.stage_summary(bigint) is not
    unique"), and a call from Python would be. init drops the earlier API and re-creates it: one
    function of each name."""
    init(fresh)
    with fresh.connect(autocommit=True) as c:
        for name in ("stage_summary", "summary"):
            args = c.execute(
                "SELECT pg_get_function_identity_arguments(p.oid) FROM pg_proc p "
                "WHERE p.pronamespace = 'pgeval'::regnamespace AND p.proname = %s",
                (name,),
            ).fetchone()[0]
            earlier = args.rsplit(", p_judged_only boolean", 1)[0]  # before the argument
            assert earlier != args, args
            c.execute(
                f"CREATE FUNCTION pgeval.{name}({earlier}) RETURNS integer "
                "LANGUAGE sql AS 'SELECT 1'"
            )
    code, out, err = pgeval("--dsn", fresh.uri(), "init")
    assert code == 0, err
    with fresh.connect(autocommit=True) as c:
        counts = c.execute(
            "SELECT proname, count(*) FROM pg_proc WHERE pronamespace = 'pgeval'::regnamespace "
            "AND proname IN ('stage_summary', 'summary') GROUP BY proname ORDER BY proname"
        ).fetchall()
    assert counts == [("stage_summary", 1), ("summary", 1)]


def test_init_replaces_functions_whose_signature_changed(fresh, pgeval):
    """An earlier pgeval's SQL API may differ in return type or argument names, which
    ``CREATE OR REPLACE`` cannot change: init drops the old API and re-creates it, in one
    transaction, and keeps the data; a function no longer shipped goes too."""
    init(fresh)
    with fresh.connect(autocommit=True) as c:
        c.execute(
            "INSERT INTO pgeval.testset (name, content_hash, source_format) "
            "VALUES ('kept', 'h', 'test')"
        )
        # an older definition: same arguments, another return type and argument names
        c.execute("DROP FUNCTION pgeval.match_text(text)")
        c.execute(
            "CREATE FUNCTION pgeval.match_text(p_old text) RETURNS integer "
            "LANGUAGE sql AS 'SELECT 1'"
        )
        c.execute(
            "CREATE FUNCTION pgeval.retired_helper(integer) RETURNS integer "
            "LANGUAGE sql AS 'SELECT $1'"
        )
        # an older trigger body that fills no grades
        c.execute(
            "CREATE OR REPLACE FUNCTION pgeval.result_fill_grades() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$"
        )
    code, out, err = pgeval("--dsn", fresh.uri(), "init")
    assert code == 0, err
    with fresh.connect(autocommit=True) as c:
        assert (
            c.execute("SELECT to_regprocedure('pgeval.retired_helper(integer)')").fetchone()[0]
            is None
        )
        rettype = c.execute(
            "SELECT prorettype::regtype::text FROM pg_proc "
            "WHERE oid = to_regprocedure('pgeval.match_text(text)')"
        ).fetchone()
        assert rettype is not None and rettype[0] == "text"
        assert (
            c.execute("SELECT count(*) FROM pgeval.testset WHERE name = 'kept'").fetchone()[0] == 1
        )
        # the current trigger body is back: a written result gets its judged grade
        tid = c.execute("SELECT testset_id FROM pgeval.testset WHERE name = 'kept'").fetchone()[0]
        c.execute(
            "INSERT INTO pgeval.query (testset_id, query_id, position) VALUES (%s, 'q1', 1)", (tid,)
        )
        c.execute("INSERT INTO pgeval.qrel VALUES (%s, 'q1', 'c1', 2, NULL)", (tid,))
        rid = c.execute(
            "INSERT INTO pgeval.run (name, testset_id, stage, order_rule) "
            "VALUES ('r', %s, 'import', 'as given') RETURNING run_id",
            (tid,),
        ).fetchone()[0]
        c.execute(
            "INSERT INTO pgeval.result (run_id, query_id, rank, chunk_id) "
            "VALUES (%s, 'q1', 1, 'c1')",
            (rid,),
        )
        assert (
            c.execute("SELECT grade FROM pgeval.result WHERE run_id = %s", (rid,)).fetchone()[0]
            == 2
        )


def test_a_failing_sql_file_leaves_the_old_api_in_place(fresh, monkeypatch, tmp_path):
    """The API is replaced in one transaction: if a file fails, nothing was dropped."""
    from evaluator.core import resources

    init(fresh)
    bad = tmp_path / "sql"
    bad.mkdir()
    for f in resources.sql_files():
        (bad / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    (bad / "999_broken.sql").write_text("SELECT * FROM no_such_table_here;", encoding="utf-8")
    monkeypatch.setattr(resources, "sql_dir", lambda: bad)
    with pytest.raises(DatabaseError, match="999_broken.sql"):
        init(fresh)
    with fresh.connect(autocommit=True) as c:
        assert (
            c.execute("SELECT to_regprocedure('pgeval.match_text(text)')").fetchone()[0] is not None
        )
        assert (
            c.execute(
                "SELECT to_regprocedure('pgeval.summary(bigint, text[], integer, boolean)')"
            ).fetchone()[0]
            is not None
        )


ID_COLUMNS = {
    ("query", "query_id"),
    ("qrel", "query_id"),
    ("qrel", "chunk_id"),
    ("query_embedding", "query_id"),
    ("result_list", "query_id"),
    ("result_list", "chunk_ids"),
    ("query_timing", "query_id"),
    ("query_plan", "query_id"),
    ("answer", "query_id"),
    ("answer", "cited"),
    ("answer", "supported"),
    ("run_progress", "query_id"),
}


def _collations(conn) -> dict[tuple[str, str], str]:
    return {
        (t, c): coll
        for t, c, coll in conn.execute(
            "SELECT cl.relname, a.attname, co.collname FROM pg_attribute a "
            "JOIN pg_class cl ON cl.oid = a.attrelid JOIN pg_namespace n ON n.oid = cl.relnamespace "
            "JOIN pg_collation co ON co.oid = a.attcollation "
            "WHERE n.nspname = 'pgeval' AND cl.relkind = 'r' AND a.attnum > 0"
        ).fetchall()
        if (t, c) in ID_COLUMNS
    }


def test_byte_order_revision_keeps_data_on_a_language_collation(
    database, en_us_database, conn, pgeval
):
    """0003_order on an en_US.UTF-8 database set up by an older pgeval: every id column becomes
    COLLATE "C" with its rows kept (keys and indexes rebuilt), ties then break in byte order;
    downgrading gives the database's collation back, data still there."""
    name = "pgeval_mig_order"
    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    conn.execute(f"CREATE DATABASE {name} TEMPLATE template0 LOCALE 'en_US.UTF-8'")
    db = Database(dsn=dsn(database, dbname=name))  # en_us_database: skipped without the locale
    uri = db.uri()
    try:
        with db.connect(autocommit=True) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS vector")
            c.execute("CREATE SCHEMA pgeval")
        upgrade_tables(uri, "0002")
        with db.connect(autocommit=True) as c:
            tid = c.execute(
                "INSERT INTO pgeval.testset (name, content_hash, source_format) "
                "VALUES ('old', 'h', 'test') RETURNING testset_id"
            ).fetchone()[0]
            c.execute(
                "INSERT INTO pgeval.query (testset_id, query_id, position) VALUES (%s, 'q1', 1)",
                (tid,),
            )
            c.execute("INSERT INTO pgeval.qrel VALUES (%s, 'q1', 'b1', 1, NULL)", (tid,))
            rid = c.execute(
                "INSERT INTO pgeval.run (name, testset_id, stage, order_rule, status) "
                "VALUES ('old-run', %s, 'import', 'as given', 'complete') "
                "RETURNING run_id",
                (tid,),
            ).fetchone()[0]
            for rank, chunk in enumerate(["a1", "B1", "b1"], 1):
                c.execute(
                    "INSERT INTO pgeval.result VALUES (%s, 'q1', %s, %s, 1.0)", (rid, rank, chunk)
                )
            c.execute(
                "INSERT INTO pgeval.answer (run_id, query_id, answer, cited, supported) "
                "VALUES (%s, 'q1', 'x', '{a1,B1}', '{B1}')",
                (rid,),
            )
            c.execute("INSERT INTO pgeval.run_progress VALUES (%s, 'q1')", (rid,))
            assert c.execute(
                "SELECT array_agg(chunk_id ORDER BY chunk_id) FROM pgeval.result"
            ).fetchone()[0] == ["a1", "b1", "B1"]  # en_US order
            assert set(_collations(c).values()) == {"default"}
        assert init(db).revision_after == HEAD
        with db.connect(autocommit=True) as c:
            assert _collations(c) == {col: "C" for col in ID_COLUMNS}
            assert c.execute(
                "SELECT array_agg(chunk_id ORDER BY chunk_id) FROM pgeval.result"
            ).fetchone()[0] == ["B1", "a1", "b1"]  # byte order
            assert c.execute("SELECT cited, supported FROM pgeval.answer").fetchone() == (
                ["a1", "B1"],
                ["B1"],
            )
            assert c.execute("SELECT count(*) FROM pgeval.run_progress").fetchone()[0] == 1
            c.execute("SELECT pgeval.refresh_ideal(testset_id) FROM pgeval.testset")
        code, out, err = pgeval("--dsn", uri, "metrics", "old-run", "--format", "json")
        assert code == 0, err
        assert json.loads(out)["summary"]["mrr@20"] == pytest.approx(1 / 3)
        downgrade_tables(uri, "0002")
        with db.connect(autocommit=True) as c:
            assert set(_collations(c).values()) == {"default"}
            assert c.execute("SELECT count(*) FROM pgeval.result").fetchone()[0] == 3
    finally:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_storage_revision_keeps_runs_and_their_metrics(fresh, pgeval):
    """0005_storage on a database written at 0004_owntable, with data in it: every stored result
    comes back through the view with its rank, chunk, score and judged grade, each run's counts
    are filled in, and the metrics of the converted runs equal the reference implementation to
    1e-12 (the same numbers the row table gave); a run imported after the upgrade agrees with
    them, and downgrading gives the row table back with every row."""
    import random

    from reference_metrics import mean

    from evaluator.measure import metrics

    uri = fresh.uri()
    with fresh.connect(autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute("CREATE SCHEMA pgeval")
    upgrade_tables(uri, "0004_owntable")
    rnd = random.Random(12)
    qids = [f"q{i}" for i in range(30)]
    qrels = {q: {f"c{rnd.randrange(60)}": rnd.randint(0, 3) for _ in range(8)} for q in qids}
    runs = {
        name: {
            q: rnd.sample([f"c{i}" for i in range(60)], rnd.randint(1, 25))
            for q in qids
            if rnd.random() < 0.9
        }
        for name in ("old-a", "old-b")
    }
    with fresh.connect(autocommit=True) as c:
        tid = c.execute(
            "INSERT INTO pgeval.testset (name, content_hash, source_format) "
            "VALUES ('old', 'h', 'test') RETURNING testset_id"
        ).fetchone()[0]
        for pos, q in enumerate(qids, 1):
            c.execute(
                "INSERT INTO pgeval.query (testset_id, query_id, position) VALUES (%s, %s, %s)",
                (tid, q, pos),
            )
            for chunk, grade in qrels[q].items():
                c.execute(
                    "INSERT INTO pgeval.qrel VALUES (%s, %s, %s, %s, NULL)", (tid, q, chunk, grade)
                )
        for name, ranked in runs.items():
            rid = c.execute(
                "INSERT INTO pgeval.run (name, testset_id, stage, order_rule, status) "
                "VALUES (%s, %s, 'import', 'as given', 'complete') RETURNING run_id",
                (name, tid),
            ).fetchone()[0]
            with c.cursor().copy(
                "COPY pgeval.result (run_id, query_id, rank, chunk_id, score) FROM STDIN"
            ) as cp:  # the old table: grades by its trigger
                for q, chunks in ranked.items():
                    for rank, chunk in enumerate(chunks, 1):
                        cp.write_row((rid, q, rank, chunk, 1.0 / rank))
        rows = c.execute(
            "SELECT run_id, query_id, rank, chunk_id, score, grade "
            "FROM pgeval.result ORDER BY 1, 2, 3"
        ).fetchall()
        assert any(r[5] is not None for r in rows) and any(r[5] is None for r in rows)
    assert init(fresh).revision_after == HEAD
    measures = ["recall@10", "ndcg@10", "mrr@20", "precision@5", "hit@3", "ndcg@25"]
    with fresh.connect(autocommit=True) as c:
        c.execute("SELECT pgeval.refresh_ideal(testset_id) FROM pgeval.testset")
        assert (
            c.execute(
                "SELECT run_id, query_id, rank, chunk_id, score, grade "
                "FROM pgeval.result ORDER BY 1, 2, 3"
            ).fetchall()
            == rows
        )
        assert c.execute(
            "SELECT name, n_queries, n_rows FROM pgeval.run ORDER BY name"
        ).fetchall() == [(n, len(r), sum(map(len, r.values()))) for n, r in sorted(runs.items())]
        for name, ranked in runs.items():
            rid = c.execute("SELECT run_id FROM pgeval.run WHERE name = %s", (name,)).fetchone()[0]
            got = metrics.summary(c, rid, measures)
            for m in measures:
                assert got[m] == pytest.approx(mean(ranked, qrels, m), abs=1e-12), (name, m)
    code, out, err = pgeval("--dsn", uri, "run", "list", "--format", "json")
    assert code == 0, err
    assert {r["run"]: r["queries"] for r in json.loads(out)} == {n: len(r) for n, r in runs.items()}
    downgrade_tables(uri, "0004_owntable")
    with fresh.connect(autocommit=True) as c:
        assert (
            c.execute(
                "SELECT run_id, query_id, rank, chunk_id, score, grade "
                "FROM pgeval.result ORDER BY 1, 2, 3"
            ).fetchall()
            == rows
        )


def _run_keys(conn) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT conrelid::regclass::text FROM pg_constraint WHERE contype = 'f' "
            "AND confrelid = 'pgeval.run'::regclass"
        ).fetchall()
    }


def test_run_rows_revision_keeps_timings_and_deletes_them_with_their_run(fresh):
    """0007_run_rows on a database written at 0006_checksum: the timings and progress rows stay,
    their foreign keys go, and deleting a run still deletes them (the trigger); downgrading
    brings the keys back and drops rows whose run is gone."""
    uri = fresh.uri()
    with fresh.connect(autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute("CREATE SCHEMA pgeval")
    upgrade_tables(uri, "0006_checksum")
    with fresh.connect(autocommit=True) as c:
        assert {"pgeval.query_timing", "pgeval.run_progress"} <= _run_keys(c)
        tid = c.execute(
            "INSERT INTO pgeval.testset (name, content_hash, source_format) "
            "VALUES ('old', 'h', 'test') RETURNING testset_id"
        ).fetchone()[0]
        runs = [
            c.execute(
                "INSERT INTO pgeval.run (name, testset_id, stage, order_rule, status) "
                "VALUES (%s, %s, 'hnsw', 'distance', 'complete') RETURNING run_id",
                (name, tid),
            ).fetchone()[0]
            for name in ("keep", "drop")
        ]
        for rid in runs:
            for q in ("q1", "q2"):
                c.execute(
                    "INSERT INTO pgeval.query_timing (run_id, query_id, latency_ms, rows_returned) "
                    "VALUES (%s, %s, 1.5, 10)",
                    (rid, q),
                )
                c.execute("INSERT INTO pgeval.run_progress VALUES (%s, %s)", (rid, q))
    assert init(fresh).revision_after == HEAD
    counts = (
        "SELECT (SELECT count(*) FROM pgeval.query_timing WHERE run_id = %(r)s), "
        "(SELECT count(*) FROM pgeval.run_progress WHERE run_id = %(r)s)"
    )
    with fresh.connect(autocommit=True) as c:
        assert not {"pgeval.query_timing", "pgeval.run_progress"} & _run_keys(c)
        assert [c.execute(counts, {"r": r}).fetchone() for r in runs] == [(2, 2), (2, 2)]
        c.execute("DELETE FROM pgeval.run WHERE run_id = %s", (runs[1],))
        assert [c.execute(counts, {"r": r}).fetchone() for r in runs] == [(2, 2), (0, 0)]
        c.execute("INSERT INTO pgeval.run_progress VALUES (%s, 'q9')", (runs[1],))  # an orphan
    downgrade_tables(uri, "0006_checksum")
    with fresh.connect(autocommit=True) as c:
        assert {"pgeval.query_timing", "pgeval.run_progress"} <= _run_keys(c)
        assert [c.execute(counts, {"r": r}).fetchone() for r in runs] == [(2, 2), (0, 0)]
    assert init(fresh).revision_after == HEAD  # and TRUNCATE ... CASCADE still empties them
    with fresh.connect(autocommit=True) as c:
        c.execute("TRUNCATE pgeval.testset RESTART IDENTITY CASCADE")
        assert c.execute(
            "SELECT (SELECT count(*) FROM pgeval.query_timing), "
            "(SELECT count(*) FROM pgeval.run_progress)"
        ).fetchone() == (0, 0)


def _list_storage(conn) -> dict[str, tuple[str, str]]:
    """{column: (attstorage, attcompression)} of pgeval.result_list's chunk ids and scores."""
    return {
        r[0]: (r[1], r[2])
        for r in conn.execute(
            "SELECT attname, attstorage, attcompression FROM pg_attribute "
            "WHERE attrelid = 'pgeval.result_list'::regclass AND attname IN ('chunk_ids', 'scores')"
        ).fetchall()
    }


def test_list_storage_revision_keeps_stored_lists_and_skips_pglz(fresh):
    """0008_list_storage on a database written at 0007_run_rows: a long list stored by pglz reads
    back the same, as does one written after; scores are stored out of line uncompressed and
    chunk ids by lz4, or uncompressed on a server without lz4 (the embedded one); a downgrade
    restores the defaults."""
    uri = fresh.uri()
    with fresh.connect(autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute("CREATE SCHEMA pgeval")
    upgrade_tables(uri, "0007_run_rows")
    ids = [f"document-{i:07d}" for i in range(0, 3000, 3)]  # a row well over 2 kB
    scores = [1.0 / (i + 1) for i in range(len(ids))]
    write = (
        "INSERT INTO pgeval.result_list (run_id, query_id, grades, scores, chunk_ids) "
        "VALUES (%s, %s, array_fill(NULL::smallint, ARRAY[%s]), %s, %s)"
    )
    read = (
        "SELECT chunk_ids, scores, pg_column_size(chunk_ids) < octet_length(chunk_ids::text) "
        "FROM pgeval.result_list WHERE query_id = %s"
    )
    with fresh.connect(autocommit=True) as c:
        assert _list_storage(c) == {"chunk_ids": ("x", ""), "scores": ("x", "")}
        tid = c.execute(
            "INSERT INTO pgeval.testset (name, content_hash, source_format) "
            "VALUES ('t', 'h', 'test') RETURNING testset_id"
        ).fetchone()[0]
        rid = c.execute(
            "INSERT INTO pgeval.run (name, testset_id, stage, order_rule, status) "
            "VALUES ('r', %s, 'import', 'x', 'complete') RETURNING run_id",
            (tid,),
        ).fetchone()[0]
        c.execute(write, (rid, "old", len(ids), scores, ids))
        assert c.execute(read, ("old",)).fetchone() == (ids, scores, True)  # pglz compressed
    assert init(fresh).revision_after == HEAD
    with fresh.connect(autocommit=True) as c:
        lz4 = c.execute(
            "SELECT count(*) = 1 FROM pg_settings WHERE name = 'default_toast_compression' "
            "AND 'lz4' = ANY (enumvals)"
        ).fetchone()[0]
        expected = ("x", "l") if lz4 else ("e", "")
        assert _list_storage(c) == {"chunk_ids": expected, "scores": ("e", "")}
        c.execute(write, (rid, "new", len(ids), scores, ids))
        assert c.execute(read, ("old",)).fetchone() == (ids, scores, True)
        assert c.execute(read, ("new",)).fetchone() == (ids, scores, lz4)
    downgrade_tables(uri, "0007_run_rows")
    with fresh.connect(autocommit=True) as c:
        assert _list_storage(c) == {"chunk_ids": ("x", ""), "scores": ("x", "")}
        assert c.execute(read, ("new",)).fetchone() == (ids, scores, lz4)
