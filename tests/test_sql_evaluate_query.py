"""pgeval.evaluate_query_recall (sql/230_evaluate_query_recall.sql): the application's SELECT,
its vector a literal, against its exact twin, on the real server.

- A per-tenant statement returning its distance gives recall by the tie rule equal to numpy's
  exact search within the tenant; AlloyDB's form (ids only, no distance) gives set membership.
- The exact twin's plan scans no ANN index (the tenant's btree may serve it); the caller's
  settings and read-only mode are as they were; one row per point of a settings grid.
- A role with SELECT on the table and EXECUTE on pgeval, in a READ ONLY transaction, can call it.
- One-line errors: no vector literal, two statements, a write (INSERT, a writing function, a
  data-modifying WITH), an unknown or guarded setting, a grid above its bound.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest

from tests import clustered_kb

TABLE, DIM, N = "sqleq_kb", 8, 1200
ROLE = "sqleq_reader"


@pytest.fixture(scope="module")
def kb(database):
    docs = clustered_kb.tenant_table(database, TABLE, dim=DIM, n=N, shares={"a": 0.7, "b": 0.3})
    yield docs
    clustered_kb.drop(database, TABLE)


def _query_vector(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=DIM).astype(np.float32)


def _exact_cosine(docs: dict, q: np.ndarray, tenant: str | None) -> list[tuple[str, float]]:
    rows = [(i, v) for i, (v, t) in docs.items() if tenant is None or t == tenant]
    m = np.array([v for _, v in rows], dtype=np.float64)
    d = 1.0 - (m @ q.astype(np.float64)) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    order = np.argsort(d, kind="stable")
    return [(rows[i][0], float(d[i])) for i in order]


def _evaluate(conn, statement: str, settings: dict | None = None) -> list[dict]:
    cur = conn.execute(
        "SELECT * FROM pgeval.evaluate_query_recall(%s, %s)",
        (statement, json.dumps(settings or {})),
    )
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _tenant_statement(q: np.ndarray, tenant: str, k: int = 10) -> str:
    return (
        f"SELECT id, e <=> '{clustered_kb.vtext(q)}' AS distance FROM {TABLE} "
        f"WHERE tenant = '{tenant}' ORDER BY e <=> '{clustered_kb.vtext(q)}' LIMIT {k}"
    )


def test_per_tenant_recall_equals_numpy_within_the_tenant(kb, conn):
    for seed in range(4):
        q = _query_vector(seed)
        # vtext rounds to 6 digits: the server's vector is the literal, numpy's the same
        q = np.array([float(f"{x:.6f}") for x in q], dtype=np.float32)
        statement = _tenant_statement(q, "b")
        settings = {"hnsw.ef_search": 10, "enable_seqscan": "off", "enable_bitmapscan": "off"}
        (row,) = _evaluate(conn, statement, settings)
        ann = _run(conn, statement, settings)
        exact = _exact_cosine(kb, q, "b")
        d_k = exact[9][1]
        hits = sum(1 for _, d in ann[:10] if d <= d_k + 1e-6 * max(1.0, abs(d_k)))
        assert row["k"] == 10
        assert row["rows_returned"] == len(ann)
        assert row["recall"] == pytest.approx(hits / 10, abs=1e-9)
        assert row["index_type"] == "hnsw"
        assert row["ann_execution_time"] > 0 and row["ground_truth_execution_time"] > 0
        # the exact twin: no ANN index in its plan (the tenant's btree may serve it)
        twin = conn.execute(
            "SELECT method FROM pgeval.plan_indexes(%s)", (json.dumps(row["exact_plan"]),)
        ).fetchall()
        assert ("hnsw",) not in twin, twin
        assert [r[0] for r in _run(conn, statement, {"enable_indexscan": "off"})] == [
            name for name, _ in exact[:10]
        ]


def _run(conn, statement: str, settings: dict) -> list[tuple]:
    """The statement as the application runs it, with ``settings`` (SET LOCAL)."""
    with conn.transaction():
        for name, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, str(value)))
        rows = conn.execute(statement).fetchall()
    return rows


def test_a_setting_that_loses_neighbours_is_measured(kb, conn):
    """At ef_search 1 on the small tenant without iterative scan the index returns few of the
    tenant's rows: recall below 1, and the same statement at iterative scan reaches more."""
    q = _query_vector(7)
    statement = _tenant_statement(q, "b")
    rows = _evaluate(
        conn,
        statement,
        {
            "hnsw.ef_search": 10,
            "enable_seqscan": "off",
            "enable_bitmapscan": "off",
            "hnsw.iterative_scan": ["off", "relaxed_order"],
        },
    )
    assert [r["id"] for r in rows] == [1, 2]
    assert [r["configurations"]["hnsw.iterative_scan"] for r in rows] == ["off", "relaxed_order"]
    assert rows[0]["recall"] < 1.0 and rows[0]["rows_returned"] < 10
    assert rows[1]["recall"] > rows[0]["recall"]


def test_alloydb_form_without_a_distance_counts_exact_rows(kb, conn):
    q = _query_vector(3)
    statement = f"SELECT id FROM {TABLE} ORDER BY e <=> '{clustered_kb.vtext(q)}' LIMIT 10"
    (row,) = _evaluate(conn, statement, {"hnsw.ef_search": 10, "enable_seqscan": "off"})
    ann = [r[0] for r in _run(conn, statement, {"hnsw.ef_search": 10, "enable_seqscan": "off"})]
    exact = {r[0] for r in _run(conn, statement, {"enable_indexscan": "off"})}
    assert row["recall"] == pytest.approx(len(set(ann) & exact) / 10, abs=1e-9)
    assert row["index_type"] == "hnsw"
    plan_nodes = json.dumps(row["exact_plan"])
    assert f"{TABLE}_hnsw" not in plan_nodes and f"{TABLE}_hnsw" in json.dumps(row["plan"])


def test_settings_and_read_only_mode_are_restored(kb, conn):
    conn.execute("SET hnsw.ef_search = 77")
    q = _query_vector(1)
    _evaluate(conn, _tenant_statement(q, "a"), {"hnsw.ef_search": [5, 9], "work_mem": "9MB"})
    got = conn.execute(
        "SELECT current_setting('hnsw.ef_search'), current_setting('transaction_read_only'), "
        "current_setting('enable_indexscan'), current_setting('work_mem')"
    ).fetchone()
    assert got == ("77", "off", "on", "4MB")
    conn.execute("RESET hnsw.ef_search")


def test_a_read_only_role_in_a_read_only_transaction_can_call_it(kb, database, conn):
    conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
    conn.execute(f"CREATE ROLE {ROLE} NOLOGIN NOSUPERUSER")
    try:
        conn.execute(f"GRANT SELECT ON {TABLE} TO {ROLE}")
        conn.execute(f"GRANT USAGE ON SCHEMA pgeval TO {ROLE}")
        q = _query_vector(2)
        with database.connect() as c:
            c.execute("BEGIN READ ONLY")
            c.execute(f"SET LOCAL ROLE {ROLE}")
            (row,) = _evaluate(c, _tenant_statement(q, "a"), {"hnsw.ef_search": 40})
            assert 0.0 <= row["recall"] <= 1.0 and row["k"] == 10
            c.rollback()
    finally:
        conn.execute(f"REVOKE ALL ON {TABLE} FROM {ROLE}")
        conn.execute(f"REVOKE ALL ON SCHEMA pgeval FROM {ROLE}")
        conn.execute(f"DROP ROLE {ROLE}")


VEC = "'[" + ",".join(["0.1"] * DIM) + "]'"


@pytest.mark.parametrize(
    "statement,settings,message",
    [
        (f"SELECT id FROM {TABLE} ORDER BY id LIMIT 10", {}, "no vector literal"),
        (
            f"SELECT id FROM {TABLE} ORDER BY e <=> $1 LIMIT 10",
            {},
            "pgeval.evaluate_recall",
        ),
        (
            f"SELECT id FROM {TABLE} ORDER BY e <=> {VEC} LIMIT 10; DELETE FROM {TABLE}",
            {},
            "two statements",
        ),
        (f"DELETE FROM {TABLE} WHERE e <=> {VEC} < 0", {}, "not a SELECT"),
        (
            f"WITH d AS (DELETE FROM {TABLE} WHERE e <=> {VEC} < 0 RETURNING id) SELECT id FROM d",
            {},
            "writes",
        ),
        (
            f"SELECT id FROM {TABLE} ORDER BY e <=> {VEC} LIMIT 10 FOR UPDATE",
            {},
            "writes",
        ),
        (
            f"SELECT id FROM {TABLE} ORDER BY e <=> {VEC} LIMIT 10",
            {"hnsw.ef_serch": 10},
            'unknown setting "hnsw.ef_serch"',
        ),
        (
            f"SELECT id FROM {TABLE} ORDER BY e <=> {VEC} LIMIT 10",
            {"transaction_read_only": "off"},
            "may not be changed",
        ),
        (
            f"SELECT id FROM {TABLE} ORDER BY e <=> {VEC} LIMIT 10",
            {"hnsw.ef_search": list(range(1, 12)), "ivfflat.probes": [1, 2, 3]},
            "the grid has 33 points",
        ),
    ],
)
def test_bad_calls_are_refused_in_one_line(kb, conn, statement, settings, message):
    with pytest.raises(psycopg.Error) as err:
        _evaluate(conn, statement, settings)
    text = err.value.diag.message_primary or ""
    assert text.startswith("pgeval.evaluate_query_recall: "), text
    assert message in text and "\n" not in text, text
    assert conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0] == N


def test_a_function_that_writes_is_refused(kb, conn):
    conn.execute(
        "CREATE OR REPLACE FUNCTION sqleq_writes() RETURNS int LANGUAGE sql AS "
        f"$$ DELETE FROM {TABLE} WHERE false RETURNING 1 $$"
    )
    try:
        with pytest.raises(psycopg.Error) as err:
            _evaluate(conn, f"SELECT id, sqleq_writes() FROM {TABLE} ORDER BY e <=> {VEC} LIMIT 10")
        text = err.value.diag.message_primary or ""
        assert text.startswith("pgeval.evaluate_query_recall: the statement writes"), text
        assert "read-only transaction" in text
    finally:
        conn.execute("DROP FUNCTION sqleq_writes()")
