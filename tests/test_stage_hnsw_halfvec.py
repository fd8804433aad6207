"""The ``hnsw-halfvec`` stage kind (issue "Index designs and tenants", a first kind): HNSW over
``(col::halfvec(N)) halfvec_cosine_ops`` on a ``vector`` column, found beside the plain HNSW
index, each stage served by its own index; its recall (against exact search on the full
vectors) equals what the application's own halfvec statement gets, in a pipeline and in a
sweep. Adding it took one module (stages/hnsw_halfvec.py) and one registry line."""

from __future__ import annotations

import json

import clustered_kb
import numpy as np
import pytest

DIM, N, NQ, K = 32, 3000, 60, 10
TABLE = "hv_kb"


@pytest.fixture(scope="module")
def kb(database, tmp_path_factory):
    docs, queries, path = clustered_kb.build(
        database,
        tmp_path_factory.mktemp("halfvec"),
        TABLE,
        dim=DIM,
        n=N,
        nq=NQ,
        seed=31,
        spread=0.5,
        indexes=[
            f"CREATE INDEX hv_plain ON {TABLE} USING hnsw (e vector_cosine_ops) WITH (m = 8)",
            f"CREATE INDEX hv_half ON {TABLE} USING hnsw ((e::halfvec({DIM})) "
            "halfvec_cosine_ops) WITH (m = 8)",
        ],
    )
    nd = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    nq = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    exact = [set(f"c{i + 1}" for i in row) for row in np.argsort(-(nq @ nd.T), axis=1)[:, :K]]
    yield path, queries, exact
    clustered_kb.drop(database, TABLE)


def _by_hand(database, queries, ef: int) -> float:
    """Index recall@K (docs/METRICS.md) of the application's own halfvec statement: its first K
    rows whose full-precision distance is within the K-th exact distance (plus 1e-6 relative),
    the exact distances from a sequential scan on the same server."""
    total = 0.0
    with database.connect(results=False) as c:
        for q in queries:
            c.execute("SET LOCAL enable_indexscan = off")
            d_k = c.execute(
                f"SELECT e <=> %s::vector FROM {TABLE} ORDER BY 1 LIMIT {K}",
                (clustered_kb.vtext(q),),
            ).fetchall()[-1][0]
            c.rollback()
            c.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
            c.execute("SET LOCAL enable_seqscan = off")
            sql = (
                f"SELECT e <=> %s::vector FROM {TABLE} ORDER BY e::halfvec({DIM}) <=> "
                f"%s::vector::halfvec({DIM}) LIMIT {K}"
            )
            plan = "\n".join(
                r[0]
                for r in c.execute("EXPLAIN " + sql, (clustered_kb.vtext(q), clustered_kb.vtext(q)))
            )
            assert "hv_half" in plan, plan
            full = [
                r[0]
                for r in c.execute(sql, (clustered_kb.vtext(q), clustered_kb.vtext(q))).fetchall()
            ]
            c.rollback()
            total += sum(1 for d in full if d <= d_k + 1e-6 * max(1.0, abs(d_k))) / K
    return total / len(queries)


def _sweep(pgeval, path, stage: str, ef: str, name: str, json_out: bool = True):
    args = ["sweep", "--queries-file", str(path), "--target", "hv", "--stage", stage]
    args += ["--param", f"hnsw.ef_search={ef}", "--repeat", "1", "--set", "enable_seqscan=off"]
    return pgeval(*args, *(["--format", "json"] if json_out else []), "--name", name)


def test_halfvec_kind_in_a_sweep_is_the_applications_recall(kb, database, clean, conn, pgeval):
    path, queries, exact = kb
    code, out, err = pgeval(
        "target", "add", "hv", "--table", TABLE, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err
    code, out, err = _sweep(pgeval, path, "hnsw-halfvec", "10,40", "hv-sweep")
    assert code == 0, err
    doc = json.loads(out)
    for point in doc["points"]:
        ef = int(point["settings"]["hnsw.ef_search"])
        assert point["index_recall"] == pytest.approx(_by_hand(database, queries, ef), abs=1e-12)
    # each run says which index served it and what statement it timed
    params = conn.execute(
        "SELECT params FROM pgeval.run WHERE name = 'hv-sweep.ef_search=40.1'"
    ).fetchone()[0]
    assert params["index"] == "hv_half" and params["kind"] == "hnsw-halfvec"
    assert params["role"] == "ann"
    assert f"::halfvec({DIM})" in params["timed_statement"]


def test_plain_and_halfvec_stages_each_use_their_own_index(kb, clean, conn, pgeval, tmp_path):
    path, _, _ = kb
    code, out, err = pgeval(
        "target", "add", "hv", "--table", TABLE, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err
    code, out, err = _sweep(pgeval, path, "hnsw", "40", "hv-plain")
    assert code == 0, err
    params = conn.execute(
        "SELECT params FROM pgeval.run WHERE name = 'hv-plain.ef_search=40.1'"
    ).fetchone()[0]
    assert params["index"] == "hv_plain" and "halfvec" not in params["timed_statement"]
    # no halfvec index: the stage says so, with the index to create (the plain one serves hnsw)
    conn.execute("DROP INDEX hv_half")
    try:
        code, out, err = _sweep(pgeval, path, "hnsw-halfvec", "40", "hv-none", json_out=False)
        assert code == 1 and "Traceback" not in err
        assert err.strip().endswith(
            f'needs a hnsw index on ("e")::halfvec({DIM}) with halfvec_cosine_ops, and {TABLE} '
            f'has none: CREATE INDEX CONCURRENTLY ON {TABLE} USING hnsw ((("e")::halfvec({DIM})) '
            "halfvec_cosine_ops)"
        ), err
    finally:
        conn.execute(
            f"CREATE INDEX hv_half ON {TABLE} USING hnsw ((e::halfvec({DIM})) halfvec_cosine_ops) "
            "WITH (m = 8)"
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    "stage, param, expression",
    [
        ("hnsw-halfvec", "hnsw.ef_search=40", f"::halfvec({DIM})"),
        ("hnsw-bq", "bq.candidates=40", f'binary_quantize("e")::bit({DIM})'),
    ],
)
def test_build_sweeps_build_the_kinds_expression_index(
    kb, clean, conn, pgeval, stage, param, expression
):
    """--build on a scratch copy builds the index the kind searches (on its expression, with its
    operator class), and the sweep measures through it; nothing is left behind."""
    path, _, _ = kb
    code, out, err = pgeval(
        "target", "add", "hv", "--table", TABLE, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err
    args = ["sweep", "--queries-file", str(path), "--target", "hv", "--stage", stage]
    args += (
        ["--build", "m=8", "--param", param, "--set", "hnsw.ef_search=200"]
        if stage == "hnsw-bq"
        else ["--build", "m=8", "--param", param]
    )
    code, out, err = pgeval(
        *args,
        "--set",
        "enable_seqscan=off",
        "--repeat",
        "1",
        "--format",
        "json",
        "--name",
        f"built-{stage}",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["measured"] == 1 and 0 < doc["points"][0]["index_recall"] <= 1
    assert doc["points"][0]["index_bytes"] > 0
    params = conn.execute(
        "SELECT params FROM pgeval.run WHERE name LIKE %s AND stage <> 'exact'",
        (f"built-{stage}.%",),
    ).fetchone()[0]
    assert expression in params["timed_statement"]
    assert "pgeval_scratch" in params["timed_statement"]  # the scratch copy, not hv_kb
    schemas = conn.execute(
        "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pgeval\\_scratch%'"
    ).fetchone()[0]
    assert schemas == 0
