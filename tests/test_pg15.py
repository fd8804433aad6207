"""pgeval on Debian's own PostgreSQL 15 (issue 9, "Real servers"), in a throwaway cluster: a
non-superuser database owner, pgvector built from Debian's source package (``.ci/pg15.sh``),
no pg_textsearch.

- ``init`` as the owner, before a superuser created pgvector: exit 1, one message with the exact
  SQL and every database that needs it; nothing created. After the superuser ran it: init works.
- The ANN plan check reads the generic plan without ``EXPLAIN (GENERIC_PLAN)`` (PostgreSQL 16+):
  ``PREPARE`` + ``EXPLAIN EXECUTE`` under force_generic_plan, leaving nothing prepared.
- A pipeline exact,hnsw,bm25 (the ts_rank_cd fallback) and a sweep give the same ranked lists and
  the same metrics as the embedded PostgreSQL 18 for the same data.

Skipped, with the reason, where PostgreSQL 15 or pgvector for it is not installed.
"""

from __future__ import annotations

import json

import numpy as np
import pg_real
import prerequisites
import pytest

MAJOR = 15
OWNER = "kb_owner"
_why = pg_real.unavailable(MAJOR)
pytestmark = [prerequisites.mark("pg15", _why), pytest.mark.slow]

PIPELINE = [
    "--stages",
    "exact,hnsw,bm25",
    "--opt",
    "bm25:method=fts",
    "--opt",
    "bm25:config=english",
    "--set",
    "hnsw.ef_search=100",
    "--depth",
    "20",
    "--repeat",
    "1",
    "--name",
    "pg15x",
]
SWEEP = [
    "sweep",
    "--testset",
    "pg15",
    "--target",
    "pg15",
    "--stage",
    "hnsw",
    "--param",
    "hnsw.ef_search=40,100",
    "--repeat",
    "1",
    "--set",
    "enable_seqscan=off",
    "--format",
    "json",
    "--name",
    "pg15sweep",
]


@pytest.fixture(scope="module")
def pg15():
    cluster = pg_real.Cluster(MAJOR).start()
    try:
        with cluster.connect() as su:
            su.execute(f"CREATE ROLE {OWNER} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
            for db in ("kb", "kb_results", "kb_plain"):
                su.execute(f"CREATE DATABASE {db} OWNER {OWNER}")
        yield cluster
    finally:
        cluster.stop()


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


def _schema_exists(cluster, db: str) -> bool:
    with cluster.connect(dbname=db) as c:
        return c.execute("SELECT to_regnamespace('pgeval') IS NOT NULL").fetchone()[0]


def test_init_as_owner_names_the_sql_a_superuser_must_run(pg15, pgeval):
    kb = pg15.dsn(OWNER, "kb")
    code, out, err = pgeval("--dsn", kb, "init")
    line = _one_line(err)
    assert code == 1 and "Traceback" not in err
    assert 'role "kb_owner" may not create extension "vector"' in line
    assert "CREATE EXTENSION IF NOT EXISTS vector;" in line and 'database "kb"' in line
    assert not _schema_exists(pg15, "kb")  # nothing half-created
    # results in another database: both databases are named, each with its psql command
    code, out, err = pgeval("--dsn", kb, "--results-dsn", pg15.dsn(OWNER, "kb_results"), "init")
    line = _one_line(err)
    assert code == 1
    assert 'in database "kb_results" and in database "kb"' in line
    assert "psql -d kb_results -c 'CREATE EXTENSION IF NOT EXISTS vector;'" in line
    assert "psql -d kb -c 'CREATE EXTENSION IF NOT EXISTS vector;'" in line
    assert not _schema_exists(pg15, "kb_results")
    # the superuser runs exactly what init printed, in each database; then the owner's init works
    sql = line.split("once, in ")[1].split(": ", 1)[1].split("  (e.g.")[0]
    assert sql == "CREATE EXTENSION IF NOT EXISTS vector;"
    for db in ("kb", "kb_results"):
        with pg15.connect(dbname=db) as su:
            su.execute(sql)
    for args in (["--dsn", kb], ["--dsn", kb, "--results-dsn", pg15.dsn(OWNER, "kb_results")]):
        code, out, err = pgeval(*args, "init")
        assert code == 0, err
        assert "extension vector 0." in out
        # each database's own pgvector version, named (another server may have another one)
        if "--results-dsn" in args:
            assert '(knowledge base, database "kb")' in out, out
            assert '(results, database "kb_results")' in out, out
        else:
            assert '(database "kb")' in out and "results, database" not in out, out
        assert "optional extension not available: pg_textsearch" in err
    # a knowledge-base database without pgvector, results elsewhere: init works and says so
    code, out, err = pgeval(
        "--dsn", pg15.dsn(OWNER, "kb_plain"), "--results-dsn", pg15.dsn(OWNER, "kb_results"), "init"
    )
    assert code == 0, err
    assert (
        'extension vector is not installed in the knowledge base\'s database "kb_plain"' in err
        and "CREATE EXTENSION IF NOT EXISTS vector;" in err
    )


@pytest.fixture(scope="module")
def pg15_kb(pg15):
    """Schema pgeval and the knowledge base in database kb, as the owner (the superuser created
    pgvector there once)."""
    with pg15.connect(dbname="kb") as su:
        su.execute("CREATE EXTENSION IF NOT EXISTS vector")
    from evaluator.core.db import Database
    from evaluator.core.install import init

    db = Database(dsn=pg15.dsn(OWNER, "kb"))
    init(db)
    with pg15.connect(OWNER, "kb") as c:
        # Debian's build has lz4: long lists' chunk ids compressed by it (0008_list_storage)
        assert c.execute(
            "SELECT attcompression FROM pg_attribute WHERE attrelid = "
            "'pgeval.result_list'::regclass AND attname = 'chunk_ids'"
        ).fetchone() == ("l",)
        if not c.execute("SELECT to_regclass('pg15_kb') IS NOT NULL").fetchone()[0]:
            pg_real.build_kb(c, "pg15_kb")
    return db


def test_generic_plan_without_generic_plan_option(pg15_kb):
    """PostgreSQL 15 has no EXPLAIN (GENERIC_PLAN): the plan check prepares the statement and
    explains its generic plan, restores plan_cache_mode and leaves nothing prepared."""
    from pgvector.psycopg import register_vector

    from evaluator.stages import plan_check, vector_sql
    from evaluator.targets.targets import Target

    t = Target(
        name="g",
        table="pg15_kb",
        id_column="doc_id",
        vector_column="emb",
        text_column="body",
        dimension=pg_real.DIM,
    )
    dollar = vector_sql.Dollar()
    stmt = vector_sql.per_query(t, 20, dollar)[0]
    assert dollar.names == ["q"]
    q = np.asarray(pg_real.corpus()[1][0]["embedding"], dtype=np.float32)
    with pg15_kb.connect(results=False) as kb:
        register_vector(kb)
        assert kb.info.server_version // 10000 == MAJOR
        kb.execute("SET LOCAL enable_seqscan = off")
        kb.execute("SET LOCAL plan_cache_mode = auto")
        plan = plan_check.explain_generic(kb, stmt, [q])
        assert [s[1] for s in plan_check.index_scans(plan)] == ["pg15_kb_hnsw"]
        assert kb.execute("SHOW plan_cache_mode").fetchone()[0] == "auto"
        assert (
            kb.execute(
                "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'pgeval_plan_check_%'"
            ).fetchone()[0]
            == 0
        )
        # what the check did before: EXPLAIN (GENERIC_PLAN) is 16+, on 15 the error
        with pytest.raises(Exception, match=r"there is no parameter \$1"):
            plan_check.explain(kb, stmt, None, generic=True)


def _flow(pgeval, prefix: list[str], cases) -> dict:
    """Load, target, pipeline, stage report, sweep on one server; what they produced."""
    for args in (
        ["testset", "load", str(cases), "--name", "pg15"],
        [
            "target",
            "add",
            "pg15",
            "--table",
            "pg15_kb",
            "--id-column",
            "doc_id",
            "--vector-column",
            "emb",
            "--text-column",
            "body",
        ],
        ["run", "pipeline", "--testset", "pg15", "--target", "pg15", *PIPELINE],
    ):
        code, out, err = pgeval(*prefix, *args)
        assert code == 0, (args, err)
    code, out, err = pgeval(*prefix, "stage-report", "pg15x", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    code, out, err = pgeval(*prefix, *SWEEP)
    assert code == 0, err
    sweep = json.loads(out)
    return {"report": report, "sweep": sweep, "stderr": err}


def _lists(conn, experiment: str) -> dict:
    rows = conn.execute(
        "SELECT r.stage, res.query_id, array_agg(res.chunk_id ORDER BY res.rank) "
        "FROM pgeval.run r JOIN pgeval.experiment e USING (experiment_id) "
        "JOIN pgeval.result res USING (run_id) WHERE e.name = %s GROUP BY 1, 2",
        (experiment,),
    ).fetchall()
    return {(s, q): ids for s, q, ids in rows}


def test_pipeline_and_sweep_equal_the_embedded_server(pg15, pg15_kb, clean, conn, pgeval, tmp_path):
    cases = pg_real.write_cases(tmp_path / "cases.jsonl")
    if not conn.execute("SELECT to_regclass('pg15_kb') IS NOT NULL").fetchone()[0]:
        pg_real.build_kb(conn, "pg15_kb")
    with pg15.connect(OWNER, "kb") as c:
        c.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
    real = _flow(pgeval, ["--dsn", pg15.dsn(OWNER, "kb")], cases)
    embedded = _flow(pgeval, [], cases)

    # the same ranked lists, stage by stage and query by query
    with pg15.connect(OWNER, "kb") as c:
        lists15 = _lists(c, "pg15x")
    lists18 = _lists(conn, "pg15x")
    assert len(lists15) == 3 * 40 and lists15 == lists18
    # ef_search=100 over 300 rows: the HNSW index finds the exact neighbours on both servers
    assert all(lists15[("hnsw", q)] == lists15[("exact", q)] for _, q in lists15)

    # the same metrics per stage (computed by each server's SQL)
    def stage_metrics(report):
        return {
            s["stage"]: (
                {m: v["mean"] for m, v in s["metrics"].items()},
                (s.get("index_recall@10") or {}).get("mean"),
                s["label"],
            )
            for s in report["stages"]
        }

    m15, m18 = stage_metrics(real["report"]), stage_metrics(embedded["report"])
    assert m15.keys() == {"exact", "hnsw", "bm25"}
    for stage in m15:
        assert m15[stage][0] == pytest.approx(m18[stage][0], abs=1e-12), stage
        assert m15[stage][1] == m18[stage][1]
    assert m15["hnsw"][1] == 1.0
    assert m15["bm25"][0]["recall@10"] > 0.1  # the fallback finds the planted words
    assert m15["bm25"][2] == m18["bm25"][2] == "bm25 (ts_rank_cd fallback)"

    # the sweep: the same points, the same recall against exact search and the same metrics
    def points(sweep):
        return [(p["label"], p["index_recall"], p["metrics"]) for p in sweep["points"]]

    p15, p18 = points(real["sweep"]), points(embedded["sweep"])
    assert [p[0] for p in p15] == ["ef_search=40", "ef_search=100"]
    for (l15, r15, x15), (l18, r18, x18) in zip(p15, p18, strict=True):
        assert l15 == l18 and r15 == r18 == 1.0
        assert x15 == pytest.approx(x18, abs=1e-12)


def test_fulltext_fallback_uses_a_gin_index_on_pg15(pg15, pg15_kb, pgeval, tmp_path):
    """No pg_textsearch on this server: the keyword stage says which index to create; once the
    owner ran that statement the stage uses it, with the same ranked lists."""
    prefix = ["--dsn", pg15.dsn(OWNER, "kb")]
    with pg15.connect(OWNER, "kb") as c:
        c.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
        c.execute("DROP INDEX IF EXISTS pg15_kb_body_fts")
    cases = pg_real.write_cases(tmp_path / "cases.jsonl")
    for args in (
        ["testset", "load", str(cases), "--name", "kw"],
        [
            "target",
            "add",
            "kw",
            "--table",
            "pg15_kb",
            "--id-column",
            "doc_id",
            "--vector-column",
            "emb",
            "--text-column",
            "body",
        ],
    ):
        assert pgeval(*prefix, *args)[0] == 0
    run = [
        "run",
        "pipeline",
        "--testset",
        "kw",
        "--target",
        "kw",
        "--stages",
        "bm25",
        "--depth",
        "20",
        "--repeat",
        "1",
        "--name",
    ]
    code, out, err = pgeval(*prefix, *run, "kw1")
    assert code == 0, err
    assert "the pg_textsearch extension is not installed" in err
    hint = 'CREATE INDEX ON "pg15_kb" USING gin (to_tsvector(\'english\'::regconfig, "body"));'
    assert "no GIN index on to_tsvector('english', body)" in err and hint in err
    code, out, err = pgeval(*prefix, "health", "--target", "kw", "--format", "json")
    found = {f["check"]: f for f in json.loads(out)}
    assert code == 0 and found["keyword_index"]["status"] == "hint"
    assert hint in found["keyword_index"]["detail"]
    assert found["server_version"]["status"] == "ok"
    assert "PostgreSQL 15." in found["server_version"]["detail"]
    with pg15.connect(OWNER, "kb") as c:
        c.execute(hint)
        c.execute("ANALYZE pg15_kb")
        name = c.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'pg15_kb' AND indexdef LIKE '%gin%'"
        ).fetchone()[0]
    code, out, err = pgeval(*prefix, *run, "kw2")
    assert code == 0, err
    assert "no GIN index" not in err
    with pg15.connect(OWNER, "kb") as c:
        params = dict(
            c.execute("SELECT name, params FROM pgeval.run WHERE stage = 'bm25'").fetchall()
        )
        assert params["kw1.bm25.1"]["scan"] == "sequential scan"
        assert params["kw1.bm25.1"]["index_hint"] == hint
        assert params["kw2.bm25.1"]["scan"] == f"index {name}"
        assert params["kw2.bm25.1"]["fts_index"] == name
        assert _lists(c, "kw1") == _lists(c, "kw2")
        c.execute(f"DROP INDEX {name}")


def test_a_kind_the_server_lacks_says_what_is_missing(pg15_kb, pgeval):
    """Debian's PostgreSQL 15 has pgvector but no pgvectorscale: a diskann sweep stops before
    any work with one line naming the extension and the SQL that adds it."""
    prefix = ["--dsn", pg15_kb.dsn]
    code, _, err = pgeval(
        *prefix, "target", "add", "pg15-kinds", "--table", "pg15_kb", "--id-column", "doc_id",
        "--vector-column", "emb", "--replace",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = pgeval(
        *prefix, "sweep", "--sample-queries", "3", "--target", "pg15-kinds", "--stage",
        "diskann", "--param", "diskann.query_rescore=10",
    )  # fmt: skip
    assert code == 1 and out == ""
    line = _one_line(err)
    assert "needs pgvectorscale (extension vectorscale), which is not installed" in line
    assert "CREATE EXTENSION vectorscale" in line
    with pg15_kb.connect(results=False) as kb:
        from evaluator.stages.server_support import missing

        assert missing(kb, "hnsw-bq") is None and missing(kb, "hnsw-halfvec") is None


def test_sql_probe_equals_the_cli_probe_on_pg15(pg15_kb, pgeval):
    """pgeval.run_probe (sql/220_run_probe.sql) on PostgreSQL 15, in the database that holds the
    table and schema pgeval (pg_cron's layout): the CLI probe's recall, rows, data version (a
    text column in the checksum) and index build, one row with via 'sql'."""
    prefix = ["--dsn", pg15_kb.dsn]
    code, _, err = pgeval(
        *prefix, "target", "add", "pg15-probe", "--table", "pg15_kb", "--id-column", "doc_id",
        "--vector-column", "emb", "--text-column", "body", "--replace",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = pgeval(
        *prefix, "watch", "--target", "pg15-probe", "--stage", "hnsw", "--sample-queries", "40",
        "--set", "hnsw.ef_search=10", "--set", "enable_seqscan=off", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    with pg15_kb.connect() as c:
        assert c.info.server_version // 10000 == MAJOR
        (sql_id,) = c.execute(
            "SELECT probe_id FROM pgeval.run_probe('pg15-probe', 'hnsw', p_sample => 40, "
            'p_settings => \'{"hnsw.ef_search": "10", "enable_seqscan": "off"}\')'
        ).fetchone()
        c.commit()
        cur = c.execute(
            "SELECT via, recall, queries, rows_mean, table_rows, data_version, index_build, "
            "settings FROM pgeval.probe_history WHERE target = 'pg15-probe' "
            "AND probe_id IN (%s, (SELECT max(probe_id) FROM pgeval.probe WHERE via = 'cli'))",
            (sql_id,),
        )
        rows = {r[0]: r[1:] for r in cur.fetchall()}
    assert set(rows) == {"cli", "sql"}
    assert 0 < rows["sql"][0] <= 1
    assert rows["sql"][0] == pytest.approx(rows["cli"][0], abs=1e-9)
    assert rows["sql"][1:] == rows["cli"][1:]


def test_change_log_as_the_table_owner_on_pg15(pg15_kb, pgeval):
    """`pgeval target track` as the table's owner (no superuser) on PostgreSQL 15: a probe on
    the unchanged table reads the data version from the change log, the same version as the
    pass over the row versions (the server's xid hash differs before 16); untrack puts it back."""
    prefix = ["--dsn", pg15_kb.dsn]
    code, _, err = pgeval(
        *prefix, "target", "add", "pg15-log", "--table", "pg15_kb", "--id-column", "doc_id",
        "--vector-column", "emb", "--text-column", "body", "--replace",
    )  # fmt: skip
    assert code == 0, err
    probe = [
        *prefix, "watch", "--target", "pg15-log", "--stage", "hnsw", "--sample-queries", "20",
        "--set", "hnsw.ef_search=10", "--set", "enable_seqscan=off", "--format", "json",
    ]  # fmt: skip
    code, out, err = pgeval(*probe)
    assert code == 0, err
    scanned = json.loads(out)
    code, _, err = pgeval(*prefix, "target", "track", "pg15-log")
    assert code == 0, err
    for _ in range(2):  # the first read with the log fills its entry
        code, out, err = pgeval(*probe)
        assert code == 0, err
    logged = json.loads(out)
    assert logged["cost"]["data_version"]["via"] == "change log"
    assert logged["data_version"] == scanned["data_version"]
    # the configuration epoch read as the table's owner: the steady path (an autovacuum between
    # two probes changes the epoch, and one probe rightly takes the lean path: a few more)
    paths = [logged["cost"]["path"]]
    while "steady" not in paths and len(paths) < 4:
        code, out, err = pgeval(*probe)
        assert code == 0, err
        paths.append(json.loads(out)["cost"]["path"])
        assert json.loads(out)["recall"] == logged["recall"]
    assert "steady" in paths, paths
    with pg15_kb.connect() as c:  # the SQL probe, tracked: the second takes the first's data
        versions = []
        for _ in range(2):
            (pid,) = c.execute(
                "SELECT probe_id FROM pgeval.run_probe('pg15-log', 'hnsw', p_sample => 20, "
                'p_settings => \'{"hnsw.ef_search": "10", "enable_seqscan": "off"}\')'
            ).fetchone()
            c.commit()
            versions.append(
                c.execute(
                    "SELECT data_checksum, ground_truth -> 'changes' IS NOT NULL "
                    "FROM pgeval.probe WHERE probe_id = %s",
                    (pid,),
                ).fetchone()
            )
    assert versions == [(scanned["data_version"], True)] * 2
    code, _, err = pgeval(*prefix, "target", "untrack", "pg15-log")
    assert code == 0, err


def test_sql_evaluations_equal_numpy_on_pg15(pg15_kb):
    """pgeval.evaluate_recall and pgeval.evaluate_query_recall (docs/sql.md) on PostgreSQL 15
    with Debian's pgvector: per point, the statement run by hand against numpy's exact search."""
    grid = {"hnsw.ef_search": [10, 40], "enable_seqscan": "off"}
    with pg15_kb.connect(results=False) as c:
        assert c.info.server_version // 10000 == MAJOR
        rows = c.execute(
            "SELECT configurations, recall, index_type, n_queries FROM pgeval.evaluate_recall("
            "%s, %s, %s, name => 'pg15-sql', replace => true)",
            (pg_real.sql_statement("pg15_kb"), pg_real.sql_queries("pg15_kb"), json.dumps(grid)),
        ).fetchall()
        c.commit()
        assert [r[0]["hnsw.ef_search"] for r in rows] == ["10", "40"]
        for settings, recall, index_type, n in rows:
            assert index_type == "hnsw" and n == 20
            by_hand = pg_real.statement_recall_by_hand(c, "pg15_kb", settings)
            assert recall == pytest.approx(by_hand, abs=1e-9), settings
        vector = c.execute("SELECT emb::text FROM pg15_kb ORDER BY doc_id LIMIT 1").fetchone()[0]
        one = pg_real.sql_statement("pg15_kb").replace("$1", f"'{vector}'")
        (recall, rows_returned, k) = c.execute(
            "SELECT recall, rows_returned, k FROM pgeval.evaluate_query_recall(%s, %s)",
            (one, json.dumps({"hnsw.ef_search": 40, "enable_seqscan": "off"})),
        ).fetchone()
        assert (rows_returned, k) == (10, 10) and 0 < recall <= 1
