"""The health check on a real table holding every defect it looks for."""

from __future__ import annotations

import json

import pytest
from dba_data import ensure_target
from helpers import make_testset

from evaluator.table import health

TABLE = "dba_health_docs"


@pytest.fixture(scope="module")
def sick(database):
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, embedding vector, body text)")
        rows = [
            ("a", "[1,2,3]"),
            ("b", "[1,2,3]"),
            ("c", None),
            ("d", "[0,0,0]"),
            ("e", "[1,2]"),
            ("f", "[3,1,2]"),
            ("g", "[2,2,1]"),
        ]
        for i, v in rows:
            c.execute(f"INSERT INTO {TABLE} VALUES (%s, %s, 'text')", (i, v))
        c.execute(f"CREATE TABLE {TABLE}_ok (id text PRIMARY KEY, embedding vector(3), body text)")
        c.execute(f"INSERT INTO {TABLE}_ok VALUES ('x', '[1,2,3]', 't'), ('y', '[3,2,1]', 't')")
        c.execute(
            f"CREATE INDEX {TABLE}_ok_hnsw ON {TABLE}_ok USING hnsw (embedding vector_cosine_ops)"
        )
    yield TABLE
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}, {TABLE}_ok")


def by_check(findings):
    return {f.check: f for f in findings}


def test_every_defect_is_found(conn, sick):
    from evaluator.targets.targets import Target, save

    t = Target(
        name="dba-sick",
        table=sick,
        id_column="id",
        vector_column="embedding",
        distance="cosine",
        dimension=3,
    )
    save(conn, t, replace=True)
    conn.execute("DELETE FROM pgeval.testset WHERE name = 'dba-sick-ts'")
    make_testset(
        conn,
        "dba-sick-ts",
        {"q1": {"a": 2, "zz-gone": 3}, "q2": {"f": 1, "old": 0}},
        embeddings={"q1": [1, 0, 0], "q2": [0, 1, 0]},
    )
    f = by_check(health.check(conn, t, results_conn=conn, testset="dba-sick-ts"))
    assert f["null_vectors"].status == "warning" and f["null_vectors"].examples == ["c"]
    assert f["zero_vectors"].status == "warning" and f["zero_vectors"].examples == ["d"]
    assert f["duplicate_vectors"].count == 2 and f["duplicate_vectors"].examples == ["a=b"]
    assert f["dimensions"].status == "error" and f["dimensions"].examples == ["e"]
    assert "dimension 3" in f["dimensions"].detail
    missing = f["missing_judged"]
    assert missing.status == "error" and missing.count == 2
    assert missing.examples == ["zz-gone"]  # the relevant one is shown first
    assert "1 of them relevant" in missing.detail


def test_clean_table_is_ok_and_zero_vectors_are_fine_for_l2(conn, sick):
    t = ensure_target(conn, "dba-healthy", f"{sick}_ok")
    f = by_check(health.check(conn, t))
    for name in (
        "null_vectors",
        "zero_vectors",
        "duplicate_vectors",
        "dimensions",
        "invalid_indexes",
        "index_vs_shared_buffers",
    ):
        assert f[name].status == "ok", f[name]
    from evaluator.targets.targets import Target

    l2 = Target(name="dba-l2", table=sick, id_column="id", vector_column="embedding", distance="l2")
    zero = by_check(health.check(conn, l2))["zero_vectors"]
    assert zero.status == "ok" and zero.count == 1


def test_index_larger_than_the_limit_is_reported(conn, sick):
    t = ensure_target(conn, "dba-healthy", f"{sick}_ok")
    hc = health._Target(conn, t)
    size = health.ann_index_sizes(conn, hc.oid)[0][2]
    assert health.check_index_size(conn, hc, limit=size).status == "ok"
    big = health.check_index_size(conn, hc, limit=size - 1)
    assert big.status == "warning" and big.examples == [f"{sick}_ok_hnsw"]


def test_advisory_versions():
    hits = [a["id"] for v in ("0.6.0", "0.7.4", "0.8.1") for a in health.advisories({"vector": v})]
    assert hits == ["CVE-2026-3172"] * 3
    for v in ("0.5.1", "0.8.2", "0.9.0", "1.0.0"):
        assert health.advisories({"vector": v}) == []


def test_cve_warning_on_the_embedded_pgvector(conn, pgeval, sick):
    version = conn.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    ).fetchone()[0]
    ensure_target(conn, "dba-healthy", f"{sick}_ok")
    code, out, err = pgeval("health", "--target", "dba-healthy", "--format", "json")
    assert code == 0, err
    cve = [f for f in json.loads(out) if f["check"] == "vulnerable_extensions"][0]
    if version == "0.8.1":
        assert cve["status"] == "warning" and "CVE-2026-3172" in cve["detail"]
        assert "CVE-2026-3172" in err
        code, out, err = pgeval("health", "--target", "dba-healthy", "--strict")
        assert code == 1 and "vulnerable_extensions" in err
    else:
        assert cve["status"] == ("warning" if health.advisories({"vector": version}) else "ok")
    code, out, err = pgeval("fingerprint", "--target", "dba-healthy", "--check")
    assert code == 0 and "health check" in out and "vulnerable_extensions" in out


def test_cve_warning_says_whose_server_it_concerns(conn, pgeval, sick, database):
    """The embedded server's pgvector is not the user's to upgrade; their own server's is."""
    version = conn.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    ).fetchone()[0]
    if not health.advisories({"vector": version}):
        pytest.skip(f"pgvector {version} has no known advisory")
    ensure_target(conn, "dba-healthy", f"{sick}_ok")
    for prefix, says, not_says in (
        ((), "embedded server", "your own server"),
        (("--dsn", database.uri()), "your own server", "embedded server"),
    ):
        code, out, err = pgeval(*prefix, "health", "--target", "dba-healthy", "--format", "json")
        assert code == 0, err
        cve = [f for f in json.loads(out) if f["check"] == "vulnerable_extensions"][0]
        assert says in cve["detail"] and not_says not in cve["detail"], cve["detail"]


def test_change_log_hint_then_ok(conn, sick, database):
    """Untracked, a hint (never a --strict failure) naming the command; tracked, ok."""
    from evaluator.table import change_log

    t = ensure_target(conn, "dba-healthy", f"{sick}_ok")
    f = by_check(health.check(conn, t))["change_log"]
    assert f.status == "hint" and "`pgeval target track dba-healthy`" in f.detail
    with database.connect(results=False) as kb:
        change_log.install(kb, t)
    try:
        f = by_check(health.check(conn, t))["change_log"]
        assert f.status == "ok" and f.detail.startswith("tracked (")
    finally:
        with database.connect(results=False) as kb:
            change_log.remove(kb, t)
