"""Injection: hostile identifiers (quotes, semicolons, comments, Unicode) are quoted wherever pgeval
uses them — they work as the names they are, and never run as SQL — and hostile settings are
refused or bound as plain values. A victim table must survive every attempt."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import make_testset
from psycopg import sql
from robust_kb import ensure_table, ensure_testset, vec_text

SCHEMA = 'kb"; DROP TABLE inj_victim; --'
TABLE = "chunks'); DROP TABLE inj_victim; --表🙂"
ID = 'id"--'
VEC = "vec; SELECT pg_sleep(10)"
TEXT = "/* body */ text"
INDEX = 'idx"; DROP TABLE inj_victim; --'
PLAIN_INDEX = "inj_plain_hnsw"
VICTIM = "inj_victim"
HOSTILE_VALUE = "document 5' OR '1'='1"


@pytest.fixture(scope="module")
def hostile(database):
    with database.connect(autocommit=True) as c:
        c.execute(f"CREATE TABLE IF NOT EXISTS {VICTIM} (x int)")
        c.execute(f"TRUNCATE {VICTIM}")
        c.execute(f"INSERT INTO {VICTIM} VALUES (1)")
        c.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
        ensure_table(
            c, TABLE, 300, 8, hnsw=False, schema=SCHEMA, id_col=ID, vec_col=VEC, text_col=TEXT
        )
        table = sql.Identifier(SCHEMA, TABLE)
        for name, m in ((INDEX, 16), (PLAIN_INDEX, 8)):
            c.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw ({} "
                    "vector_cosine_ops) WITH (m = {})"
                ).format(sql.Identifier(name), table, sql.Identifier(VEC), sql.Literal(m))
            )
        c.execute(sql.SQL("ANALYZE {}").format(table))
    return table


def _victim_alive(conn) -> bool:
    return conn.execute("SELECT count(*) FROM inj_victim").fetchone()[0] == 1


def _indexes(conn) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (SCHEMA,)
        ).fetchall()
    }


def _add_target(pgeval, *extra):
    return pgeval(
        "target",
        "add",
        "hostile",
        "--schema",
        SCHEMA,
        "--table",
        TABLE,
        "--id-column",
        ID,
        "--vector-column",
        VEC,
        "--text-column",
        TEXT,
        "--format",
        "json",
        *extra,
    )


def test_hostile_identifiers_are_quoted(hostile, clean, conn, pgeval):
    ensure_testset(conn, "inj", "unused", 20, 8)
    code, out, err = _add_target(pgeval)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["spec"]["table"] == TABLE and doc["spec"]["schema"] == SCHEMA
    assert {i["name"] for i in doc["indexes"]} == {INDEX, PLAIN_INDEX}
    exp = "inj'; DROP TABLE inj_victim; --"
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "inj",
        "--target",
        "hostile",
        "--stages",
        "exact,hnsw",
        "--opt",
        f"hnsw:index={INDEX}",
        "--isolate-index",
        "--set",
        "hnsw.ef_search=100",
        "--depth",
        "10",
        "--repeat",
        "1",
        "--name",
        exp,
    )
    assert code == 0, err
    assert _victim_alive(conn)
    # --isolate-index dropped the other index inside the stage's transaction, by its quoted name,
    # and rolled back: both indexes are still there
    assert _indexes(conn) >= {INDEX, PLAIN_INDEX}
    params = conn.execute(
        "SELECT params FROM pgeval.run WHERE name = %s", (f"{exp}.hnsw.1",)
    ).fetchone()[0]
    assert params["index"] == INDEX and params["isolated_from"] == [PLAIN_INDEX]
    # the exact stage's lists are the true nearest neighbours of the hostile table
    q = conn.execute(
        "SELECT embedding::text FROM pgeval.query WHERE query_id = 'q1' AND "
        "testset_id = (SELECT testset_id FROM pgeval.testset WHERE name = 'inj')"
    ).fetchone()[0]
    want = [
        r[0]
        for r in conn.execute(
            sql.SQL("SELECT {id} FROM {t} ORDER BY {v} <=> %s::vector, {id} LIMIT 10").format(
                id=sql.Identifier(ID), t=hostile, v=sql.Identifier(VEC)
            ),
            (q,),
        ).fetchall()
    ]
    got = [
        r[0]
        for r in conn.execute(
            "SELECT chunk_id FROM pgeval.result JOIN pgeval.run USING (run_id) WHERE name = %s "
            "AND query_id = 'q1' ORDER BY rank",
            (f"{exp}.exact.1",),
        ).fetchall()
    ]
    assert got == want and len(got) == 10
    code, out, err = pgeval("metrics", f"{exp}.hnsw.1", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["run"] == f"{exp}.hnsw.1"


def test_filter_values_are_bound(hostile, clean, conn, pgeval):
    ensure_testset(conn, "inj", "unused", 20, 8)
    # a hostile value matches no row: it is compared as a string, not spliced into the SQL
    code, out, err = _add_target(pgeval, "--where", f"{TEXT}={HOSTILE_VALUE}")
    assert code == 0, err
    assert "matches the filters" in err and _victim_alive(conn)
    code, out, err = _add_target(pgeval, "--where", f"{TEXT}=document 5", "--replace")
    assert code == 0, err
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "inj",
        "--target",
        "hostile",
        "--stages",
        "exact",
        "--repeat",
        "1",
        "--name",
        "inj-filter",
    )
    assert code == 0, err
    rows = conn.execute(
        "SELECT DISTINCT chunk_id FROM pgeval.result JOIN pgeval.run "
        "USING (run_id) WHERE name = 'inj-filter.exact.1'"
    ).fetchall()
    assert rows == [("c5",)]


@pytest.mark.parametrize(
    "setting, message",
    [
        ("hnsw.ef_search=1; DROP TABLE inj_victim", "expected an integer"),
        ("hnsw.ef_search=100 -- comment", "expected an integer"),
        ("hnsw.ef_search;DROP TABLE inj_victim=1", "is not a setting name"),
        ("hnsw.ef_séarch=40", "is not a setting name"),
        ('hnsw."ef_search"=40', "is not a setting name"),
        ("work_mem=64MB'; DROP TABLE inj_victim; --", "expected an integer"),
        ("search_path=public; DROP TABLE inj_victim", "the server refused the settings"),
        ("enable_seqscan=off; DROP TABLE inj_victim", "expected on or off"),
        ("hnsw.iterative_scan=off'; DROP TABLE inj_victim; --", "expected one of"),
    ],
)
def test_hostile_settings_are_refused(setting, message, hostile, clean, conn, pgeval):
    ensure_testset(conn, "inj", "unused", 20, 8)
    assert _add_target(pgeval)[0] == 0
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "inj",
        "--target",
        "hostile",
        "--stages",
        "exact",
        "--repeat",
        "1",
        "--set",
        setting,
    )
    assert code == 1 and err.startswith("pgeval: error: field '--set': ") and message in err, err
    assert err.count("\n") == 1
    assert _victim_alive(conn)
    assert conn.execute("SELECT count(*) FROM pgeval.experiment").fetchone()[0] == 0


def test_string_setting_is_a_bound_value(hostile, clean, conn, pgeval):
    ensure_testset(conn, "inj", "unused", 20, 8)
    assert _add_target(pgeval)[0] == 0
    value = "x'); DROP TABLE inj_victim; --"
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "inj",
        "--target",
        "hostile",
        "--stages",
        "exact",
        "--repeat",
        "1",
        "--name",
        "inj-app",
        "--set",
        f"application_name={value}",
    )
    assert code == 0, err
    assert _victim_alive(conn)
    settings = conn.execute(
        "SELECT params->'settings' FROM pgeval.run WHERE name = 'inj-app.exact.1'"
    ).fetchone()[0]
    assert settings["application_name"] == value


def test_hostile_names_of_runs_test_sets_and_targets(hostile, clean, conn, pgeval, tmp_file):
    name = "ts'); DELETE FROM pgeval.run; --集"
    make_testset(
        conn,
        name,
        {"q1": {"c1": 2}, "q2": {"c2": 1}},
        embeddings={"q1": np.ones(8), "q2": np.ones(8)},
    )
    run = 'r"; DROP TABLE inj_victim; --'
    path = tmp_file("run.trec", "q1 Q0 c1 1 2.0 t\nq2 Q0 c9 1 1.0 t\n")
    code, out, err = pgeval("run", "import", str(path), "--testset", name, "--name", run)
    assert code == 0, err
    code, out, err = pgeval("metrics", run, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["recall@3"] == pytest.approx(0.5)
    code, out, err = pgeval("run", "export", run, "--format", "trec")
    assert code == 0 and out.splitlines()[0].startswith("q1 Q0 c1 1 ")
    target = "t'; DROP TABLE inj_victim; --"
    code, out, err = pgeval(
        "target",
        "add",
        target,
        "--schema",
        SCHEMA,
        "--table",
        TABLE,
        "--id-column",
        ID,
        "--vector-column",
        VEC,
    )
    assert code == 0, err
    code, out, err = pgeval("target", "remove", target)
    assert code == 0, err
    assert _victim_alive(conn)


def test_vectors_are_parameters(hostile, clean, conn):
    """Query vectors reach the server as bound parameters, so even a vector text that would be
    SQL if spliced is only ever parsed as a vector (and refused)."""
    with pytest.raises(Exception) as info:
        conn.execute("SELECT %s::vector", ("[1,2]'; DROP TABLE inj_victim; --",))
    assert "vector" in str(info.value).lower()
    assert vec_text([1, 2]) == "[1,2]" and _victim_alive(conn)
