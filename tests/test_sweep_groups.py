"""`pgeval sweep --group-by COLUMN` (issue "Index designs and tenants") on the real server: a
table of tenants (a 1 % group, a 10 % group, the rest, a one-row group, rows with no tenant) under
one HNSW index, each group searched as the application searches it (``WHERE tenant = value``).

- Per-group recall equals a computation by hand: the application's statement run per sampled
  query, against numpy's exact search within the group (docs/METRICS.md, index recall).
- The small tenant is the one a whole-table recall hides: short lists, recall far under the
  others; the iterative scan measured for it fixes it.
- ``--find`` with ``--group-by`` recommends the least value at which every group reaches the
  target, measured in every group.
- The target's own ``--group-by`` groups a sweep that names none; bad combinations are refused.
"""

from __future__ import annotations

import json

import clustered_kb
import numpy as np
import pytest

pytestmark = pytest.mark.slow

TABLE, DIM, N, K, DEPTH = "tenant_kb", 32, 3000, 10, 20
TARGET = "tenants"
BASE = (
    "sweep --sample-queries 20 --target {t} --stage hnsw --group-by tenant --repeat 1 "
    "--set enable_seqscan=off --set work_mem=4311kB --target-recall 0.9 --format json"
)


@pytest.fixture(scope="module")
def kb(database):
    rng = np.random.default_rng(7)
    centers = rng.normal(size=(30, DIM))
    docs = (centers[rng.integers(0, 30, N)] + 0.6 * rng.normal(size=(N, DIM))).astype(np.float32)
    tenant = np.array(["big"] * N, dtype=object)
    order = rng.permutation(N)
    tenant[order[:30]] = "small"  # 1 %
    tenant[order[30:330]] = "mid"  # 10 %
    tenant[order[330]] = "solo"  # one chunk: nothing to find besides it
    tenant[order[331:336]] = None  # in no group
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({DIM}), tenant text)")
        with c.cursor().copy(f"COPY {TABLE} (id, e, tenant) FROM STDIN") as cp:
            for i, v in enumerate(docs):
                cp.write_row((f"c{i + 1}", clustered_kb.vtext(v), tenant[i]))
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(f"CREATE INDEX tenant_kb_hnsw ON {TABLE} USING hnsw (e vector_cosine_ops)")
        c.execute(f"ANALYZE {TABLE}")
    yield {f"c{i + 1}": (docs[i], tenant[i]) for i in range(N)}
    clustered_kb.drop(database, TABLE)


@pytest.fixture(scope="module")
def target(kb, database):
    from evaluator.targets.add import add_target

    add_target(database, TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    return TARGET


def run_json(pgeval, args: str) -> dict:
    code, out, err = pgeval(args)
    assert code == 0, err
    return json.loads(out)


def by_hand(database, kb: dict, group: str, query_ids: list[str], ef_search: int) -> float:
    """Mean index recall@K of the application's statement (``WHERE tenant = $2 ORDER BY e <=> $1
    LIMIT depth``, the sampled query's own row dropped), against numpy's exact cosine search
    within the group: a row is a hit when its distance is within the K-th exact distance."""
    ids = [i for i, (_, t) in kb.items() if t == group]
    mat = np.stack([kb[i][0] for i in ids]).astype(np.float64)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    total = 0.0
    with database.connect(results=False) as c:
        for q in query_ids:
            v = kb[q][0].astype(np.float64)
            dist = 1 - mat @ (v / np.linalg.norm(v))
            exact = sorted(d for i, d in zip(ids, dist, strict=True) if i != q)[:K]
            d_k = exact[-1]
            c.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef_search),))
            c.execute("SET LOCAL enable_seqscan = off")
            rows = c.execute(
                f"SELECT id, e <=> %s::vector FROM {TABLE} WHERE tenant = %s "
                f"ORDER BY e <=> %s::vector LIMIT {DEPTH + 1}",
                (clustered_kb.vtext(kb[q][0]), group, clustered_kb.vtext(kb[q][0])),
            ).fetchall()
            c.rollback()
            got = sorted(d for i, d in rows if i != q)[:K]
            hits = sum(1 for d in got if d <= d_k + 1e-6 * max(1.0, abs(d_k)))
            total += hits / len(exact)
    return total / len(query_ids)


def sampled(conn, sweep: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT q.query_id FROM pgeval.sweep s JOIN pgeval.query q USING (testset_id) "
            "WHERE s.name = %s ORDER BY 1",
            (sweep,),
        )
    ]


def test_recall_per_group_equals_the_application_by_hand(pgeval, database, conn, kb, target):
    # --sample-queries N is the whole sample: 96 over the 3 groups measured is 32 a group, at
    # most a group's chunks (small has 30)
    base = BASE.format(t=target).replace("--sample-queries 20", "--sample-queries 96")
    d = run_json(pgeval, base + " --param hnsw.ef_search=10,160")
    chunks = {g: sum(1 for _, t in kb.values() if t == g) for g in ("small", "mid", "big")}
    assert chunks["small"] == 30
    assert d["group_by"] == "tenant" and d["groups_total"] == 4 and d["null_rows"] == 5
    assert [s["group"] for s in d["skipped"]] == ["solo"]
    assert any("5 rows have no tenant" in w for w in d["warnings"])
    assert set(d["sweeps"]) == {"small", "mid", "big"}
    for point in d["points"]:
        ef = int(point["settings"]["hnsw.ef_search"])
        for g in point["groups"]:
            queries = sampled(conn, d["sweeps"][g["group"]])
            assert g["queries"] == len(queries) == min(96 // 3, chunks[g["group"]])
            assert g["recall"] == pytest.approx(
                by_hand(database, kb, g["group"], queries, ef), abs=1e-9
            ), (g["group"], ef)
        recalls = [g["recall"] for g in point["groups"]]
        assert recalls == sorted(recalls)  # worst first
        assert point["worst_recall"] == recalls[0]
    # the 1 % tenant is the one the whole table hides: short lists, far under the others
    at = {g["group"]: g for g in d["groups"]}
    assert d["recommendation"] is None
    assert at["small"]["recall"] < 0.5 < at["big"]["recall"]
    assert at["small"]["short"] == 30 and at["big"]["short"] == 0  # every small query
    assert not at["small"]["reached"] and at["big"]["reached"]
    # measured again with pgvector's iterative scan, at the same settings: it fixes the tenant
    assert set(at["small"]["iterative"]) == {"strict_order", "relaxed_order"}
    assert "strict_order" in at["small"]["fixed_by"]
    assert at["small"]["iterative"]["strict_order"] >= 0.9
    assert "iterative" not in at["big"]
    assert "an iterative scan fixes small" in d["recommendation_line"]


def test_table_names_the_groups_that_miss(pgeval, target):
    code, out, err = pgeval(
        BASE.format(t=target).replace("--format json", "") + " --param hnsw.ef_search=10,160"
    )
    assert code == 0, err
    assert "grouped by tenant: all 4 groups" in out
    assert "tenant=small with an iterative scan: hnsw.iterative_scan=strict_order" in out
    assert "skipped tenant=solo (1 rows)" in out
    assert out.strip().splitlines()[-1].startswith("no point reaches recall@10 0.9 in every group")


def test_find_brings_the_worst_group_to_the_target(pgeval, target):
    d = run_json(
        pgeval,
        BASE.format(t=target)
        + " --set hnsw.iterative_scan=strict_order --find hnsw.ef_search --find-max 400",
    )
    found = {g: f["value"] for g, f in d["finds"].items()}
    assert set(found) == {"small", "mid", "big"} and all(d["finds"][g]["reached"] for g in found)
    rec = d["recommendation"]
    assert rec is not None and "in every group" in rec["why"]
    # the least value at which every group reaches the target: the worst group's own value,
    # measured in every group
    assert rec["label"].endswith(f"ef_search={max(found.values())}")
    assert all(g["reached"] and g["recall"] >= 0.9 - 1e-12 for g in d["groups"])
    assert rec["index_recall"] == min(g["recall"] for g in d["groups"])


def test_the_targets_own_group_by(pgeval, kb, database):
    code, _, err = pgeval(
        f"target add tenants2 --table {TABLE} --id-column id --vector-column e --group-by tenant"
    )
    assert code == 0, err
    d = run_json(
        pgeval,
        BASE.format(t="tenants2").replace(" --group-by tenant", "")
        + " --param hnsw.ef_search=160 --max-groups 2",
    )
    assert d["group_by"] == "tenant"
    assert d["chosen"] == "2 of 4 groups: the 1 largest and the 1 smallest"
    assert set(d["sweeps"]) == {"big"}  # the smallest, solo, has nothing to find
    assert [s["group"] for s in d["skipped"]] == ["solo"]


@pytest.mark.parametrize(
    "extra, text",
    [
        ("--group-by nope", "column 'nope' does not exist in tenant_kb"),
        ("--group-queries 5", "--group-queries applies with --group-by"),
        ("--group-by tenant --group-queries 0", "--group-queries must be >= 1, got 0"),
        ("--group-by tenant --build m=8", "not with --build"),
        (
            "--group-by tenant --find hnsw.ef_search --param hnsw.max_scan_tuples=100",
            "give no other --param",
        ),
    ],
)
def test_bad_groupings_are_refused(pgeval, target, extra, text):
    code, out, err = pgeval(
        f"sweep --sample-queries 5 --target {target} --stage hnsw --param hnsw.ef_search=10 "
        + extra
    )
    assert code == 1 and out == ""
    assert text in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_group_by_needs_sampled_queries(pgeval, target, tmp_path):
    np.save(tmp_path / "q.npy", np.ones((2, DIM), dtype=np.float32))
    code, _, err = pgeval(
        f"sweep --queries-file {tmp_path / 'q.npy'} --target {target} --stage hnsw "
        "--param hnsw.ef_search=10 --group-by tenant"
    )
    assert code == 1 and "give --sample-queries N" in err


def test_pipeline_per_group_equals_the_application_by_hand(pgeval, database, conn, kb, target):
    """`run pipeline --group-by`: one experiment per group, each group's recall@10 of the hnsw
    stage equal to the application's statement by hand on that group's sampled queries."""
    d = run_json(
        pgeval,
        f"run pipeline --sample-queries 20 --target {target} --stages exact,hnsw "
        "--set enable_seqscan=off --set hnsw.ef_search=10 --set work_mem=4313kB --depth 20 "
        "--repeat 1 --group-by tenant --group-queries 12 --name pipe-groups --format json",
    )
    assert d["group_by"] == "tenant" and [s["group"] for s in d["skipped"]] == ["solo"]
    groups = {g["group"]: g for g in d["groups"]}
    assert set(groups) == {"small", "mid", "big"}
    assert [g["group"] for g in d["groups"]][0] == "small"  # worst first
    for name, g in groups.items():
        assert g["experiment"] == f"pipe-groups/tenant={name}"
        queries = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT q.query_id FROM pgeval.experiment e "
                "JOIN pgeval.query q USING (testset_id) WHERE e.name = %s ORDER BY 1",
                (g["experiment"],),
            )
        ]
        assert len(queries) == g["queries"] == 12  # --group-queries: per group
        hnsw = g["stages"]["hnsw"]
        assert hnsw["recall"] == pytest.approx(by_hand(database, kb, name, queries, 10), abs=1e-9)
        assert hnsw["p95_ms"] is not None and hnsw["p95_ms"] > 0
    assert groups["small"]["stages"]["hnsw"]["short"] == 12
    code, out, err = pgeval(
        f"run pipeline --sample-queries 5 --target {target} --stages exact,hnsw "
        "--set enable_seqscan=off --depth 20 --repeat 1 --group-by tenant --max-groups 2 "
        "--name pipe-groups-table"
    )
    assert code == 0, err
    assert "pipeline grouped by tenant: 2 of 4 groups" in out
    assert "\nbig " in out and "skipped tenant=solo" in out
