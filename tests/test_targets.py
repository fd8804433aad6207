"""`pgeval target add|list|show|remove`: catalog validation, the stored spec, the WeKnora preset
(mixed-dimension halfvec, partial HNSW per dimension, duplicate rows per chunk, filters)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import vector_kb as kb

from evaluator.run.pipeline import PipelineConfig, run_pipeline


@pytest.fixture
def tables(clean, conn):
    kb.build(conn)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS va_plain (id int PRIMARY KEY, label text, "
        "flag boolean, emb vector(3), raw vector, notvec real[])"
    )
    return clean


def test_add_show_list_remove(tables, pgeval, conn):
    code, out, err = pgeval(
        "target",
        "add",
        "one",
        "--table",
        kb.ONE,
        "--id-column",
        "doc_id",
        "--vector-column",
        "emb",
        "--text-column",
        "body",
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["spec"]["vector_type"] == "vector" and doc["spec"]["unique_id"] is True
    assert doc["spec"]["dimension"] == kb.data()[0].shape[1]
    assert [i["name"] for i in doc["indexes"]] == ["va_one_hnsw"]
    spec = conn.execute("SELECT spec FROM pgeval.target WHERE name = 'one'").fetchone()[0]
    assert spec["table"] == kb.ONE and spec["distance"] == "cosine"
    code, out, _ = pgeval("target", "list", "--format", "json")
    assert [r["target"] for r in json.loads(out)] == ["one"]
    # a helper target over a scratch copy of pgeval's (advise's `one~sample1000`) is not the
    # user's: not listed (issue 50); a user's name with '~' is
    for name, schema in (("one~sample1000", "pgeval_scratch_sample_0123456789"), ("a~b", None)):
        conn.execute(
            "INSERT INTO pgeval.target (name, spec) "
            "SELECT %s, spec || jsonb_build_object('schema', %s::text) "
            "FROM pgeval.target WHERE name = 'one'",
            (name, schema),
        )
    code, out, _ = pgeval("target", "list", "--format", "json")
    assert [r["target"] for r in json.loads(out)] == ["a~b", "one"]
    conn.execute("DELETE FROM pgeval.target WHERE name LIKE '%~%'")
    code, out, _ = pgeval("target", "show", "one")
    assert code == 0 and "va_one_hnsw" in out
    # same definition again: fine; another definition: Conflict unless --replace
    assert (
        pgeval(
            "target",
            "add",
            "one",
            "--table",
            kb.ONE,
            "--id-column",
            "doc_id",
            "--vector-column",
            "emb",
            "--text-column",
            "body",
        )[0]
        == 0
    )
    code, _, err = pgeval(
        "target",
        "add",
        "one",
        "--table",
        kb.ONE,
        "--id-column",
        "doc_id",
        "--vector-column",
        "emb",
        "--distance",
        "l2",
    )
    assert code == 1 and "exists with another definition" in err
    assert pgeval("target", "remove", "one")[0] == 0
    code, _, err = pgeval("target", "remove", "one")
    assert code == 1 and "no target named 'one'" in err


@pytest.mark.parametrize(
    "args, message",
    [
        ("--table nosuch --id-column id --vector-column emb", "table 'nosuch' does not exist"),
        (
            "--table va_plain --id-column nope --vector-column emb",
            "field '--id-column': column 'nope' does not exist in va_plain",
        ),
        (
            "--table va_plain --id-column id --vector-column notvec",
            "column 'notvec' of va_plain is real[], not a pgvector vector or halfvec",
        ),
        (
            "--table va_plain --id-column id --vector-column emb --dimension 4",
            "column 'emb' is vector(3) but --dimension is 4",
        ),
        (
            "--table va_plain --id-column id --vector-column emb --where flag=perhaps",
            "field '--where': filter {'flag': 'perhaps'} is not valid for va_plain",
        ),
        (
            "--table va_plain --id-column id --vector-column emb --where nope=1",
            "column 'nope' does not exist",
        ),
        (
            "--table va_plain --id-column id --vector-column emb --where flag",
            "'flag' is not COLUMN=VALUE",
        ),
        ("--table va_plain --vector-column emb", "--id-column required"),
        ("--preset weknora", "--preset weknora needs --dimension"),
    ],
)
def test_bad_targets_are_refused(tables, pgeval, conn, args, message):
    code, out, err = pgeval(f"target add bad {args}")
    assert code == 1
    assert message in err and "Traceback" not in err
    assert conn.execute("SELECT count(*) FROM pgeval.target").fetchone()[0] == 0


def test_untyped_column_dimension_from_a_sample_row(tables, pgeval, conn):
    conn.execute("TRUNCATE va_plain")
    conn.execute("INSERT INTO va_plain VALUES (1, 'a', true, '[1,0,0]', '[1,2,3,4,5]', NULL)")
    code, out, err = pgeval(
        "target add raw --table va_plain --id-column id --vector-column raw "
        "--where flag=true --where label=a --format json"
    )
    assert code == 0, err
    spec = json.loads(out)["spec"]
    assert spec["dimension"] == 5 and spec["filters"] == {"flag": "true", "label": "a"}
    assert "no declared dimension" in err and "no vector index" in err


def test_where_sql_binds_values(tables, conn):
    from evaluator.targets.targets import Target

    t = Target(
        name="x",
        table="va_plain",
        id_column="id",
        vector_column="emb",
        filters={"label": "a'; DROP TABLE va_plain; --", "flag": "true"},
    )
    where, params = t.where()
    assert where.as_string(conn) == ' WHERE "label" = %s AND "flag" = %s'
    assert params == ["a'; DROP TABLE va_plain; --", "true"]
    where, named = t.where_named()
    assert where.as_string(conn) == ' WHERE "label" = %(f0)s AND "flag" = %(f1)s'
    assert named == {"f0": "a'; DROP TABLE va_plain; --", "f1": "true"}


def weknora_setup(pgeval, conn, dim):
    kb.testset(conn, "va", n_queries=40)
    code, out, err = pgeval(
        f"target add wk --preset weknora --schema va_wk --dimension {dim} "
        "--knowledge-base-id kb1 --format json"
    )
    assert code == 0, err
    return json.loads(out)


def test_weknora_preset_spec_and_partial_index(tables, pgeval, conn):
    dim = kb.data()[0].shape[1]
    doc = weknora_setup(pgeval, conn, dim)
    spec = doc["spec"]
    assert spec["table"] == "embeddings" and spec["vector_type"] == "halfvec"
    assert spec["dimension_column"] == "dimension" and spec["dimension"] == dim
    assert spec["filters"] == {"is_enabled": "true", "knowledge_base_id": "kb1"}
    assert spec["unique_id"] is False
    assert {i["name"] for i in doc["indexes"]} == {f"va_wk_hnsw_{dim}", "va_wk_hnsw_8"}


def test_weknora_pipeline_collapses_duplicates_and_filters(tables, pgeval, conn, database):
    dim = kb.data()[0].shape[1]
    weknora_setup(pgeval, conn, dim)
    run_pipeline(
        database,
        PipelineConfig(
            testset="va",
            target="wk",
            stages="exact,hnsw",
            depth=50,
            repeat=1,
            name="wk",
            settings={"hnsw.ef_search": "200"},
        ),
    )
    params = conn.execute("SELECT params FROM pgeval.run WHERE name = 'wk.hnsw.1'").fetchone()[0]
    assert params["index"] == f"va_wk_hnsw_{dim}"  # the partial index of dimension N
    assert params["overfetch"] == 2.0 and params["rows_returned_min"] == 50
    hnsw = conn.execute(
        "SELECT count(*), count(DISTINCT (query_id, chunk_id)), max(rank) FROM "
        "pgeval.result JOIN pgeval.run USING (run_id) WHERE name = 'wk.hnsw.1'"
    ).fetchone()
    assert hnsw[0] == hnsw[1] and hnsw[2] == 50  # 100 rows fetched, 50 chunks kept
    rows = conn.execute(
        "SELECT x.query_id, x.rank, x.chunk_id, x.score FROM pgeval.result x "
        "JOIN pgeval.run r USING (run_id) WHERE r.name = 'wk.exact.1' "
        "ORDER BY 1, 2"
    ).fetchall()
    by_q: dict[str, list] = {}
    for qid, _rank, chunk, score in rows:
        by_q.setdefault(qid, []).append((chunk, score))
    # truth: best halfvec distance per enabled kb1 chunk of dimension N, computed in numpy
    truth_rows = conn.execute(
        "SELECT chunk_id, embedding::text FROM va_wk.embeddings WHERE "
        "dimension = %s AND is_enabled AND knowledge_base_id = 'kb1'",
        (dim,),
    ).fetchall()
    chunks = np.array([r[0] for r in truth_rows])
    mat = np.array([np.array(r[1].strip("[]").split(","), dtype=np.float64) for r in truth_rows])
    for qid, qtext in conn.execute("SELECT query_id, embedding::halfvec::text FROM pgeval.query"):
        q = np.array(qtext.strip("[]").split(","), dtype=np.float64)
        d = 1 - mat @ q / (np.linalg.norm(mat, axis=1) * np.linalg.norm(q))
        best: dict[str, float] = {}
        for c, dist in zip(chunks, d, strict=True):
            best[c] = min(best.get(c, 9.0), dist)
        got = by_q[qid]
        assert len(got) == 50 and len({c for c, _ in got}) == 50  # one entry per chunk
        assert all(c.startswith("c") and int(c[1:]) <= 600 for c, _ in got)  # kb1, dimension N
        expected = sorted(best.items(), key=lambda kv: (kv[1], kv[0]))[:50]
        assert np.allclose([s for _, s in got], [s for _, s in expected], atol=1e-4)
        assert [s for _, s in got] == sorted(s for _, s in got)


def test_weknora_dimension_mismatch_stops_before_any_query(tables, pgeval, conn, database):
    from evaluator.core.errors import InputError

    weknora_setup(pgeval, conn, 8)  # the 8-dimension partial index; queries are larger
    with pytest.raises(
        InputError,
        match=r"gives \d+-dimensional vectors but target 'wk' "
        r"searches halfvec\(8\)",
    ):
        run_pipeline(
            database,
            PipelineConfig(
                testset="va", target="wk", stages="exact,hnsw", repeat=1, name="mismatch"
            ),
        )
    assert conn.execute("SELECT count(*) FROM pgeval.experiment").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == 0
