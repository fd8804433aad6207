"""`pgeval advise --group-by` and `--sample-rows` (issue 25) on the real server: a table of two
tenants, a big one (90 %) and a small one (10 %), and no index. Each design is built once on a
scratch copy of every tenant and each tenant searched through it as the application searches it
(``WHERE tenant = $2``): a filtered HNSW scan returns short lists for the small tenant at the
setting the big one needs, so the small tenant sets the design's setting.

- Every design row carries its worst group (the small tenant), the recommendation's why names it,
  and the setting the big tenant alone needs leaves the small one under the target.
- The printed DDL and settings, applied to the table, then the printed statement run by hand per
  tenant (its sampled queries, numpy's exact search within the tenant) reach the target in every
  tenant.
- ``--sample-rows``: every design screened on a sample (its own stored target), the best
  confirmed on the whole table: the confirmed row's sweep is one of the table's target.
- ``--role``: the settings as ALTER ROLE ... IN DATABASE ..., run as printed.
"""

from __future__ import annotations

import html
import json

import clustered_kb
import numpy as np
import pytest
from test_advise import applied
from test_sweep_build import scratch_schemas

from evaluator.api import Pgeval

pytestmark = pytest.mark.slow

TABLE, TARGET, DIM, N, K, R = "advise_tenants", "advise-tenants", 32, 3000, 10, 0.9
SETTINGS = ["enable_seqscan=off", "work_mem=4321kB"]  # a 3,000-row table; this module's points
ARGS = (
    f"advise --target {TARGET} --sample-queries 20 --designs hnsw,hnsw-halfvec --group-by tenant "
    f"--target-recall {R} --set enable_seqscan=off --set work_mem=4321kB"
)


@pytest.fixture(scope="module")
def kb(database):
    rng = np.random.default_rng(11)
    centers = rng.normal(size=(30, DIM))
    docs = (centers[rng.integers(0, 30, N)] + 0.6 * rng.normal(size=(N, DIM))).astype(np.float32)
    tenant = np.array(["big"] * N, dtype=object)
    tenant[rng.permutation(N)[:300]] = "small"
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({DIM}), tenant text)")
        with c.cursor().copy(f"COPY {TABLE} (id, e, tenant) FROM STDIN") as cp:
            for i, v in enumerate(docs):
                cp.write_row((f"c{i + 1}", clustered_kb.vtext(v), tenant[i]))
        c.execute(f"ANALYZE {TABLE}")
    pg = Pgeval(database)
    pg.add_target(TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield pg, {f"c{i + 1}": (docs[i], tenant[i]) for i in range(N)}
    clustered_kb.drop(database, TABLE)


@pytest.fixture(scope="module")
def advised(kb, tmp_path_factory):
    pg, _ = kb
    report = tmp_path_factory.mktemp("advise-groups") / "advise.html"
    res = pg.advise(
        TARGET,
        sample_queries=20,
        designs="hnsw,hnsw-halfvec".split(","),
        group_by="tenant",
        target_recall=R,
        settings=SETTINGS,
        report=report,
    )
    d = res.as_dict()
    json.dumps(d)  # as --format json prints it
    return d, report


def sampled(conn, sweep: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT q.query_id FROM pgeval.sweep s JOIN pgeval.query q USING (testset_id) "
            "WHERE s.name = %s ORDER BY 1",
            (sweep,),
        )
    ]


def by_hand(
    database, kb: dict, rec: dict, group: str, query_ids: list[str], at: tuple | None = None
) -> float:
    """Mean index recall@K of the printed statement ($1 the query's vector, $2 the tenant; one
    row more, the sampled query's own row dropped; hits by full-precision distance) in a new session, after the printed settings
    (``at``: (setting, value) instead),
    against numpy's exact cosine search within the tenant (docs/METRICS.md, index recall)."""
    ids = [i for i, (_, t) in kb.items() if t == group]
    mat = np.stack([kb[i][0] for i in ids]).astype(np.float64)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    stmt = (
        rec["query_sql"]
        .replace("$1", "%(v)s")
        .replace("$2", "%(g)s")
        .replace(f"LIMIT {K}", f"LIMIT {K + 1}")
    )
    total = 0.0
    with database.connect(results=False, autocommit=True) as c:
        c.execute("SET enable_seqscan = off")
        if at is not None:  # another value than the printed one
            c.execute("SELECT set_config(%s, %s, false)", (at[0], str(at[1])))
        for q in query_ids:
            v = kb[q][0].astype(np.float64)
            dist = 1 - mat @ (v / np.linalg.norm(v))
            exact = sorted(d for i, d in zip(ids, dist, strict=True) if i != q)[:K]
            d_k = exact[-1]
            rows = c.execute(stmt, {"v": clustered_kb.vtext(kb[q][0]), "g": group}).fetchall()
            # the row's full-precision distance (last: hnsw-halfvec also returns its cast one)
            got = [r[-1] for r in rows if r[0] != q][:K]
            total += sum(1 for d in got if d <= d_k + 1e-6 * max(1.0, abs(d_k))) / len(exact)
    return total / len(query_ids)


def test_every_design_carries_its_worst_group(advised, conn):
    d, _ = advised
    assert d["group_by"] == "tenant"
    assert [r["design"] for r in d["designs"]] == ["hnsw", "hnsw-halfvec"]
    for r in d["designs"]:
        assert r["worst_group"]["group"] == "small" and r["worst_group"]["rows"] == 300
        recalls = {g["group"]: g["recall"] for g in r["groups"]}
        assert set(recalls) == {"big", "small"}
        assert r["worst_group"]["recall"] == r["recall"] == min(recalls.values())
        assert r["reached"] == all(g["reached"] for g in r["groups"])
        assert set(r["sweeps"]) == {"big", "small"} and r["sweep"] == r["sweeps"]["small"]
    hnsw = next(r for r in d["designs"] if r["design"] == "hnsw")
    # (a mean of per-query recalls: 0.9 can read 0.8999999999999998 as its rows' order varies;
    # reaching allows the float error, pgeval.reach_tolerance)
    assert hnsw["reached"] and hnsw["recall"] >= R - 1e-12
    # one find shared by the groups: the small tenant (short lists: it needs the most) first,
    # the big one from its value up, reaching R there in one point, not a find of its own
    found = hnsw["found"]
    assert found["big"] == found["small"] == hnsw["setting"]["hnsw.ef_search"]
    assert [v for v, _ in hnsw["find_path"]["big"]] == [found["small"]]
    worst_at = {int(p["value"]): p["recall"] for p in hnsw["points"]}
    assert worst_at[found["small"]] >= R - 1e-12
    # the largest value tried below the setting leaves the small tenant under R
    below = max((v, r) for v, r in hnsw["find_path"]["small"] if v < found["small"])
    assert below[1] < R
    rec = d["recommendation"]
    assert (
        rec is not None and "small with 300 rows" in rec["why"] and "in every group" in rec["why"]
    )
    assert rec["worst_group"]["group"] == "small"
    assert '"tenant" = $2' in rec["query_sql"] and rec["query_params"][1] == "<a value of tenant>"
    assert scratch_schemas(conn) == []


def test_one_build_per_design_and_the_sample_spread_over_the_groups(advised, conn):
    """Every group of a design is measured through one index on one scratch copy (the copy
    shared by the groups' sweeps: each group's own rows once told them apart, and each group
    copied the table and built the index again), and the groups share --sample-queries (here 20
    over 2 groups: at least min(N, 30) each, so 20 each)."""
    d, _ = advised
    assert d["group_queries"] == {
        "per_group": 20,
        "sample_queries": 20,
        "groups": 2,
        "given": False,
    }
    for r in d["designs"]:
        builds = conn.execute(
            "SELECT count(DISTINCT sp.build_ms), count(DISTINCT s.sweep_id) FROM pgeval.sweep_point sp "
            "JOIN pgeval.sweep s USING (sweep_id) WHERE s.name = ANY(%s) AND sp.build_ms IS NOT NULL",
            (list(r["sweeps"].values()),),
        ).fetchone()
        assert builds == (1, 2), r["design"]
        for sweep in r["sweeps"].values():
            assert len(sampled(conn, sweep)) == 20


def test_spread_of_the_sample_over_the_groups():
    from evaluator.targets.groups import MIN_GROUP_QUERIES, spread

    assert MIN_GROUP_QUERIES == 30
    assert spread(300, 10) == 30  # the 10 tenants: 300 queries in all
    assert spread(1000, 10) == 100 and spread(301, 10) == 31
    assert spread(100, 10) == 30  # at least 30 a group
    assert spread(20, 2) == 20 and spread(20, 1) == 20  # N itself when N is smaller
    assert spread(300, 10, given=300) == 300  # --group-queries


def test_group_queries_per_group_and_refused_without_groups(kb, conn, pgeval):
    pg, _ = kb
    d = pg.advise(
        TARGET,
        sample_queries=20,
        designs=["hnsw-halfvec"],
        group_by="tenant",
        group_queries=12,
        target_recall=R,
        settings=SETTINGS,
    ).as_dict()
    assert d["group_queries"] == {"per_group": 12, "sample_queries": 20, "groups": 2, "given": True}
    (row,) = d["designs"]
    for sweep in row["sweeps"].values():
        assert len(sampled(conn, sweep)) == 12
    code, out, err = pgeval(
        f"advise --target {TARGET} --sample-queries 20 --designs hnsw --group-queries 5"
    )
    assert code != 0 and "Traceback" not in err
    assert "--group-queries applies with --group-by" in err
    code, out, err = pgeval(
        f"advise --target {TARGET} --sample-queries 20 --designs hnsw --group-by tenant "
        "--group-queries 0"
    )
    assert code != 0 and "Traceback" not in err
    assert "--group-queries must be >= 1, got 0" in err


def test_a_design_no_value_brings_to_the_target_shows_where_its_worst_group_comes_closest(kb, conn):
    """With --find-max below what the small tenant needs, HNSW reaches the target in no value in
    every group: every group is then also measured at the best value the small one tried, and the
    row is that point (not the big tenant's least value, where the small one is at 0.12)."""
    pg, _ = kb
    d = pg.advise(
        TARGET,
        sample_queries=20,
        designs=["hnsw"],
        group_by="tenant",
        target_recall=R,
        settings=SETTINGS,
        find_max=60,
    ).as_dict()
    (row,) = d["designs"]
    assert not row["reached"] and d["recommendation"] is None
    assert row["worst_group"]["group"] == "small" and "small" in row["groups_missing"]
    assert row["setting"] == {"hnsw.ef_search": 60}
    worst_at = {int(p["value"]): p["recall"] for p in row["points"]}
    assert row["recall"] == max(worst_at.values()) == worst_at[60]
    assert worst_at[row["found"]["big"]] < row["recall"] < R
    assert scratch_schemas(conn) == []


# The index built on the table is another HNSW graph than the one advise measured on its scratch
# copy (levels drawn at random; apply.REBUILT says so), and advise's setting is the least reaching
# the target: a rebuild's recall there differs by a few hundredths (measured: 0.895 to 0.925 for
# the small tenant at 0.900 reported). So: the statements run as printed; pgeval's own measurement
# of the built index per tenant equals the printed statement by hand; every tenant is within
# REBUILD of the target there, and at the value the grouped find starts from (the big tenant
# reaches the target there) the small tenant is far under it by hand too.
REBUILD = 0.03


def test_applied_as_printed_every_tenant_reaches_the_target(advised, kb, database, conn):
    d, _ = advised
    pg, rows = kb
    rec = d["recommendation"]
    row = next(r for r in d["designs"] if r["design"] == rec["design"])
    find, value = next(iter(rec["setting"].items()))
    with applied(database, rec):
        measured = pg.sweep_groups(
            target=TARGET,
            stage=rec["design"],
            group_by="tenant",
            sample_queries=20,
            params={find: [value]},
            settings=SETTINGS,
            k=K,
            depth=K,
            repeat=1,
            fresh=True,
        )
        pgeval_recall = {g["group"]: g["recall"] for g in measured.groups}
        for group in ("big", "small"):
            queries = sampled(conn, measured.sweeps[group].name)
            assert queries == sampled(conn, row["sweeps"][group])  # advise's queries
            recall = by_hand(database, rows, rec, group, queries)
            assert recall == pytest.approx(pgeval_recall[group], abs=1e-9), group
            assert recall >= R - REBUILD, (group, recall)
        # the grouped find starts low (the small tenant first): there the big tenant alone
        # reaches the target by hand and the small one is far under it
        start = row["find_path"]["small"][0][0]
        assert start < value
        small = sampled(conn, row["sweeps"]["small"])
        big = sampled(conn, row["sweeps"]["big"])
        assert by_hand(database, rows, rec, "big", big, at=(find, start)) >= R - REBUILD
        assert by_hand(database, rows, rec, "small", small, at=(find, start)) < R - 0.3


def test_report_and_table_name_the_groups_that_miss(advised, pgeval):
    d, report = advised
    page = html.unescape(report.read_text())
    assert "The groups that miss" in page and "per group of" in page
    assert "worst_group" in page and "small" in page
    code, out, err = pgeval(ARGS)
    assert code == 0, err
    assert "per group of tenant: a design meets the target only if every group does" in out
    assert "worst_group" in out and "small" in out
    assert "with $1 <the query vector>, $2 <a value of tenant>" in out
    assert "recommended:" in out and "small with 300 rows" in out


def test_rerun_measures_nothing(advised, pgeval):
    d, _ = advised
    code, out, err = pgeval(ARGS + " --format json")
    assert code == 0, err
    again = json.loads(out)
    assert [r["measured"] for r in again["designs"]] == [0, 0]
    assert [(r["setting"], r["recall"]) for r in again["designs"]] == [
        (r["setting"], r["recall"]) for r in d["designs"]
    ]


def screened(pg) -> dict:
    """advise --group-by tenant screened on a 1,500-row sample, as JSON prints it."""
    return pg.advise(
        TARGET,
        sample_queries=20,
        designs=["hnsw", "hnsw-halfvec"],
        group_by="tenant",
        target_recall=R,
        settings=SETTINGS,
        sample_rows=1500,
    ).as_dict()


def test_sample_rows_with_groups(kb, conn):
    """Screened on 1,500 rows (both tenants in them), confirmed on the table: every row carries
    its worst group, the confirmed one measured per tenant on the table's target."""
    pg, _ = kb
    d = screened(pg)
    assert d["screened_on"] == 1500 and d["confirmed_on"] == "full"
    sweep_of = dict(conn.execute("SELECT name, target FROM pgeval.sweep").fetchall())
    for r in d["designs"]:
        assert r["worst_group"] and set(r["sweeps"]) == {"big", "small"}
        on = TARGET if r["measured_on"] == "table" else f"{TARGET}~sample1500"
        assert {sweep_of[s] for s in r["sweeps"].values()} == {on}
    confirmed = [r for r in d["designs"] if r["measured_on"] == "table"]
    assert confirmed and d["recommendation"]["sweep"] in {r["sweep"] for r in confirmed}
    assert confirmed[0]["groups"][0]["rows"] in (300, 2700)  # the table's tenants
    assert scratch_schemas(conn) == []


def test_sample_rows_with_a_group_btree_rerun_measures_nothing(kb, conn):
    """The sample copy carries the table's tenant btree, made again on each run (a new oid and
    filenode): a rerun still finds every screened sweep stored, none said changed or measured
    again."""
    pg, _ = kb
    conn.execute(f"CREATE INDEX advise_tenants_tenant ON {TABLE} (tenant)")
    conn.commit()
    try:
        runs = [screened(pg) for _ in range(2)]
    finally:
        conn.execute("DROP INDEX IF EXISTS advise_tenants_tenant")
        conn.commit()
    first, again = runs
    carried = conn.execute(  # the screened sweeps' copy carries the tenant btree
        "SELECT DISTINCT i.value ->> 'method' FROM pgeval.sweep s JOIN pgeval.experiment e "
        "USING (experiment_id), jsonb_each(e.fingerprint -> 'indexes') i "
        "WHERE s.target = %s",
        (f"{TARGET}~sample1500",),
    ).fetchall()
    assert ("btree",) in carried
    assert not [w for w in again["warnings"] if "configuration changed" in w], again["warnings"]
    assert again["stored"] is True
    assert [r["measured"] for r in again["designs"]] == [0] * len(again["designs"])
    assert [(r["setting"], r["recall"]) for r in again["designs"]] == [
        (r["setting"], r["recall"]) for r in first["designs"]
    ]
