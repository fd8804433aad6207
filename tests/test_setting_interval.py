"""The setting found with its uncertainty (issue "What the application gets", item 7): `sweep
--find` prints the least value reaching the target with a 95 % interval over resamples of the
queries (SQL's pgeval.sweep_setting_interval), on the real server.

- The interval holds the value found; its ends are values the find measured.
- It is seeded: the same call gives the same interval.
- It agrees with a bootstrap in numpy over the same per-query recalls (read from
  pgeval.index_recall_per_query), to within one measured value (two random generators).
"""

from __future__ import annotations

import json

import clustered_kb
import numpy as np
import pytest

pytestmark = pytest.mark.slow

TABLE, DIM, N = "interval_kb", 32, 3000


@pytest.fixture(scope="module")
def target(database):
    rng = np.random.default_rng(5)
    centers = rng.normal(size=(20, DIM))
    docs = (centers[rng.integers(0, 20, N)] + 0.7 * rng.normal(size=(N, DIM))).astype(np.float32)
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({DIM}))")
        with c.cursor().copy(f"COPY {TABLE} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(docs):
                cp.write_row((f"c{i + 1}", clustered_kb.vtext(v)))
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(
            f"CREATE INDEX interval_kb_hnsw ON {TABLE} USING hnsw (e vector_cosine_ops) "
            "WITH (m = 4, ef_construction = 10)"
        )
        c.execute(f"ANALYZE {TABLE}")
    from evaluator.targets.add import add_target

    add_target(database, "intervals", table=TABLE, id_column="id", vector_column="e", replace=True)
    yield "intervals"
    clustered_kb.drop(database, TABLE)


def numpy_interval(conn, sweep_id: int, target: float, boots: int = 4000) -> tuple[int, int]:
    rows = conn.execute(
        "SELECT (sp.settings ->> 'hnsw.ef_search')::int, pq.query_id, pq.hits::float8 / pq.denom "
        "FROM pgeval.sweep_point sp JOIN pgeval.run r ON r.run_id = sp.run_id "
        "CROSS JOIN LATERAL pgeval.index_recall_per_query(r.experiment_id, 10, r.repetition) pq "
        "WHERE sp.sweep_id = %s AND pq.run_id = sp.run_id",
        (sweep_id,),
    ).fetchall()
    values = sorted({v for v, _, _ in rows})
    queries = sorted({q for _, q, _ in rows})
    m = np.zeros((len(values), len(queries)))
    for v, q, r in rows:
        m[values.index(v), queries.index(q)] = r
    rng = np.random.default_rng(0)
    least = []
    for _ in range(boots):
        means = m[:, rng.integers(0, len(queries), len(queries))].mean(axis=1)
        ok = [v for v, mean in zip(values, means, strict=True) if mean >= target - 1e-12]
        least.append(ok[0] if ok else np.inf)
    least.sort()
    at = lambda p: least[max(0, int(np.ceil(p * boots)) - 1)]  # noqa: E731 - nearest rank
    return at(0.025), at(0.975)


def test_the_found_setting_has_its_interval(pgeval, conn, target):
    code, out, err = pgeval(
        f"sweep --sample-queries 60 --target {target} --stage hnsw --find hnsw.ef_search "
        "--target-recall 0.95 --repeat 1 --format json"
    )
    assert code == 0, err
    d = json.loads(out)
    found = d["finds"][0]
    assert found["reached"]
    iv = found["interval"]
    tried = sorted(v for v, _ in found["path"])
    assert iv["resamples"] == 500 and iv["level"] == 0.95
    assert iv["low"] in tried and (iv["high"] is None or iv["high"] in tried)
    assert iv["low"] <= found["value"] <= (iv["high"] or found["value"])
    # seeded: the same call, the same interval
    sweep_id = conn.execute("SELECT sweep_id FROM pgeval.sweep WHERE name = %s", (d["sweep"],))
    sweep_id = sweep_id.fetchone()[0]
    call = "SELECT low, high FROM pgeval.sweep_setting_interval(%s, 'hnsw.ef_search', 0.95)"
    first = conn.execute(call, (sweep_id,)).fetchone()
    assert conn.execute(call, (sweep_id,)).fetchone() == first
    assert (first[0], first[1]) == (iv["low"], iv["high"])
    # a bootstrap in numpy over the same per-query recalls: within one measured value
    low, high = numpy_interval(conn, sweep_id, 0.95)
    ranks = {v: i for i, v in enumerate(tried + [np.inf])}
    assert abs(ranks[iv["low"]] - ranks[low]) <= 1
    assert abs(ranks[iv["high"] if iv["high"] is not None else np.inf] - ranks[high]) <= 1
    # and the table says it
    code, out, err = pgeval(
        f"sweep --sample-queries 60 --target {target} --stage hnsw --find hnsw.ef_search "
        "--target-recall 0.95 --repeat 1"
    )
    assert code == 0, err
    assert f"95 % interval {iv['low']}–" in out
