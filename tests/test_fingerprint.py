"""The configuration fingerprint: it changes when an index option or build, a query setting, a
planner setting or the content changes, and not otherwise; it never carries a password."""

from __future__ import annotations

import json

import numpy as np
import pytest
from dba_data import ensure_table, ensure_target

from evaluator.table import fingerprint as fpmod
from evaluator.table.config_diff import compare

TABLE = "dba_fp_docs"


@pytest.fixture(scope="module")
def small(database):
    """A 300-row, 8-dimension table of its own (its index is rebuilt by the tests)."""
    rng = np.random.default_rng(11)
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        ensure_table(c, TABLE, rng.normal(size=(300, 8)).astype(np.float32))
        c.execute(
            f"CREATE INDEX dba_fp_hnsw ON {TABLE} USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = 8)"
        )
    yield TABLE
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")


@pytest.fixture
def target(conn, small):
    return ensure_target(conn, "dba-fp", small)


def capture(conn, target, **kw):
    fp = fpmod.capture(conn, target, **kw)
    return fp, fpmod.config_hash(fp)


def test_same_configuration_same_hash(conn, target):
    fp1, h1 = capture(conn, target, settings={"hnsw.ef_search": "40"}, testset_hash="x")
    fp2, h2 = capture(conn, target, settings={"hnsw.ef_search": "40"}, testset_hash="x")
    assert h1 == h2 and len(h1) == 64
    assert fp1["query_settings"]["hnsw.ef_search"] == "40"
    assert fp1["indexes"]["dba_fp_hnsw"]["options"] == {"m": "8", "ef_construction": "64"}
    assert fp1["data"]["rows"] == 300 and len(fp1["data"]["checksum"]) == 16
    assert fp1["extensions"]["vector"] and fp1["server"]["version_num"] >= 150000
    assert not compare(fp1, fp2).differences


def test_query_setting_changes_hash(conn, target):
    fp40, h40 = capture(conn, target, settings={"hnsw.ef_search": "40"})
    fp80, h80 = capture(conn, target, settings={"hnsw.ef_search": "80"})
    assert h40 != h80
    d = compare(fp40, fp80)
    assert [x.key for x in d.differences] == ["query_settings.hnsw.ef_search"]
    # a session-level SET is seen too, and SET LOCAL settings never leak into the session
    conn.execute("SET hnsw.ef_search = 80")
    try:
        _, h_session = capture(conn, target)
    finally:
        conn.execute("RESET hnsw.ef_search")
    assert h_session == h80
    assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] == "40"


def test_planner_setting_changes_hash(conn, target):
    fp1, h1 = capture(conn, target)
    fp2, h2 = capture(conn, target, settings={"work_mem": "77MB", "enable_seqscan": "off"})
    assert h1 != h2
    keys = {x.key for x in compare(fp1, fp2).differences}
    assert keys == {"planner.work_mem", "planner.enable_off"}
    assert "enable_seqscan" in fp2["planner"]["enable_off"]


def test_index_option_changes_hash_and_default_does_not(conn, target):
    fp_m8, h_m8 = capture(conn, target)
    try:
        conn.execute("DROP INDEX dba_fp_hnsw")
        conn.execute(
            f"CREATE INDEX dba_fp_hnsw ON {TABLE} USING hnsw (embedding "
            "vector_cosine_ops) WITH (m = 12)"
        )
        fp_m12, h_m12 = capture(conn, target)
        assert h_m12 != h_m8
        d = compare(fp_m8, fp_m12)
        assert [x.key for x in d.differences] == ["indexes.dba_fp_hnsw.options.m"]
        assert len(d.variables) == 1 and not d.warnings()
        # m = 16 written out and m left at its default are the same configuration
        conn.execute("DROP INDEX dba_fp_hnsw")
        conn.execute(
            f"CREATE INDEX dba_fp_hnsw ON {TABLE} USING hnsw (embedding "
            "vector_cosine_ops) WITH (m = 16)"
        )
        fp_explicit, h_explicit = capture(conn, target)
        conn.execute("DROP INDEX dba_fp_hnsw")
        conn.execute(
            f"CREATE INDEX dba_fp_hnsw ON {TABLE} USING hnsw (embedding vector_cosine_ops)"
        )
        fp_default, h_default = capture(conn, target)
        # two builds of the same options: only the build differs (REINDEX alike), not m
        assert compare(fp_explicit, fp_default).variables == ["indexes.dba_fp_hnsw.build"]
        assert h_explicit != h_default != h_m12
        assert fp_default["info"]["indexes"]["dba_fp_hnsw"]["explicit_options"] == {}
    finally:
        conn.execute("DROP INDEX IF EXISTS dba_fp_hnsw")
        conn.execute(
            f"CREATE INDEX dba_fp_hnsw ON {TABLE} USING hnsw (embedding "
            "vector_cosine_ops) WITH (m = 8)"
        )
    assert compare(fp_m8, capture(conn, target)[0]).variables == ["indexes.dba_fp_hnsw.build"]


def test_content_change_changes_checksum_not_rows(conn, target):
    fp1, h1 = capture(conn, target)
    old = conn.execute(f"SELECT embedding::text FROM {TABLE} WHERE id = '7'").fetchone()[0]
    try:
        conn.execute(f"UPDATE {TABLE} SET embedding = '[1,2,3,4,5,6,7,8]' WHERE id = '7'")
        fp2, h2 = capture(conn, target)
        fast, _ = capture(conn, target, checksum=False)
    finally:
        conn.execute(f"UPDATE {TABLE} SET embedding = %s WHERE id = '7'", (old,))
    assert h1 != h2
    d = compare(fp1, fp2)
    assert [x.key for x in d.differences] == ["data.checksum"] and d.variables == ["data"]
    assert fast["data"] == {"rows": 300, "checksum": None}
    assert capture(conn, target)[1] == h1


def test_test_set_filters_and_embedder_are_recorded(conn, target):
    fp1, h1 = capture(conn, target, testset_hash="aaa", embedder="minilm")
    fp2, h2 = capture(conn, target, testset_hash="bbb", embedder="minilm")
    fp3, h3 = capture(
        conn, target, testset_hash="aaa", embedder="minilm", filters={"labels": "1,2"}
    )
    assert len({h1, h2, h3}) == 3
    assert fp3["filters"] == {"labels": "1,2"}
    assert fp1["embedding"] == {"model": "minilm", "dimension": 8}
    d = compare(fp1, fp2)
    assert d.variables == ["testset"]
    d = compare(fp2, fp3)
    assert len(d.variables) == 2 and "variables differ" in d.warnings()[0]


def test_no_password_in_fingerprint(database, target):
    uri = database.uri()
    with_password = uri.replace("postgres:@", "postgres:Sup3rSecretPw@")
    assert "Sup3rSecretPw" in with_password
    import psycopg

    with psycopg.connect(with_password, autocommit=True) as c:
        c.execute("SET application_name = 'pgeval password=Sup3rSecretPw'")
        fp, _ = capture(
            c,
            target,
            embedder="openai:text-embedding-3-small?api_key=sk-Secret42",
            extra={"note": "password=Sup3rSecretPw"},
        )
    text = json.dumps(fp)
    assert "Sup3rSecretPw" not in text and "sk-Secret42" not in text
    assert "api_key=***" in fp["embedding"]["model"]


def test_cli_fingerprint(pgeval, target):
    code, out, err = pgeval(
        "fingerprint", "--target", "dba-fp", "--set", "hnsw.ef_search=64", "--format", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["fingerprint"]["query_settings"]["hnsw.ef_search"] == "64"
    assert doc["config_hash"] == fpmod.config_hash(doc["fingerprint"])
    code, out, err = pgeval("fingerprint", "--target", "dba-fp", "--no-checksum")
    assert code == 0 and "config hash" in out and "data.rows" in out
    code, out, err = pgeval("fingerprint", "--target", "dba-fp", "--set", "hnsw.ef_search=lots")
    assert code == 1 and "--set" in err and "Traceback" not in err
    code, out, err = pgeval("fingerprint", "--target", "no-such-target")
    assert code == 1 and "no-such-target" in err


def test_settings_seen_as_the_server_shows_them(conn):
    """fingerprint.settings_seen reads in one statement what a stage running with the settings
    sees: every ANN setting pg_settings lists (and the known ones), the planner's settings and
    the enable_* that are off; the same values read one by one."""
    settings = {"hnsw.ef_search": "77", "work_mem": "7MB", "enable_seqscan": "off"}
    query, planner = fpmod.settings_seen(conn, settings)
    # (the libraries settings_seen loaded stay loaded in the session: the same names exist)
    with conn.transaction(force_rollback=True):
        for name, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        ann = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM pg_settings WHERE name ~ '^(hnsw|ivfflat|diskann|bq)[.]'"
            ).fetchall()
        } | set(fpmod.QUERY_GUCS)
        one = "SELECT current_setting(%s, true)"
        by_hand = {n: conn.execute(one, (n,)).fetchone()[0] for n in sorted(ann)}
        planned = {n: conn.execute(one, (n,)).fetchone()[0] for n in fpmod.PLANNER_GUCS}
        off = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM pg_settings WHERE name LIKE 'enable\\_%' AND setting = 'off' "
                "ORDER BY name"
            ).fetchall()
        ]
    assert query == by_hand and query["hnsw.ef_search"] == "77"
    assert planner == {**planned, "enable_off": off}
    assert planner["work_mem"] == "7MB" and "enable_seqscan" in off


def test_settings_seen_on_a_database_without_pgvector(database):
    """Without pgvector the libraries' load fails inside its one statement (no savepoint): the
    settings are read all the same, the ANN ones as the server has them (none); loading them for
    a stage (gucs.load_libraries) still fails."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from evaluator.stages import gucs

    name = "pgeval_no_vector"
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name}")
        c.execute(f"CREATE DATABASE {name}")
    try:
        with psycopg.connect(make_conninfo(database.uri(), dbname=name)) as c:
            assert (
                c.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()[
                    0
                ]
                == 0
            )
            query, planner = fpmod.settings_seen(c, {"work_mem": "5MB"})
            one = "SELECT current_setting(%s, true)"
            assert query == {n: c.execute(one, (n,)).fetchone()[0] for n in sorted(query)}
            assert set(fpmod.QUERY_GUCS) <= set(query) and planner["work_mem"] == "5MB"
            c.rollback()
            with pytest.raises(psycopg.errors.UndefinedObject):
                gucs.load_libraries(c)
    finally:
        with database.connect(autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name}")
