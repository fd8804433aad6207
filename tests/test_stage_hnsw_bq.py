"""The ``hnsw-bq`` stage kind (issue "Index designs and tenants"): HNSW over
``binary_quantize(col)::bit(N)`` with ``bit_hamming_ops``, its ``bq.candidates`` re-ranked by the
full vector, timed as the whole two-level statement pgvector's README gives; its recall equals
what that statement gets when the application runs it, and rises with the candidates."""

from __future__ import annotations

import json

import clustered_kb
import pytest

DIM, N, NQ, K = 64, 3000, 50, 10
TABLE = "bq_kb"


@pytest.fixture(scope="module")
def kb(database, tmp_path_factory):
    _, queries, path = clustered_kb.build(
        database,
        tmp_path_factory.mktemp("bq"),
        TABLE,
        dim=DIM,
        n=N,
        nq=NQ,
        seed=41,
        spread=0.6,
        indexes=[
            f"CREATE INDEX bq_bits ON {TABLE} USING hnsw "
            f"((binary_quantize(e)::bit({DIM})) bit_hamming_ops)"
        ],
    )
    yield path, queries
    clustered_kb.drop(database, TABLE)


def _by_hand(database, queries, candidates: int) -> float:
    """Index recall@K (docs/METRICS.md) of the README's statement run as the application runs
    it: its rows' full distances within the K-th exact distance (plus 1e-6 relative)."""
    sql = (
        f"SELECT d FROM (SELECT e <=> %s::vector AS d FROM {TABLE} ORDER BY "
        f"binary_quantize(e)::bit({DIM}) <~> binary_quantize(%s::vector)::bit({DIM}) "
        f"LIMIT {candidates}) s ORDER BY d LIMIT {K}"
    )
    total = 0.0
    with database.connect(results=False) as c:
        for q in queries:
            c.execute("SET LOCAL enable_indexscan = off")
            d_k = c.execute(
                f"SELECT e <=> %s::vector FROM {TABLE} ORDER BY 1 LIMIT {K}",
                (clustered_kb.vtext(q),),
            ).fetchall()[-1][0]
            c.rollback()
            c.execute("SELECT set_config('hnsw.ef_search', '400', true)")
            c.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(
                r[0]
                for r in c.execute("EXPLAIN " + sql, (clustered_kb.vtext(q), clustered_kb.vtext(q)))
            )
            assert "bq_bits" in plan, plan
            got = [
                r[0]
                for r in c.execute(sql, (clustered_kb.vtext(q), clustered_kb.vtext(q))).fetchall()
            ]
            c.rollback()
            total += sum(1 for d in got if d <= d_k + 1e-6 * max(1.0, abs(d_k))) / K
    return total / len(queries)


def test_bq_kind_is_the_applications_two_level_statement(kb, database, clean, conn, pgeval):
    path, queries = kb
    code, out, err = pgeval(
        "target", "add", "bq", "--table", TABLE, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err
    args = ["sweep", "--queries-file", str(path), "--target", "bq", "--stage", "hnsw-bq"]
    args += ["--param", "bq.candidates=10,40,200", "--set", "hnsw.ef_search=400"]
    args += ["--set", "enable_seqscan=off", "--repeat", "1", "--format", "json", "--name", "bq"]
    code, out, err = pgeval(*args)
    assert code == 0, err
    doc = json.loads(out)
    recall = {int(p["settings"]["bq.candidates"]): p["index_recall"] for p in doc["points"]}
    for n, r in recall.items():
        assert r == pytest.approx(_by_hand(database, queries, n), abs=1e-12), n
    assert recall[10] < recall[40] <= recall[200]  # more candidates, closer to exact search
    params = conn.execute("SELECT params FROM pgeval.run WHERE name = 'bq.candidates=40.1'")
    params = params.fetchone()[0]
    assert params["index"] == "bq_bits" and params["kind"] == "hnsw-bq"
    assert (
        "binary_quantize" in params["timed_statement"] and "LIMIT 40" in params["timed_statement"]
    )
    # the recommendation counts candidates as work: the fewest reaching the target
    assert doc["recommendation"] is None or doc["recommendation"]["why"].startswith(
        "least work: bq.candidates="
    )


def test_bq_candidates_is_validated(kb, clean, pgeval):
    path, _ = kb
    code, out, err = pgeval(
        "target", "add", "bq", "--table", TABLE, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err
    code, out, err = pgeval(
        "sweep",
        "--queries-file",
        str(path),
        "--target",
        "bq",
        "--stage",
        "hnsw-bq",
        "--param",
        "bq.candidates=0",
        "--repeat",
        "1",
    )
    assert code == 1 and "Traceback" not in err and "bq.candidates" in err, err


def test_without_the_bit_index_the_printed_ddl_creates_it(kb, clean, conn, pgeval):
    """No binary-quantized index: the stage prints the CREATE INDEX to run; run as printed, it
    creates the index the stage then uses."""
    path, _ = kb
    code, out, err = pgeval(
        "target", "add", "bq", "--table", TABLE, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err
    args = ["sweep", "--queries-file", str(path), "--target", "bq", "--stage", "hnsw-bq"]
    args += ["--param", "bq.candidates=40", "--set", "hnsw.ef_search=400"]
    args += ["--set", "enable_seqscan=off", "--repeat", "1", "--format", "json"]
    conn.execute("DROP INDEX bq_bits")
    try:
        code, out, err = pgeval(*args, "--name", "bq-none")
        assert code == 1 and "Traceback" not in err
        assert f'index on binary_quantize("e")::bit({DIM}) with bit_hamming_ops' in err, err
        ddl = err.strip().split("has none: ", 1)[1]
        assert ddl.startswith("CREATE INDEX CONCURRENTLY ON bq_kb USING hnsw ("), ddl
        conn.execute(ddl)
        code, out, err = pgeval(*args, "--name", "bq-made")
        assert code == 0, err
        assert json.loads(out)["measured"] == 1
    finally:
        conn.execute("DROP INDEX IF EXISTS bq_bits")
        for (name,) in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'bq_kb' AND indexdef LIKE "
            "'%bit_hamming_ops%'"
        ).fetchall():
            conn.execute(f'DROP INDEX "{name}"')
        conn.execute(
            f"CREATE INDEX bq_bits ON {TABLE} USING hnsw "
            f"((binary_quantize(e)::bit({DIM})) bit_hamming_ops)"
        )
