"""pgeval.evaluate_recall (sql/240_evaluate_recall.sql): the application's statement ($1 the
vector, $2 the tenant) over a query set and a settings grid, stored as a sweep.

- On the same queries and settings it gives `pgeval sweep`'s recall@10 per point (to 1e-9),
  and the stored sweep is read by `pgeval stage-report`.
- Per tenant (group_by) it equals numpy's exact search within the tenant.
- Its exact answer is reused on unchanged data and computed again after a write.
- A role that may only read the knowledge base (pgeval's tables granted as
  docs/least-privilege.md grants them) can call it; it leaves the caller's settings as they were.
- One-line errors: no $1, too few query columns, a grid above its bound, a name taken.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest

from tests import clustered_kb

TABLE, TARGET, DIM, N = "sqler_kb", "sqler", 12, 1500
TENANTS = "sqler_tenants"
ROLE = "sqler_reader"
QUERIES = f"SELECT id AS query_id, e FROM {TABLE} ORDER BY id LIMIT 40"
STATEMENT = f"SELECT id, e <=> $1 AS distance FROM {TABLE} ORDER BY e <=> $1 LIMIT 10"


@pytest.fixture
def kb(database, clean, pgeval, tmp_path):
    clustered_kb.build(
        database,
        tmp_path,
        TABLE,
        dim=DIM,
        n=N,
        nq=1,
        seed=5,
        spread=0.3,
        indexes=[
            f"CREATE INDEX {TABLE}_hnsw ON {TABLE} USING hnsw (e vector_cosine_ops) "
            "WITH (m = 4, ef_construction = 16)"
        ],
    )
    code, _, err = pgeval(
        "target", "add", TARGET, "--table", TABLE, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err
    yield
    clustered_kb.drop(database, TABLE)


def _evaluate(conn, statement: str, queries: str, settings: dict, **kw) -> list[dict]:
    args = "".join(f", {name} => %({name})s" for name in kw)
    cur = conn.execute(
        "SELECT * FROM pgeval.evaluate_recall(%(st)s, %(q)s, %(set)s" + args + ")",
        {"st": statement, "q": queries, "set": json.dumps(settings), **kw},
    )
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def test_recall_equals_the_cli_sweep_and_stage_report_reads_it(kb, conn, pgeval):
    code, out, err = pgeval(
        "sweep",
        "--queries-sql",
        QUERIES,
        "--target",
        TARGET,
        "--stage",
        "hnsw",
        "--param",
        "hnsw.ef_search=4,10,40",
        "--set",
        "enable_seqscan=off",
        "--k",
        "10",
        "--depth",
        "10",
        "--repeat",
        "1",
        "--name",
        "sqler-cli",
        "--format",
        "json",
    )
    assert code == 0, err
    cli = {p["label"]: p for p in json.loads(out)["points"]}
    rows = _evaluate(
        conn,
        STATEMENT,
        QUERIES,
        {"hnsw.ef_search": [4, 10, 40], "enable_seqscan": "off"},
        name="sqler-sql",
    )
    assert [r["label"] for r in rows] == ["ef_search=4", "ef_search=10", "ef_search=40"]
    assert rows[0]["recall"] < 0.99  # ef_search 4 loses neighbours: a real comparison
    for r in rows:
        assert r["recall"] == pytest.approx(cli[r["label"]]["index_recall"], abs=1e-9)
        assert r["rows_mean"] == cli[r["label"]]["rows_mean"]
        assert r["n_queries"] == 40 and r["at_k"] == 10 and r["index_type"] == "hnsw"
        assert r["margin95"] is not None and r["p95_ms"] >= r["p50_ms"] > 0
        assert r["ground_truth"] == "computed"
    code, out, err = pgeval("stage-report", "sqler-sql", "--format", "json")
    assert code == 0, err
    stages = {s["label"]: s for s in json.loads(out)["stages"]}
    for r in rows:
        assert stages[r["label"]]["index_recall@10"]["mean"] == pytest.approx(r["recall"])
    # the dashboard views: one row per sweep point (both sweeps), one per experiment and stage
    cur = conn.execute(
        "SELECT sweep, label, recall, margin95, p95_ms, rows_mean, queries, source, plan_mode "
        "FROM pgeval.sweep_point_history WHERE sweep IN ('sqler-cli', 'sqler-sql') "
        "ORDER BY sweep, point"
    )
    view = [dict(zip([d.name for d in cur.description], v, strict=True)) for v in cur.fetchall()]
    assert [v["source"] for v in view] == ["cli"] * 3 + ["sql"] * 3
    for v, r in zip(view[3:], rows, strict=True):
        assert (v["label"], v["recall"], v["margin95"], v["p95_ms"], v["queries"]) == (
            r["label"],
            r["recall"],
            r["margin95"],
            r["p95_ms"],
            r["n_queries"],
        )
        assert v["plan_mode"] == "custom"
    for v in view[:3]:
        assert v["recall"] == pytest.approx(cli[v["label"]]["index_recall"], abs=1e-12)
        assert v["margin95"] is not None
    stage_rows = dict(
        conn.execute(
            "SELECT label, index_recall FROM pgeval.experiment_stage_history "
            "WHERE experiment = 'sqler-sql' AND role = 'ann'"
        ).fetchall()
    )
    assert stage_rows == pytest.approx({r["label"]: r["recall"] for r in rows})


def _tenant_kb(database) -> dict:
    return clustered_kb.tenant_table(
        database, TENANTS, dim=DIM, n=900, shares={"t1": 0.6, "t2": 0.3, "t3": 0.1}
    )


def test_per_tenant_recall_equals_numpy_within_the_tenant(database, conn, clean):
    docs = _tenant_kb(database)
    try:
        statement = (
            f"SELECT id, e <=> $1 AS distance FROM {TENANTS} WHERE tenant = $2 "
            "ORDER BY e <=> $1 LIMIT 10"
        )
        queries = f"SELECT id AS query_id, e, tenant FROM {TENANTS} ORDER BY id LIMIT 60"
        settings = {
            "hnsw.ef_search": [10, 40],
            "enable_seqscan": "off",
            "enable_bitmapscan": "off",
            "hnsw.iterative_scan": "relaxed_order",
        }
        rows = _evaluate(conn, statement, queries, settings, group_by="tenant", name="sqler-t")
        assert sorted({r["group_key"] for r in rows}) == ["t1", "t2", "t3"]
        assert {r["sweep"] for r in rows} == {f"sqler-t/tenant={t}" for t in ("t1", "t2", "t3")}
        groups = conn.execute(
            "SELECT DISTINCT group_key ->> 'tenant' FROM pgeval.sweep_point_history "
            "WHERE sweep LIKE 'sqler-t/%' ORDER BY 1"
        ).fetchall()
        assert groups == [("t1",), ("t2",), ("t3",)]
        qids = [r[0] for r in conn.execute(f"SELECT id FROM {TENANTS} ORDER BY id LIMIT 60")]
        for r in rows:
            expected = []
            for qid in (q for q in qids if docs[q][1] == r["group_key"]):
                ann = _statement_rows(conn, statement, qid, r["configurations"])
                exact = _numpy_exact(docs, docs[qid][0], r["group_key"])
                d_k = exact[min(10, len(exact)) - 1]
                n = min(10, len(exact))
                hits = sum(1 for d in ann[:10] if d <= d_k + 1e-6 * max(1.0, abs(d_k)))
                expected.append(hits / n)
            assert r["n_queries"] == len(expected)
            assert r["recall"] == pytest.approx(float(np.mean(expected)), abs=1e-6)
    finally:
        clustered_kb.drop(database, TENANTS)


def _statement_rows(conn, statement: str, qid: str, settings: dict) -> list[float]:
    """The distances the statement returns for query ``qid`` (the row's own vector and tenant),
    run as the application runs it, ranked by (distance, id) as pgeval ranks them."""
    with conn.transaction():
        for name, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, str(value)))
        vec, tenant = conn.execute(
            f"SELECT e::text, tenant FROM {TENANTS} WHERE id = %s", (qid,)
        ).fetchone()
        sql = statement.replace("$1", "%(v)s::vector").replace("$2", "%(t)s")
        rows = conn.execute(sql, {"v": vec, "t": tenant}).fetchall()
    return sorted(d for _, d in rows)


def _numpy_exact(docs: dict, q: np.ndarray, tenant: str) -> list[float]:
    m = np.array([v for v, t in docs.values() if t == tenant], dtype=np.float64)
    q = q.astype(np.float64)
    d = 1.0 - (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    return sorted(d.tolist())


def test_exact_answer_reused_until_the_data_changes(kb, conn, database):
    settings = {"hnsw.ef_search": [10], "enable_seqscan": "off"}
    first = _evaluate(conn, STATEMENT, QUERIES, settings, name="sqler-gt")
    again = _evaluate(conn, STATEMENT, QUERIES, settings, name="sqler-gt", replace=True)
    assert [r["ground_truth"] for r in first + again] == ["computed", "reused"]
    assert again[0]["recall"] == pytest.approx(first[0]["recall"], abs=1e-12)
    assert (
        conn.execute("SELECT count(*) FROM pgeval.sweep WHERE name LIKE 'sqler-gt%'").fetchone()[0]
        == 1
    )
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"UPDATE {TABLE} SET e = e WHERE id = 'c3'")  # the same content
    assert (
        _evaluate(conn, STATEMENT, QUERIES, settings, name="sqler-gt2")[0]["ground_truth"]
        == "reused"
    )
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"UPDATE {TABLE} SET e = (SELECT e FROM {TABLE} WHERE id = 'c4') WHERE id = 'c3'")
    assert (
        _evaluate(conn, STATEMENT, QUERIES, settings, name="sqler-gt3")[0]["ground_truth"]
        == "computed"
    )


def test_a_role_that_only_reads_the_knowledge_base_can_call_it(kb, conn, database):
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
    conn.execute(f"CREATE ROLE {ROLE} NOLOGIN NOSUPERUSER")
    grants = [
        f"GRANT SELECT ON {TABLE} TO {ROLE}",
        f"GRANT USAGE ON SCHEMA pgeval TO {ROLE}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgeval TO {ROLE}",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgeval TO {ROLE}",
    ]
    try:
        for g in grants:
            conn.execute(g)
        with database.connect() as c:
            c.execute("SET hnsw.ef_search = 33")
            c.execute(f"SET ROLE {ROLE}")
            rows = _evaluate(c, STATEMENT, QUERIES, {"hnsw.ef_search": [10, 20]}, name="sqler-ro")
            assert [r["label"] for r in rows] == ["ef_search=10", "ef_search=20"]
            assert c.execute("SELECT current_setting('hnsw.ef_search')").fetchone()[0] == "33"
            c.commit()
            with pytest.raises(psycopg.Error) as err:
                c.execute(f"DELETE FROM {TABLE}")
            assert "permission denied" in str(err.value)
    finally:
        conn.execute(f"REASSIGN OWNED BY {ROLE} TO current_user")
        conn.execute(f"DROP OWNED BY {ROLE}")
        conn.execute(f"DROP ROLE {ROLE}")


@pytest.mark.parametrize(
    "statement,queries,settings,kw,message",
    [
        (
            f"SELECT id FROM {TABLE} ORDER BY e <=> '[1]' LIMIT 10",
            QUERIES,
            {},
            {},
            "has no $1",
        ),
        (
            f"SELECT id FROM {TABLE} WHERE id <> $2 ORDER BY e <=> $1 LIMIT 10",
            QUERIES,
            {},
            {},
            "uses $2 but the queries statement yields 1 column",
        ),
        (STATEMENT, QUERIES, {"hnsw.ef_search": list(range(1, 40))}, {}, "the grid has 39"),
        (STATEMENT, QUERIES + "; DROP TABLE x", {}, {}, "two statements"),
        (STATEMENT, QUERIES, {"hnsw.nope": 1}, {}, 'unknown setting "hnsw.nope"'),
        (STATEMENT, QUERIES, {}, {"group_by": "tenant"}, 'group_by "tenant" is not a column'),
    ],
)
def test_bad_calls_are_refused_in_one_line(kb, conn, statement, queries, settings, kw, message):
    with pytest.raises(psycopg.Error) as err:
        _evaluate(conn, statement, queries, settings, **kw)
    text = err.value.diag.message_primary or ""
    assert text.startswith("pgeval.evaluate_recall: ") and "\n" not in text, text
    assert message in text, text
    assert conn.execute("SELECT count(*) FROM pgeval.sweep").fetchone()[0] == 0


def test_a_name_taken_is_refused(kb, conn):
    _evaluate(conn, STATEMENT, QUERIES, {"hnsw.ef_search": 40}, name="sqler-n")
    with pytest.raises(psycopg.Error) as err:
        _evaluate(conn, STATEMENT, QUERIES, {"hnsw.ef_search": 40}, name="sqler-n")
    assert "a sweep named 'sqler-n' exists" in (err.value.diag.message_primary or "")
