"""A target defined by the application's statement (`pgeval target add --statement`,
evaluator/targets/statement.py): sweeps, --find and watch time that statement, its exact twin the
ground truth.

- A statement target's sweep recall equals pgeval.evaluate_recall on the same statement, queries
  and settings (to 1e-9); the timed statement is the user's, as written.
- Per tenant ($2 bound to the --group-by value) the ground truth is numpy's exact search within
  the tenant, and the recall is recomputed from the stored lists.
- --find and watch run on it; advise refuses it in one line.
- Bad statements are refused in one line, exit 1, nothing stored; show and list carry it.
- The twin's settings are the ones pgeval.apply_settings sets for evaluate_recall's twin.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests import clustered_kb

TABLE, TARGET, DIM, N = "stmt_kb", "stmt", 12, 1500
TENANTS = "stmt_tenants"
QUERIES = f"SELECT id AS query_id, e FROM {TABLE} ORDER BY id LIMIT 40"
STATEMENT = f"SELECT id, e <=> $1 AS distance FROM {TABLE} ORDER BY e <=> $1 LIMIT 10"
GROUPED = (
    f"SELECT id, e <=> $1 AS distance FROM {TENANTS} WHERE tenant = $2 ORDER BY e <=> $1 LIMIT 10"
)


@pytest.fixture
def kb(database, clean, tmp_path):
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
    yield
    clustered_kb.drop(database, TABLE)


@pytest.fixture
def tenants(database, clean):
    docs = clustered_kb.tenant_table(
        database, TENANTS, dim=DIM, n=900, shares={"t1": 0.6, "t2": 0.3, "t3": 0.1}
    )
    yield docs
    clustered_kb.drop(database, TENANTS)


def _add(pgeval, name: str, table: str, *extra: str):
    return pgeval(
        "target", "add", name, "--table", table, "--id-column", "id", "--vector-column", "e",
        *extra,
    )  # fmt: skip


def _evaluate(conn, statement: str, queries: str, settings: dict, **kw) -> list[dict]:
    args = "".join(f", {name} => %({name})s" for name in kw)
    cur = conn.execute(
        "SELECT * FROM pgeval.evaluate_recall(%(st)s, %(q)s, %(set)s" + args + ")",
        {"st": statement, "q": queries, "set": json.dumps(settings), **kw},
    )
    names = [d.name for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def test_sweep_recall_equals_evaluate_recall_and_times_the_statement(kb, conn, pgeval):
    code, out, err = _add(pgeval, TARGET, TABLE, "--statement", STATEMENT, "--format", "json")
    assert code == 0, err
    spec = json.loads(out)["spec"]
    assert spec["statement"] == STATEMENT and spec["distance"] == "cosine"
    code, out, err = pgeval(
        "sweep", "--queries-sql", QUERIES, "--target", TARGET, "--stage", "hnsw",
        "--param", "hnsw.ef_search=4,10,40", "--set", "enable_seqscan=off", "--k", "10",
        "--repeat", "1", "--name", "stmt-cli", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    assert "rows per query (its LIMIT" not in err  # LIMIT 10 at --k 10: nothing to say
    cli = {p["label"]: p for p in json.loads(out)["points"]}
    rows = _evaluate(
        conn,
        STATEMENT,
        QUERIES,
        {"hnsw.ef_search": [4, 10, 40], "enable_seqscan": "off"},
        name="stmt-sql",
    )
    assert rows[0]["recall"] < 0.99  # ef_search 4 loses neighbours: a real comparison
    for r in rows:
        assert r["recall"] == pytest.approx(cli[r["label"]]["index_recall"], abs=1e-9)
        assert r["rows_mean"] == cli[r["label"]]["rows_mean"]
    # the timed statement is the user's, as written ($1, $2 as psycopg's placeholders)
    params = conn.execute(
        "SELECT r.params FROM pgeval.run r JOIN pgeval.sweep s ON s.experiment_id = "
        "r.experiment_id WHERE s.name = 'stmt-cli' AND r.stage = 'hnsw' LIMIT 1"
    ).fetchone()[0]
    assert params["timed_statement"] == STATEMENT.replace("$1", "%(q)s")
    assert "target add --statement" in params["timed"]
    exact = conn.execute(
        "SELECT r.params FROM pgeval.run r JOIN pgeval.sweep s ON s.experiment_id = "
        "r.experiment_id WHERE s.name = 'stmt-cli' AND r.stage = 'exact' LIMIT 1"
    ).fetchone()[0]
    assert exact["ground_truth"]["method"] == "statement-twin"
    assert exact["settings"]["enable_indexonlyscan"] == "off"


def test_per_tenant_ground_truth_is_numpy_within_the_tenant(tenants, conn, pgeval):
    docs = tenants
    code, _, err = _add(pgeval, "stmt-t", TENANTS, "--group-by", "tenant", "--statement", GROUPED)
    assert code == 0, err
    code, out, err = pgeval(
        "sweep", "--sample-queries", "30", "--target", "stmt-t", "--stage", "hnsw",
        "--param", "hnsw.ef_search=4,40", "--set", "enable_seqscan=off",
        "--set", "enable_bitmapscan=off", "--k", "10", "--repeat", "1", "--name", "stmt-g",
        "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    # the LIMIT 10 less the own row is short of --k 10: said, with the --k that reads it
    assert "its statement returns at most 9 rows per query (its LIMIT, less the sampled" in err
    assert "(--k 9 reads it at the statement's depth)" in err
    shown = json.loads(out)
    assert sorted(shown["sweeps"]) == ["t1", "t2", "t3"]
    recalls = []
    for tenant, name in shown["sweeps"].items():
        exp = conn.execute(
            "SELECT experiment_id FROM pgeval.sweep WHERE name = %s", (name,)
        ).fetchone()[0]
        exact = dict(
            conn.execute(
                "SELECT l.query_id, l.scores FROM pgeval.result_list l JOIN pgeval.run r "
                "USING (run_id) WHERE r.experiment_id = %s AND r.stage = 'exact'",
                (exp,),
            ).fetchall()
        )
        assert len(exact) == 30
        for qid, scores in exact.items():
            assert docs[qid][1] == tenant  # sampled from the tenant's rows
            within = _numpy_exact(docs, docs[qid][0], tenant, drop=qid)
            # the statement's LIMIT 10, its own row dropped: the 9 nearest others
            assert len(scores) == 9
            assert np.allclose(scores, within[:9], atol=1e-6)
        for p in shown["points"]:
            (got,) = [g["recall"] for g in p["groups"] if g["group"] == tenant]
            assert got == pytest.approx(_recall(conn, exp, p["label"], exact), abs=1e-9)
            recalls.append(got)
    assert min(recalls) < 0.99  # ef_search 4 without iterative scans loses neighbours


def _recall(conn, exp: int, label: str, exact: dict) -> float:
    """Index recall@10 recomputed here from the stored lists (METRICS.md "Index recall")."""
    ann = dict(
        conn.execute(
            "SELECT l.query_id, l.scores FROM pgeval.result_list l JOIN pgeval.run r "
            "USING (run_id) WHERE r.experiment_id = %s AND r.name LIKE %s",
            (exp, f"%.{label}.1"),
        ).fetchall()
    )
    out = []
    for qid, ex in exact.items():
        n = min(10, len(ex))
        d_k = sorted(ex)[n - 1]
        got = ann.get(qid) or []
        out.append(sum(1 for d in got[:10] if d <= d_k) / n)
    return float(np.mean(out))


def _numpy_exact(docs: dict, q: np.ndarray, tenant: str, drop: str) -> list[float]:
    m = np.array([v for k, (v, t) in docs.items() if t == tenant and k != drop], dtype=np.float64)
    q = q.astype(np.float64)
    d = 1.0 - (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    return sorted(d.tolist())


def test_find_and_watch_measure_the_statement(kb, conn, pgeval):
    code, _, err = _add(pgeval, TARGET, TABLE, "--statement", STATEMENT)
    assert code == 0, err
    code, out, err = pgeval(
        "sweep", "--queries-sql", QUERIES, "--target", TARGET, "--stage", "hnsw",
        "--find", "hnsw.ef_search", "--set", "enable_seqscan=off", "--k", "10",
        "--repeat", "1", "--name", "stmt-find", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    found = json.loads(out)
    assert found["recommendation"]["index_recall"] >= 0.95
    timed = conn.execute(
        "SELECT DISTINCT r.params ->> 'timed_statement' FROM pgeval.run r JOIN pgeval.sweep s "
        "ON s.experiment_id = r.experiment_id WHERE s.name = 'stmt-find' AND r.stage = 'hnsw'"
    ).fetchall()
    assert timed == [(STATEMENT.replace("$1", "%(q)s"),)]
    conn.execute("DELETE FROM pgeval.probe")
    watch = ["watch", "--target", TARGET, "--stage", "hnsw", "--set", "enable_seqscan=off"]
    code, out, err = pgeval(
        *watch, "--set", "hnsw.ef_search=10", "--queries-sql", QUERIES, "--format", "json"
    )
    assert code in (0, 2), err
    probe = json.loads(out)
    assert probe["ground_truth"]["method"] == "statement-twin"
    rows = _evaluate(
        conn, STATEMENT, QUERIES, {"hnsw.ef_search": "10", "enable_seqscan": "off"}, name="w"
    )
    assert probe["recall"] == pytest.approx(rows[0]["recall"], abs=1e-9)
    # again on unchanged data: the steady probe (its plan trusted), the twin's answer reused
    code, out, err = pgeval(
        *watch, "--set", "hnsw.ef_search=10", "--queries-sql", QUERIES, "--format", "json"
    )
    assert code in (0, 2), err
    again = json.loads(out)
    assert again["ground_truth"]["status"] == "reused"
    assert again["recall"] == pytest.approx(probe["recall"], abs=1e-12)
    conn.execute("DELETE FROM pgeval.probe")


def test_the_sql_probe_refuses_it_rather_than_search_the_table_its_own_way(kb, conn, pgeval):
    import psycopg

    code, _, err = _add(pgeval, TARGET, TABLE, "--statement", STATEMENT)
    assert code == 0, err
    with pytest.raises(psycopg.Error) as refused:
        conn.execute("SELECT * FROM pgeval.run_probe(%s, 'hnsw', p_sample => 10)", (TARGET,))
    assert "is searched by its own statement" in str(refused.value)
    assert "pgeval watch" in str(refused.value)


def test_builds_on_a_scratch_copy_are_refused(kb, pgeval):
    code, _, err = _add(pgeval, TARGET, TABLE, "--statement", STATEMENT)
    assert code == 0, err
    code, out, err = pgeval(
        "sweep", "--queries-sql", QUERIES, "--target", TARGET, "--stage", "hnsw",
        "--build", "m=8", "--param", "hnsw.ef_search=10", "--repeat", "1",
    )  # fmt: skip
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "--build builds on a scratch copy the statement does not search" in err


def test_an_integer_tenant_is_bound_as_the_application_binds_it(database, clean, conn, pgeval):
    with database.connect(results=False, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS stmt_int")
        c.execute("CREATE TABLE stmt_int (id bigint PRIMARY KEY, e vector(3), tenant int)")
        c.execute(
            "INSERT INTO stmt_int SELECT i, ARRAY[sin(i), cos(i), sin(2 * i)]::vector, i % 2 "
            "FROM generate_series(1, 200) i"
        )
        c.execute("CREATE INDEX stmt_int_hnsw ON stmt_int USING hnsw (e vector_l2_ops)")
        c.execute("ANALYZE stmt_int")
    try:
        statement = (
            "SELECT id, e <-> $1 AS distance FROM stmt_int WHERE tenant = $2 "
            "ORDER BY e <-> $1 LIMIT 5"
        )
        code, out, err = _add(
            pgeval, "stmt-int", "stmt_int", "--group-by", "tenant", "--statement", statement,
            "--format", "json",
        )  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["spec"]["distance"] == "l2"  # read from the operator
        code, out, err = pgeval(
            "sweep", "--sample-queries", "20", "--target", "stmt-int", "--stage", "hnsw",
            "--param", "hnsw.ef_search=40", "--set", "enable_seqscan=off", "--k", "4",
            "--repeat", "1", "--format", "json",
        )  # fmt: skip
        assert code == 0, err
        shown = json.loads(out)
        assert sorted(shown["sweeps"]) == ["0", "1"]
        lists = conn.execute(
            "SELECT l.query_id, l.chunk_ids FROM pgeval.result_list l JOIN pgeval.run r "
            "USING (run_id) JOIN pgeval.sweep s ON s.experiment_id = r.experiment_id "
            "WHERE r.stage = 'exact' AND s.name IN (%s, %s)",
            (shown["sweeps"]["0"], shown["sweeps"]["1"]),
        ).fetchall()
        assert lists
        for qid, chunks in lists:  # each list within its query's tenant, its own row dropped
            assert len(chunks) == 4 and qid not in chunks
            assert len({int(c) % 2 for c in chunks} | {int(qid) % 2}) == 1
    finally:
        with database.connect(results=False, autocommit=True) as c:
            c.execute("DROP TABLE IF EXISTS stmt_int")


def test_advise_refuses_a_statement_target_in_one_line(kb, pgeval):
    code, _, err = _add(pgeval, TARGET, TABLE, "--statement", STATEMENT)
    assert code == 0, err
    code, out, err = pgeval(
        "advise", "--target", TARGET, "--queries-sql", QUERIES, "--target-recall", "0.9"
    )
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "its own statement" in err and "pgeval sweep --target stmt" in err


def test_the_exact_stage_of_a_pipeline_runs_the_twin(kb, conn, pgeval):
    code, _, err = _add(pgeval, TARGET, TABLE, "--statement", STATEMENT)
    assert code == 0, err
    code, out, err = pgeval(
        "run", "pipeline", "--queries-sql", QUERIES, "--target", TARGET,
        "--stages", "exact,hnsw", "--opt", "exact:ground_truth=off", "--set",
        "enable_seqscan=off", "--name", "stmt-pipe", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    params = dict(
        conn.execute(
            "SELECT stage, params FROM pgeval.run WHERE name LIKE 'stmt-pipe.%'"
        ).fetchall()
    )
    assert params["exact"]["settings"]["enable_indexonlyscan"] == "off"
    assert params["exact"]["index"] is None and params["hnsw"]["index"] == f"{TABLE}_hnsw"
    assert params["exact"]["timed_statement"] == params["hnsw"]["timed_statement"]


def test_show_and_list_carry_the_statement_and_the_file_reads_it(kb, pgeval, tmp_path):
    path = tmp_path / "search.sql"
    path.write_text(STATEMENT.replace(" ORDER", "\n ORDER") + ";\n", encoding="utf-8")
    code, out, err = _add(pgeval, TARGET, TABLE, "--statement-file", str(path))
    assert code == 0, err
    assert "searched by its statement" in out
    code, out, err = pgeval("target", "show", TARGET, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["spec"]["statement"].startswith("SELECT id, e <=> $1 AS distance")
    code, out, err = pgeval("target", "show", TARGET)
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("statement:")]
    assert "ORDER BY e <=> $1 LIMIT 10;" in line and "statement_template" not in out
    code, out, err = pgeval("target", "list", "--format", "json")
    assert code == 0, err
    (row,) = [r for r in json.loads(out) if r["target"] == TARGET]
    assert "LIMIT 10" in row["statement"]
    # a target without one keeps the spec it had: no statement key
    code, out, err = _add(pgeval, "plain", TABLE, "--format", "json")
    assert code == 0, err
    assert "statement" not in json.loads(out)["spec"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--statement", f"DELETE FROM {TABLE}"], "is DELETE , not a SELECT"),
        (["--statement", f"SELECT 1; DROP TABLE {TABLE}"], "holds two statements"),
        (["--statement", f"SELECT id, 0 AS distance FROM {TABLE} LIMIT 10"], "has no $1"),
        (
            ["--statement", f"SELECT id, e <=> $1 AS distance FROM {TABLE} LIMIT 10"],
            "has no ORDER BY",
        ),
        (["--statement", f"SELECT id, e <=> $1 AS distance FROM {TABLE} ORDER BY 2"], "no LIMIT"),
        (
            [
                "--statement",
                f"SELECT id, e <=> $1 AS distance FROM {TABLE} WHERE id = $2 ORDER BY 2 LIMIT 10",
            ],
            "has no --group-by",
        ),
        (
            ["--statement", f"SELECT id FROM {TABLE} WHERE id = $3 ORDER BY e <=> $1 LIMIT 10"],
            "has $3",
        ),
        (
            [
                "--statement",
                f"SELECT id AS chunk, e <=> $1 AS distance FROM {TABLE} ORDER BY e <=> $1 LIMIT 10",
            ],
            "not id",
        ),
        (
            ["--statement", f"SELECT id, e <=> $1 AS d FROM {TABLE} ORDER BY e <=> $1 LIMIT 10"],
            "not distance",
        ),
        (
            ["--statement", f"SELECT id, 'x' AS distance FROM {TABLE} ORDER BY e <=> $1 LIMIT 10"],
            "is text, not a number",
        ),
        (
            ["--statement", "SELECT id, e <=> $1 AS distance FROM nowhere ORDER BY 2 LIMIT 10"],
            "does not run",
        ),
        (["--statement", STATEMENT, "--distance", "l2"], "computes the cosine distance"),
        (["--statement", STATEMENT, "--where", "id=c1"], "write what --where says"),
        (["--statement", STATEMENT, "--statement-file", "x.sql"], "not both"),
        (["--statement-file", "/nonexistent/search.sql"], "/nonexistent/search.sql"),
        (["--statement", STATEMENT, "--group-by", "id"], "has no $2"),
    ],
)
def test_bad_statements_are_refused_in_one_line_and_nothing_is_stored(
    kb, conn, pgeval, args, message
):
    code, out, err = _add(pgeval, TARGET, TABLE, *args)
    assert code == 1, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert message in err, err
    assert "Traceback" not in err
    assert conn.execute("SELECT count(*) FROM pgeval.target").fetchone()[0] == 0


def test_the_twin_settings_are_evaluate_recalls(conn):
    from evaluator.targets.statement import TWIN_SETTINGS

    with conn.transaction():
        conn.execute("SELECT set_config('enable_indexscan', 'on', true)")
        conn.execute("SELECT pgeval.apply_settings('{}', '{}', true)")
        shown = {
            k: conn.execute("SELECT current_setting(%s)", (k,)).fetchone()[0] for k in TWIN_SETTINGS
        }
        base = conn.execute(
            "SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(pgeval.settings_now('{}')) k"
        ).fetchone()[0]
    assert shown == TWIN_SETTINGS
    assert base == sorted(TWIN_SETTINGS)  # the settings the SQL twin changes: these three


def test_a_grouped_sweep_of_a_statement_without_its_group_is_refused(tenants, pgeval):
    statement = f"SELECT id, e <=> $1 AS distance FROM {TENANTS} ORDER BY e <=> $1 LIMIT 10"
    code, _, err = _add(pgeval, "stmt-all", TENANTS, "--statement", statement)
    assert code == 0, err
    code, out, err = pgeval(
        "sweep", "--sample-queries", "10", "--target", "stmt-all", "--stage", "hnsw",
        "--group-by", "tenant", "--param", "hnsw.ef_search=10", "--repeat", "1",
        "--set", "enable_seqscan=off",
    )  # fmt: skip
    assert code == 1, (out, err)
    assert len(err.strip().splitlines()) == 1 and out == "", err
    assert "its statement has no $2, so it cannot be scoped to one tenant" in err


def test_a_grouped_watch_binds_each_groups_value(tenants, conn, pgeval):
    code, _, err = _add(pgeval, "stmt-w", TENANTS, "--group-by", "tenant", "--statement", GROUPED)
    assert code == 0, err
    conn.execute("DELETE FROM pgeval.probe")
    code, out, err = pgeval(
        "watch", "--target", "stmt-w", "--stage", "hnsw", "--set", "enable_seqscan=off",
        "--set", "enable_bitmapscan=off", "--set", "hnsw.ef_search=40", "--sample-queries",
        "10", "--min-recall", "0", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    probes = json.loads(out)["probes"]
    assert sorted(p["group_key"]["tenant"] for p in probes) == ["t1", "t2", "t3"]
    assert all(p["ground_truth"]["method"] == "statement-twin" for p in probes)
    assert all(0 < p["recall"] <= 1 for p in probes)
    conn.execute("DELETE FROM pgeval.probe")


def test_warmup_warms_the_index_through_the_statement(kb, pgeval):
    code, _, err = _add(pgeval, TARGET, TABLE, "--statement", STATEMENT)
    assert code == 0, err
    code, out, err = pgeval("warmup", "--target", TARGET, "--max-passes", "2", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert [i["index"] for i in report["indexes"]] == [f"{TABLE}_hnsw"]
