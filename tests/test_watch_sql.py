"""pgeval.run_probe (sql/220_run_probe.sql, migration 0010_probe_via): a probe run inside the
database, for pg_cron (pg_cron itself is not installed here: the function is called directly).

- On the same target, setting and sampled queries, the SQL probe's recall equals `pgeval watch`'s
  (hnsw and ivfflat, to 1e-9), and its queries, rows returned, table rows, data version and
  index build are the CLI's; on ivfflat it also equals recall computed by hand (numpy exact
  search, the application's statement run from here).
- diskann (where pgvectorscale is installed) and identifiers that need quoting too.
- It writes one pgeval.probe_history row (via 'sql', its own series), checks bounds as the
  view does and warns when one is crossed; its exact answer is reused on unchanged data and
  computed again after a change; a rolled-back transaction keeps no row and the
  caller's settings are as they were.
- An unknown target, a stage it does not measure and a target with several rows per chunk are
  refused with one clear error.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest

from tests import clustered_kb

HNSW_TABLE, HNSW_TARGET = "wsql_hnsw", "wsqlhnsw"
IVF_TABLE, IVF_TARGET = "wsql_ivf", "wsqlivf"
N, DIM, SAMPLE, K = 1500, 16, 60, 10
COMPARED = ("queries", "rows_mean", "table_rows", "data_version", "index_name", "index_build")


def _add_target(pgeval, name: str, table: str) -> None:
    code, out, err = pgeval(
        "target", "add", name, "--table", table, "--id-column", "id", "--vector-column", "e"
    )
    assert code == 0, err


@pytest.fixture
def kbs(database, conn, clean, pgeval, tmp_path):
    conn.execute("DELETE FROM pgeval.probe")
    docs = {}
    for table, ddl in (
        (
            HNSW_TABLE,
            f"CREATE INDEX {HNSW_TABLE}_ix ON {HNSW_TABLE} USING hnsw (e vector_cosine_ops) "
            "WITH (m = 8, ef_construction = 32)",
        ),
        (
            IVF_TABLE,
            f"CREATE INDEX {IVF_TABLE}_ix ON {IVF_TABLE} USING ivfflat (e vector_cosine_ops) "
            "WITH (lists = 60)",  # twice the data's clusters: probes=1 misses neighbours
        ),
    ):
        docs[table], _, _ = clustered_kb.build(
            database, tmp_path, table, dim=DIM, n=N, nq=1, seed=11, spread=0.3, indexes=[ddl]
        )
    _add_target(pgeval, HNSW_TARGET, HNSW_TABLE)
    _add_target(pgeval, IVF_TARGET, IVF_TABLE)
    yield docs
    conn.execute("DELETE FROM pgeval.probe")
    for table in (HNSW_TABLE, IVF_TABLE):
        clustered_kb.drop(database, table)


def _history(conn, probe_id: int) -> dict:
    cur = conn.execute("SELECT * FROM pgeval.probe_history WHERE probe_id = %s", (probe_id,))
    names = [d.name for d in cur.description]
    return dict(zip(names, cur.fetchone(), strict=True))


def _sql_probe(conn, target: str, stage: str, settings: dict, **kw) -> dict:
    args = ", ".join(f"{name} => %({name})s" for name in kw)
    row = conn.execute(
        "SELECT * FROM pgeval.run_probe(%(t)s, %(s)s, p_k => %(k)s, p_sample => %(n)s, "
        f"p_settings => %(set)s{', ' + args if args else ''})",
        {"t": target, "s": stage, "k": K, "n": SAMPLE, "set": json.dumps(settings), **kw},
    ).fetchone()
    return _history(conn, row[0]) | {"returned": row}


def _cli_probe(pgeval, conn, target: str, stage: str, settings: dict) -> dict:
    sets = [x for name, value in settings.items() for x in ("--set", f"{name}={value}")]
    code, out, err = pgeval(
        "watch",
        "--target",
        target,
        "--stage",
        stage,
        "--sample-queries",
        str(SAMPLE),
        "--k",
        str(K),
        *sets,
        "--format",
        "json",
    )
    assert code == 0, err
    (probe_id,) = conn.execute(
        "SELECT max(probe_id) FROM pgeval.probe WHERE via = 'cli'"
    ).fetchone()
    return _history(conn, probe_id)


@pytest.mark.parametrize(
    "target,stage,settings",
    [
        (HNSW_TARGET, "hnsw", {"enable_seqscan": "off", "hnsw.ef_search": "10"}),
        (IVF_TARGET, "ivfflat", {"enable_seqscan": "off", "ivfflat.probes": "1"}),
    ],
)
def test_sql_probe_measures_what_the_cli_probe_measures(kbs, conn, pgeval, target, stage, settings):
    cli = _cli_probe(pgeval, conn, target, stage, settings)
    sql = _sql_probe(conn, target, stage, settings)
    assert 0.3 < cli["recall"] < 1.0, cli["recall"]  # the setting loses neighbours: a real test
    assert sql["recall"] == pytest.approx(cli["recall"], abs=1e-9)
    for column in COMPARED:
        assert sql[column] == cli[column], column
    # LIMIT k + 1 (its own row is dropped after); hnsw at ef_search 10 returns at most 10
    assert sql["queries"] == SAMPLE and 0 < sql["rows_mean"] <= K + 1
    assert (sql["settings"], sql["query_source"], sql["k"]) == (
        cli["settings"],
        cli["query_source"],
        cli["k"],
    )
    assert (sql["via"], cli["via"]) == ("sql", "cli")
    assert sql["index_state"] == cli["index_state"]
    assert sql["p50_ms"] > 0 and sql["p95_ms"] >= sql["p50_ms"] and sql["timed_ms"] > 0
    assert sql["ground_truth"] == "computed"
    # the returned row is the history's
    returned = sql["returned"]
    assert (returned[1], returned[2], returned[3], returned[4]) == (
        sql["recall"],
        sql["p95_ms"],
        [],
        "ok",
    )


def test_filters_are_the_cli_s(kbs, database, conn, pgeval):
    """A target with filters (one value, several values, NULL as true) on typed columns: the
    SQL probe's WHERE (values bound as one text[] parameter, cast to each column's type)
    selects the CLI's rows."""
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"ALTER TABLE {HNSW_TABLE} ADD COLUMN tenant integer, ADD COLUMN enabled boolean")
        c.execute(
            f"UPDATE {HNSW_TABLE} SET tenant = substr(id, 2)::integer % 4, enabled = CASE "
            "WHEN substr(id, 2)::integer % 5 = 0 THEN NULL "
            "WHEN substr(id, 2)::integer % 7 = 0 THEN false ELSE true END"
        )
        c.execute(f"VACUUM ANALYZE {HNSW_TABLE}")
    code, out, err = pgeval(
        "target", "add", "wsqlfiltered", "--table", HNSW_TABLE, "--id-column", "id",
        "--vector-column", "e", "--where", "tenant=1", "--where", "tenant=2",
        "--where", "enabled=true", "--null-as-true", "enabled",
    )  # fmt: skip
    assert code == 0, err
    settings = {"enable_seqscan": "off", "hnsw.ef_search": "40"}
    cli = _cli_probe(pgeval, conn, "wsqlfiltered", "hnsw", settings)
    sql = _sql_probe(conn, "wsqlfiltered", "hnsw", settings)
    (rows,) = conn.execute(
        f"SELECT count(*) FROM {HNSW_TABLE} WHERE tenant IN (1, 2) AND (enabled IS NULL OR enabled)"
    ).fetchone()
    assert sql["table_rows"] == rows < N // 2
    assert sql["recall"] == pytest.approx(cli["recall"], abs=1e-9)
    for column in COMPARED:
        assert sql[column] == cli[column], column


def test_diskann_is_the_cli_s(database, conn, clean, pgeval, tmp_path):
    """pgvectorscale's DiskANN (its settings defined by loading its library in the function)."""
    with database.connect(results=False, autocommit=True) as c:
        if (
            c.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vectorscale'").fetchone()[
                0
            ]
            == 0
        ):
            pytest.skip("pgvectorscale is not installed")
    clustered_kb.build(
        database, tmp_path, "wsql_disk", dim=DIM, n=N, nq=1, seed=3, spread=0.3,
        indexes=["CREATE INDEX wsql_disk_ix ON wsql_disk USING diskann (e vector_cosine_ops)"],
    )  # fmt: skip
    try:
        _add_target(pgeval, "wsqldisk", "wsql_disk")
        settings = {"enable_seqscan": "off", "diskann.query_search_list_size": "10"}
        cli = _cli_probe(pgeval, conn, "wsqldisk", "diskann", settings)
        sql = _sql_probe(conn, "wsqldisk", "diskann", settings)
        assert sql["recall"] == pytest.approx(cli["recall"], abs=1e-9)
        for column in COMPARED:
            assert sql[column] == cli[column], column
    finally:
        clustered_kb.drop(database, "wsql_disk")


def test_quoted_identifiers(database, conn, clean, pgeval):
    """Table and column names that need quoting go through format('%I')."""
    table, idc, vec = 'wsql "odd" kb', "Id col", "select"
    with database.connect(results=False, autocommit=True) as c:
        c.execute('DROP TABLE IF EXISTS "wsql ""odd"" kb"')
        c.execute(f'CREATE TABLE "wsql ""odd"" kb" ("{idc}" text PRIMARY KEY, "{vec}" vector(3))')
        c.execute(
            'INSERT INTO "wsql ""odd"" kb" SELECT \'r\' || g, ARRAY[sin(g), cos(g), g % 7]::vector '
            "FROM generate_series(1, 300) g"
        )
        c.execute(f'CREATE INDEX ON "wsql ""odd"" kb" USING hnsw ("{vec}" vector_l2_ops)')
    try:
        code, _, err = pgeval(
            "target", "add", "wsqlodd", "--table", table, "--id-column", idc,
            "--vector-column", vec, "--distance", "l2",
        )  # fmt: skip
        assert code == 0, err
        settings = {"enable_seqscan": "off", "hnsw.ef_search": "10"}
        cli = _cli_probe(pgeval, conn, "wsqlodd", "hnsw", settings)
        sql = _sql_probe(conn, "wsqlodd", "hnsw", settings)
        assert sql["recall"] == pytest.approx(cli["recall"], abs=1e-9)
        assert sql["data_version"] == cli["data_version"] and sql["table_rows"] == 300
    finally:
        with database.connect(results=False, autocommit=True) as c:
            c.execute('DROP TABLE IF EXISTS "wsql ""odd"" kb"')


def _by_hand(conn, docs: np.ndarray, probes: int) -> float:
    """Recall@K of the ivfflat statement at ``probes`` on the sampled rows, exact search by numpy:
    the sample rule (hashtextextended order), the own row dropped, ties within 1e-6 counted."""
    ids = [
        r[0]
        for r in conn.execute(
            f'SELECT id FROM {IVF_TABLE} ORDER BY hashtextextended(id COLLATE "C", 0), '
            'id COLLATE "C" LIMIT %s',
            (SAMPLE,),
        ).fetchall()
    ]
    unit = docs.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    names = np.array([f"c{i}" for i in range(1, len(docs) + 1)])
    scores = []
    with conn.transaction():
        conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
        conn.execute("SELECT set_config('ivfflat.probes', %s, true)", (str(probes),))
        for qid in ids:
            row = int(qid[1:]) - 1
            dist = 1.0 - unit @ unit[row]
            others = np.argsort(dist, kind="stable")
            others = others[names[others] != qid][:K]
            d_k = dist[others[-1]]
            (q,) = conn.execute(f"SELECT e::text FROM {IVF_TABLE} WHERE id = %s", (qid,)).fetchone()
            statement = (
                f"SELECT id, e <=> %s::vector AS d FROM {IVF_TABLE} "
                "ORDER BY e <=> %s::vector LIMIT %s"
            )
            plan = conn.execute("EXPLAIN " + statement, (q, q, K + 1)).fetchall()
            assert any(f"{IVF_TABLE}_ix" in line for (line,) in plan), plan
            got = conn.execute(statement, (q, q, K + 1)).fetchall()
            kept = [chunk for chunk, _ in sorted(got, key=lambda r: (r[1], r[0])) if chunk != qid]
            hits = sum(1 for c in kept[:K] if dist[int(c[1:]) - 1] <= d_k + 1e-6)
            scores.append(hits / K)
    return float(np.mean(scores))


def test_sql_probe_equals_recall_computed_by_hand(kbs, conn):
    sql = _sql_probe(conn, IVF_TARGET, "ivfflat", {"ivfflat.probes": "1"})
    expected = _by_hand(conn, kbs[IVF_TABLE], 1)
    assert 0.3 < expected < 1.0  # probes=1 misses neighbours: a real comparison
    assert sql["recall"] == pytest.approx(expected, abs=1e-9)


def test_history_row_series_bounds_and_ground_truth(kbs, database, conn, pgeval):
    settings = {"hnsw.ef_search": "10"}
    _cli_probe(pgeval, conn, HNSW_TARGET, "hnsw", settings)  # another path: another series
    before = conn.execute("SELECT count(*) FROM pgeval.probe_history").fetchone()[0]
    first = _sql_probe(conn, HNSW_TARGET, "hnsw", settings)
    assert conn.execute("SELECT count(*) FROM pgeval.probe_history").fetchone()[0] == before + 1
    assert first["target"] == HNSW_TARGET and first["stage"] == "hnsw" and first["via"] == "sql"
    assert first["settings"]["hnsw.ef_search"] == "10"
    assert first["baseline_at"] == first["probed_at"]  # the first SQL probe is its own baseline
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    second = _sql_probe(
        conn, HNSW_TARGET, "hnsw", settings, p_min_recall=0.999, p_max_drop=0.5, p_max_p95_ms=1e6
    )
    assert second["baseline_at"] == first["probed_at"]
    assert second["recall"] == pytest.approx(first["recall"], abs=1e-12)  # same graph, same queries
    assert second["crossed"] == ["min_recall"]
    assert second["bounds"] == {"min_recall": 0.999, "max_drop": 0.5, "max_p95_ms": 1e6}
    assert second["returned"][3:5] == (["min_recall"], "crossed min_recall")
    assert second["returned"][5:] == (None,) * 5  # shape, share, weighted, worst: p_captured's
    assert any("crossed min_recall" in m and HNSW_TARGET in m for m in notices), notices
    # exact search: computed by the first SQL probe, reused on the same data and queries, computed
    # again once a row changed
    assert (first["ground_truth"], second["ground_truth"]) == ("computed", "reused")
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"UPDATE {HNSW_TABLE} SET e = e WHERE id = 'c1'")  # same content
        third = _sql_probe(conn, HNSW_TARGET, "hnsw", settings)
        assert third["ground_truth"] == "reused" and third["data_version"] == first["data_version"]
        c.execute(
            f"UPDATE {HNSW_TABLE} SET e = (SELECT e FROM {HNSW_TABLE} WHERE id = 'c2') "
            "WHERE id = 'c1'"
        )
        # no dead row left for a scan or autovacuum to change between the two probes below
        c.execute(f"VACUUM {HNSW_TABLE}")
    fourth = _sql_probe(conn, HNSW_TARGET, "hnsw", settings)
    assert fourth["ground_truth"] == "computed" and fourth["data_version"] != first["data_version"]
    cli = _cli_probe(pgeval, conn, HNSW_TARGET, "hnsw", settings)  # and the CLI agrees
    assert fourth["recall"] == pytest.approx(cli["recall"], abs=1e-9)


def test_rolled_back_probe_leaves_no_row_and_the_settings_as_they_were(kbs, database):
    with database.connect() as c:  # one transaction, rolled back
        c.execute("SET hnsw.ef_search = 37")
        c.execute("SET extra_float_digits = 0")  # the stored distances keep every digit anyway
        before = c.execute("SELECT count(*) FROM pgeval.probe").fetchone()[0]
        probe = "SELECT recall FROM pgeval.run_probe(%s, 'hnsw', p_sample => 20)"
        (computed,) = c.execute(probe, (HNSW_TARGET,)).fetchone()
        (reused,) = c.execute(probe, (HNSW_TARGET,)).fetchone()
        assert reused == computed
        assert [r[0] for r in c.execute(
            "SELECT ground_truth ->> 'status' FROM pgeval.probe WHERE probe_id > "
            "(SELECT coalesce(max(probe_id), 0) FROM pgeval.probe) - 2 ORDER BY probe_id"
        ).fetchall()] == ["computed", "reused"]  # fmt: skip
        assert c.execute("SELECT count(*) FROM pgeval.probe").fetchone()[0] == before + 2
        # the first query's d_K as stored, to the last bit (compared on the server: the client
        # reads floats at this session's 15 digits): its 10th neighbour but itself
        (same,) = c.execute(
            f"WITH q AS (SELECT id, e FROM {HNSW_TABLE} ORDER BY hashtextextended(id "
            f'COLLATE "C", 0), id COLLATE "C" LIMIT 1) SELECT max(d) = (SELECT (ground_truth '
            "-> 'd_k' ->> 0)::float8 FROM pgeval.probe ORDER BY probe_id DESC LIMIT 1) "
            f"FROM (SELECT t.e <=> q.e AS d FROM {HNSW_TABLE} t, q WHERE t.id <> q.id "
            f"ORDER BY 1 LIMIT {K}) x"
        ).fetchone()
        assert same is True
        assert c.execute(
            "SELECT current_setting('hnsw.ef_search'), current_setting('enable_seqscan'), "
            "current_setting('enable_indexscan'), current_setting('extra_float_digits')"
        ).fetchone() == ("37", "on", "on", "0")
        row = c.execute(
            "SELECT settings FROM pgeval.probe ORDER BY probe_id DESC LIMIT 1"
        ).fetchone()
        assert row[0] == {"hnsw.ef_search": "37"}  # the server's value when none is stored
        c.rollback()
        assert c.execute("SELECT count(*) FROM pgeval.probe").fetchone()[0] == before


@pytest.mark.parametrize(
    "call,sqlstate,message",
    [
        (
            "SELECT pgeval.run_probe('nope', 'hnsw')",
            "P0002",
            "pgeval.run_probe: no target named 'nope' (see `pgeval target list`)",
        ),
        (
            f"SELECT pgeval.run_probe('{HNSW_TARGET}', 'bm25')",
            "22023",
            "pgeval.run_probe measures stage hnsw, ivfflat or diskann, not 'bm25'",
        ),
        (
            f"SELECT pgeval.run_probe('{HNSW_TARGET}', 'hnsw-bq')",
            "22023",
            "a search of a cast column is probed by `pgeval watch` only",
        ),
        (
            f"SELECT pgeval.run_probe('{HNSW_TARGET}', 'hnsw', p_sample => {N + 1})",
            "22023",
            f"has {N} chunks (after its filters), fewer than the {N + 1} asked for",
        ),
        (
            f"SELECT pgeval.run_probe('{HNSW_TARGET}', 'hnsw', p_settings => "
            '\'{"hnsw.ef_serch": "10"}\')',
            "42704",
            "unknown setting 'hnsw.ef_serch'",
        ),
        (
            f"SELECT pgeval.run_probe('{HNSW_TARGET}', 'hnsw', p_settings => "
            '\'{"transaction_read_only": "off"}\')',
            "22023",
            "setting 'transaction_read_only' cannot be changed by a probe",
        ),
        (
            f"SELECT pgeval.run_probe('{IVF_TARGET}', 'hnsw')",
            "55000",
            "does not scan a hnsw index",
        ),
    ],
)
def test_refusals_are_one_clear_error(kbs, conn, call, sqlstate, message):
    before = conn.execute("SELECT count(*) FROM pgeval.probe").fetchone()[0]
    with pytest.raises(psycopg.Error) as exc:
        conn.execute(call)
    assert exc.value.sqlstate == sqlstate
    assert message in exc.value.diag.message_primary
    assert conn.execute("SELECT count(*) FROM pgeval.probe").fetchone()[0] == before


def test_several_rows_per_chunk_is_refused(database, conn, clean, pgeval):
    with database.connect(results=False, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS wsql_multi")
        c.execute("CREATE TABLE wsql_multi (id text, e vector(3))")
        c.execute("INSERT INTO wsql_multi VALUES ('a', '[1,0,0]'), ('a', '[0,1,0]')")
        c.execute("CREATE INDEX ON wsql_multi USING hnsw (e vector_cosine_ops)")
    try:
        _add_target(pgeval, "wsqlmulti", "wsql_multi")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="several rows per chunk"):
            conn.execute("SELECT pgeval.run_probe('wsqlmulti', 'hnsw')")
    finally:
        with database.connect(results=False, autocommit=True) as c:
            c.execute("DROP TABLE IF EXISTS wsql_multi")


def test_every_cast_kind_is_refused_as_a_cast_search(kbs, conn):
    """Each of the registry's kinds that search a cast (hnsw-halfvec, hnsw-bq, ivfflat-halfvec)
    is refused with the reason, from its name: the SQL path lists none of them."""
    from evaluator.kinds import registry

    cast = [n for n, k in registry.KINDS.items() if k.ann and k.cast_type]
    assert "ivfflat-halfvec" in cast
    for name in cast:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as exc:
            conn.execute("SELECT pgeval.run_probe(%s, %s)", (HNSW_TARGET, name))
        assert "a search of a cast column is probed by `pgeval watch` only" in str(exc.value)
        conn.rollback()


def test_probe_kinds_are_the_registry_s(conn):
    """The kinds, work settings and build defaults the SQL probe uses are the registry's."""
    from evaluator.kinds import registry

    rows = conn.execute("SELECT * FROM pgeval.probe_kinds()").fetchall()
    assert {r[0] for r in rows} <= set(registry.ann_kinds())
    for kind, method, work, defaults in rows:
        described = registry.KINDS[kind]
        assert described.index_method == method
        assert tuple(work) == described.work_settings
        assert defaults == registry.build_defaults(method)
        assert described.cast_type is None  # a cast kind would need its cast in the statement


def test_with_the_change_log_an_unchanged_table_is_not_checksummed(kbs, database, conn, pgeval):
    """Tracked (`pgeval target track`), the SQL probe takes the last SQL probe's rows, content
    checksum and sampled ids while the change log's count is unchanged (a tampered checksum comes
    back: no pass computed it; the table is not scanned at all), and measures them again once a
    write statement was counted (and then agrees with the CLI)."""
    settings = {"hnsw.ef_search": "10"}
    untracked = _sql_probe(conn, HNSW_TARGET, "hnsw", settings)
    assert _seq_scans(database, settings) >= 2  # untracked: the sample's and the checksum's
    code, _, err = pgeval("target", "track", HNSW_TARGET)
    assert code == 0, err
    try:
        first = _sql_probe(conn, HNSW_TARGET, "hnsw", settings)  # computed, the count recorded
        assert first["data_version"] == untracked["data_version"]
        sentinel = "5e471ee15e471ee1"
        conn.execute(
            "UPDATE pgeval.probe SET data_checksum = %s WHERE probe_id = %s",
            (sentinel, first["probe_id"]),
        )
        second = _sql_probe(conn, HNSW_TARGET, "hnsw", settings)
        assert second["data_version"] == sentinel and second["table_rows"] == N
        conn.execute(
            "UPDATE pgeval.probe SET data_checksum = %s WHERE data_checksum = %s",
            (untracked["data_version"], sentinel),
        )
        with database.connect(results=False, autocommit=True) as c:
            c.execute(f"UPDATE {HNSW_TABLE} SET e = e WHERE id = 'c1'")  # counted, same content
        third = _sql_probe(conn, HNSW_TARGET, "hnsw", settings)
        assert third["data_version"] == untracked["data_version"]
        assert third["recall"] == pytest.approx(untracked["recall"], abs=1e-12)
        assert third["ground_truth"] == "reused"
        # unchanged since: no sequential scan of the table at all (sample, checksum and exact
        # answer all the last probe's; the query vectors read through the primary key)
        assert _seq_scans(database, settings) == 0
        with database.connect(results=False, autocommit=True) as c:
            c.execute(f"DELETE FROM {HNSW_TABLE} WHERE id = 'c2'")
        fourth = _sql_probe(conn, HNSW_TARGET, "hnsw", settings)  # the sample drawn again
        assert fourth["table_rows"] == N - 1 and fourth["ground_truth"] == "computed"
        assert fourth["data_version"] != untracked["data_version"]
        cli = _cli_probe(pgeval, conn, HNSW_TARGET, "hnsw", settings)
        assert fourth["recall"] == pytest.approx(cli["recall"], abs=1e-9)
    finally:
        code, _, err = pgeval("target", "untrack", HNSW_TARGET)
        assert code == 0, err


def _seq_scans(database, settings: dict) -> int:
    """Sequential scans of the HNSW table by one SQL probe (in a transaction rolled back)."""
    with database.connect(results=False) as c:
        rel = c.execute("SELECT %s::regclass::oid", (HNSW_TABLE,)).fetchone()[0]
        c.execute(
            "SELECT * FROM pgeval.run_probe(%s, 'hnsw', p_k => %s, p_sample => %s, "
            "p_settings => %s)",
            (HNSW_TARGET, K, SAMPLE, json.dumps(settings)),
        )
        scans = c.execute("SELECT pg_stat_get_xact_numscans(%s)", (rel,)).fetchone()[0]
        c.rollback()
    return int(scans)
