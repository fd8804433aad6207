"""`pgeval warmup`: passes until the median latency settles, buffer statistics before/after."""

from __future__ import annotations

import json

import pytest
from dba_data import CRAN_TESTSET, ensure_cranfield

from evaluator.table import warmup as wu


@pytest.fixture
def cran(conn):
    return ensure_cranfield(conn)[0]


def test_warmup_with_the_test_set(conn, cran):
    vectors, source = wu.testset_vectors(conn, CRAN_TESTSET, None)
    assert len(vectors) == 225 and "precomputed" in source
    seen = []
    # 1400 rows: the planner prefers a sequential scan unless told otherwise
    plain = wu.warmup(conn, cran, vectors[:5], source=source, max_passes=2)
    assert "sequential scan" in plain.plan and "enable_seqscan=off" in plain.warnings[0]
    report = wu.warmup(
        conn,
        cran,
        vectors[:60],
        source=source,
        max_passes=6,
        tolerance=0.5,
        on_pass=seen.append,
        settings={"enable_seqscan": "off"},
    )
    assert "dba_cran_hnsw (hnsw" in report.plan
    assert 2 <= len(report.passes) <= 6 and seen == report.passes
    # a 50 % tolerance settles on the second pass unless the machine is very noisy
    assert report.converged == (len(report.passes) < 6 or report.converged)
    assert report.method == wu.prewarm_method(wu.extension_state(conn, "pg_prewarm"))
    rel = {r["relation"]: r for r in report.relations()}
    assert rel["dba_cran"]["kind"] == "table" and rel["dba_cran_hnsw"]["kind"] == "index"
    # every pass touched the HNSW index and the heap: the counters moved by at least that much
    assert rel["dba_cran_hnsw"]["hit_during"] + rel["dba_cran_hnsw"]["read_during"] >= 60
    assert rel["dba_cran"]["hit_after"] >= rel["dba_cran"]["hit_before"] + 60
    assert all(p.blocks_hit + p.blocks_read > 0 for p in report.passes)
    # after the first pass everything the queries need is in shared buffers
    assert report.passes[-1].blocks_read == 0


def test_passes_are_bounded(conn, cran):
    vectors = wu.random_vectors(cran.dimension, 8)
    report = wu.warmup(
        conn,
        cran,
        vectors,
        source="random",
        max_passes=3,
        tolerance=0.001,
        settings={"enable_seqscan": "off"},
    )
    assert len(report.passes) <= 3
    assert report.converged or "did not settle within 3 passes" in " ".join(report.warnings)
    with pytest.raises(
        Exception, match="`max_passes` must be at least 2"
    ):  # the library names parameters
        wu.warmup(conn, cran, vectors, source="random", max_passes=1)


def test_cli_warmup(pgeval, cran):
    code, out, err = pgeval(
        "warmup", "--target", "dba-cran", "--random-queries", "20", "--format", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["queries"] == 20 and doc["source"].startswith("20 random vectors")
    assert {r["relation"] for r in doc["relations"]} >= {"dba_cran", "dba_cran_hnsw"}
    code, out, err = pgeval(
        "warmup",
        "--target",
        "dba-cran",
        "--testset",
        CRAN_TESTSET,
        "--set",
        "hnsw.ef_search=100",
        "--set",
        "enable_seqscan=off",
        "--max-passes",
        "3",
    )
    assert code == 0, err
    assert "buffer blocks" in out and "plan: index dba_cran_hnsw" in out and "pass 1:" in err
    code, out, err = pgeval("warmup", "--target", "dba-cran", "--set", "hnsw.ef_search=x")
    assert code == 1 and "--set" in err


def test_prewarm_missing_available_or_created(conn, pgeval, cran):
    """The three states come from pg_extension and pg_available_extensions; the embedded server
    has no pg_prewarm at all, and the message says so instead of suggesting CREATE EXTENSION."""
    available = {
        r[0]: r[1]
        for r in conn.execute("SELECT name, installed_version FROM pg_available_extensions")
    }
    assert "pg_prewarm" not in available  # the embedded server's build
    assert wu.extension_state(conn, "pg_prewarm") == "missing"
    assert wu.extension_state(conn, "plpgsql") == "created"
    not_created = sorted(n for n, v in available.items() if v is None)
    assert not_created, available  # e.g. age, http: on the server, not created
    assert wu.extension_state(conn, not_created[0]) == "available"
    missing = wu.prewarm_method("missing")
    assert "not installed" in missing and "this server does not have it" in missing
    assert "CREATE EXTENSION" not in missing
    assert "CREATE EXTENSION pg_prewarm;" in wu.prewarm_method("available")
    assert "not created in this database" in wu.prewarm_method("available")
    assert wu.prewarm_method("created") == "pg_prewarm, then query passes"
    code, out, err = pgeval(
        "warmup",
        "--target",
        "dba-cran",
        "--random-queries",
        "5",
        "--max-passes",
        "2",
        "--format",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)["method"] == missing


def test_every_ann_index_is_warmed_through_its_kinds_statement(database, pgeval, tmp_path):
    """Issue "Output a DBA can trust", item 4, and "Index designs": a table with a plain HNSW
    index and a binary-quantized one; warmup warms both, each through the statement of the
    stage kind it serves (the bit index only answers the hnsw-bq statement), says which, and
    --index warms one."""
    import clustered_kb

    table, dim = "warm_two", 32
    clustered_kb.build(
        database,
        tmp_path,
        table,
        dim=dim,
        n=2000,
        nq=5,
        seed=3,
        spread=0.5,
        indexes=[
            f"CREATE INDEX warm_two_hnsw ON {table} USING hnsw (e vector_cosine_ops)",
            f"CREATE INDEX warm_two_bq ON {table} USING hnsw "
            f"((binary_quantize(e)::bit({dim})) bit_hamming_ops)",
        ],
    )
    try:
        code, _, err = pgeval(
            f"target add warm-two --table {table} --id-column id --vector-column e --replace"
        )
        assert code == 0, err
        base = "warmup --target warm-two --set enable_seqscan=off --random-queries 10"
        code, out, err = pgeval(base + " --max-passes 3 --format json")
        assert code == 0, err
        doc = json.loads(out)
        warmed = {i["index"]: i for i in doc["indexes"]}
        assert set(warmed) == {"warm_two_hnsw", "warm_two_bq"}
        assert warmed["warm_two_hnsw"]["kind"] == "hnsw"
        assert warmed["warm_two_bq"]["kind"] == "hnsw-bq"
        assert all("skipped" not in i and i["passes"] >= 2 for i in warmed.values())
        rel = {r["relation"]: r for r in doc["relations"]}
        for name in warmed:  # each index was read by its own passes
            assert rel[name]["hit_during"] + rel[name]["read_during"] > 0, name
        assert {p["index"] for p in doc["passes"]} == set(warmed)
        code, out, err = pgeval(base + " --max-passes 2")
        assert code == 0, err
        assert "warmed: index warm_two_hnsw (hnsw)" in out
        assert "warmed: index warm_two_bq (hnsw-bq)" in out
        code, out, err = pgeval(base + " --max-passes 2 --index warm_two_bq --format json")
        assert code == 0, err
        assert [i["index"] for i in json.loads(out)["indexes"]] == ["warm_two_bq"]
        code, _, err = pgeval(base + " --index nope")
        assert code == 1 and "'nope' is not an ANN index of warm_two.e" in err
        assert "warm_two_hnsw" in err and "--index" in err
    finally:
        clustered_kb.drop(database, table)
