"""`pgeval testset list|show|delete` and the load summary, through the CLI."""

from __future__ import annotations

import json

from helpers import make_run

CASES = (
    '{"id": "q1", "query": "退款多久到账", "relevant": {"c12": 3, "c40": 1}, '
    '"type": ["fuzzy", "multi_answer"]}\n'
    '{"id": "q2", "query": "reset password", "relevant": ["c7"], "type": ["exact"], '
    '"embedding": [1, 2]}\n'
    '{"id": "q3", "query": "shoe size of the CEO", "answerable": false}\n'
)


def test_load_summary_table_and_json(clean, tmp_file, pgeval):
    path = tmp_file("cases.jsonl", CASES)
    code, out, err = pgeval("testset", "load", str(path), "--name", "kb-v1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"loaded test set 'kb-v1' (id 1) from {path} (jsonl) in ")
    assert lines[1:3] == [
        "queries 3: valid 2, excluded (no relevant) 0, unanswerable 1",
        "judgements 3",
    ]
    assert lines[3].startswith("content hash sha256:") and len(lines[3]) == 20 + 64
    code, out, _ = pgeval("testset", "load", str(path), "--name", "kb-v1", "--output", "json")
    report = json.loads(out)
    assert report["unchanged"] is True and report["n_valid"] == 2 and report["testset_id"] == 1


def test_list_show_delete(clean, conn, tmp_file, pgeval):
    pgeval("testset", "load", str(tmp_file("cases.jsonl", CASES)), "--name", "kb-v1")
    pgeval(
        "testset",
        "load",
        str(tmp_file("t.qrels", "1 0 a 2\n1 0 b 4\n2 0 c 4\n")),
        "--name",
        "cran",
        "--grade-map",
        "1=3,2=2,3=1,4=0",
    )
    make_run(conn, "r1", "kb-v1", {"q1": ["c12"]})

    code, out, _ = pgeval("testset", "list", "--format", "json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == {"kb-v1", "cran"}
    assert {
        k: rows["kb-v1"][k]
        for k in ("queries", "judgements", "valid", "excluded", "unanswerable", "runs", "format")
    } == {
        "queries": 3,
        "judgements": 3,
        "valid": 2,
        "excluded": 0,
        "unanswerable": 1,
        "runs": 1,
        "format": "jsonl",
    }
    assert (rows["cran"]["valid"], rows["cran"]["excluded"]) == (1, 1)
    code, out, _ = pgeval("testset", "list")
    assert code == 0 and "kb-v1" in out and "cran" in out

    code, out, _ = pgeval("testset", "show", "kb-v1", "--format", "json")
    info = json.loads(out)
    assert info["grades"] == {"1": 2, "3": 1}
    assert info["types"] == {"exact": 1, "fuzzy": 1, "multi_answer": 1}
    assert (info["with_embedding"], info["embedding_dim"], info["runs"]) == (1, 2, 1)
    code, out, _ = pgeval("testset", "show", "cran")
    assert code == 0
    assert "grade map     1=3,2=2,3=1,4=0" in out
    assert (
        "queries       2: valid 1, excluded (no relevant) 1, unanswerable 0, without text 2" in out
    )

    code, out, _ = pgeval("testset", "delete", "kb-v1")
    assert (code, out.strip()) == (0, "deleted test set 'kb-v1' and 1 run(s) of it")
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM pgeval.query").fetchone()[0] == 2


def test_unknown_names(clean, pgeval):
    for args in (("show", "nope"), ("delete", "nope")):
        code, out, err = pgeval("testset", *args)
        assert (code, out) == (1, "")
        assert err.strip() == (
            "pgeval: error: no test set named 'nope' (see `pgeval testset list`)"
        )
    code, out, _ = pgeval("testset", "list")
    assert (code, out.strip()) == (
        0,
        "no test sets (load one with `pgeval testset load FILE --name NAME`)",
    )


def test_help_teaches_with_examples(pgeval):
    code, out, _ = pgeval("testset", "load", "--help")
    assert code == 0
    assert "--grade-map 1=3,2=2,3=1,4=0,-1=0" in out and "Examples:" in out


def test_database_without_schema_pgeval(database, conn, pgeval, tmp_file):
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    conn.execute("DROP DATABASE IF EXISTS testset_no_schema")
    conn.execute("CREATE DATABASE testset_no_schema")
    try:
        params = conninfo_to_dict(database.uri())
        params["dbname"] = "testset_no_schema"
        dsn = make_conninfo(**params)
        path = tmp_file("cases.jsonl", CASES)
        for args in (("list",), ("show", "x"), ("delete", "x"), ("load", str(path), "--name", "x")):
            code, out, err = pgeval("--dsn", dsn, "testset", *args)
            assert (code, out) == (1, "")
            assert err.strip() == (
                "pgeval: error: schema pgeval is not installed in this database: run `pgeval init`"
            )
        with psycopg.connect(dsn) as other:
            assert other.execute("SELECT to_regnamespace('pgeval')").fetchone()[0] is None
    finally:
        conn.execute("DROP DATABASE IF EXISTS testset_no_schema WITH (FORCE)")
