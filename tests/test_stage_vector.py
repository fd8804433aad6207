"""Vector stages on the real server with real vectors (Cranfield MiniLM, else seeded random):
exact search equals a numpy brute force, HNSW recall against exact, stored runs, plan checks and
the known traps (ef_search below depth, DiskANN relaxed order, ORDER BY 1 - distance)."""

from __future__ import annotations

import numpy as np
import pytest
import vector_kb as kb

from evaluator.core.errors import InputError, PlanError
from evaluator.run.pipeline import PipelineConfig, run_pipeline

pytestmark = pytest.mark.slow


@pytest.fixture
def setup(clean, conn):
    kb.build(conn)
    kb.testset(conn, "va")
    for name, table in (("one", kb.ONE), ("two", kb.TWO), ("ivf", kb.IVF)):
        kb.target(conn, name, table)
    return clean


def run(database, stages, target="one", **kw):
    kw.setdefault("repeat", 1)
    kw.setdefault("depth", 100)
    warnings = []
    res = run_pipeline(
        database,
        PipelineConfig(testset="va", stages=stages, target=target, **kw),
        on_warning=warnings.append,
    )
    return res, warnings


def ranked(conn, run_name):
    """{query_id: [(rank, chunk_id, score)]} of a stored run."""
    out: dict[str, list] = {}
    for qid, rank, chunk, score in conn.execute(
        "SELECT x.query_id, x.rank, x.chunk_id, x.score FROM pgeval.result x "
        "JOIN pgeval.run r USING (run_id) WHERE r.name = %s ORDER BY 1, 2",
        (run_name,),
    ):
        out.setdefault(qid, []).append((rank, chunk, score))
    return out


def cosine_distances(q: np.ndarray, m: np.ndarray) -> np.ndarray:
    q64, m64 = q.astype(np.float64), m.astype(np.float64)
    return 1.0 - (m64 @ q64) / (np.linalg.norm(m64, axis=1) * np.linalg.norm(q64))


def test_exact_equals_numpy_brute_force(setup, conn):
    res, _ = run(setup, "exact", name="ex")
    ids, matrix = kb.table_vectors(conn, kb.ONE)
    ids = np.array(ids)
    queries = {
        r[0]: np.array(r[1].strip("[]").split(","), dtype=np.float32)
        for r in conn.execute(
            "SELECT query_id, embedding::text FROM pgeval.query q JOIN pgeval.testset t "
            "USING (testset_id) WHERE t.name = 'va'"
        )
    }
    got = ranked(conn, "ex.exact.1")
    assert set(got) == set(queries)
    mismatched_positions = 0
    for qid, qv in queries.items():
        d = cosine_distances(qv, matrix)
        order = np.lexsort((ids, d))[:100]  # distance, then chunk id (the stage's rule)
        rows = got[qid]
        assert [r[0] for r in rows] == list(range(1, 101))
        ours_ids = [r[1] for r in rows]
        ours_d = np.array([r[2] for r in rows])
        # the stored score is the exact distance of that chunk
        lookup = dict(zip(ids, d, strict=True))
        assert np.allclose(ours_d, [lookup[c] for c in ours_ids], atol=1e-5)
        # nothing outside the list is nearer than the list's last entry
        outside = np.setdiff1d(np.arange(len(ids)), [np.where(ids == c)[0][0] for c in ours_ids])
        assert d[outside].min() >= ours_d[-1] - 1e-5
        # same ids in the same order, except where numpy and float32 round a near-tie differently
        for a, b, da in zip(ours_ids, ids[order], d[order], strict=True):
            if a != b:
                assert abs(lookup[a] - da) < 1e-5
                mismatched_positions += 1
    assert mismatched_positions <= len(queries)  # near-ties only: a handful, not systematic


def test_runs_are_stored_with_ranks_scores_timings(setup, conn):
    run(setup, "exact,hnsw", name="st", depth=20, settings={"hnsw.ef_search": "40"})
    for stage in ("exact", "hnsw"):
        params, status, depth, boundary, order_rule = conn.execute(
            "SELECT params, status, depth, timing_boundary, order_rule FROM pgeval.run "
            "WHERE name = %s",
            (f"st.{stage}.1",),
        ).fetchone()
        assert status == "complete" and depth == 20
        assert params["score"] == "distance" and params["metric"] == "cosine"
        assert "round trip" in boundary and "distance ascending" in order_rule
        rows = ranked(conn, f"st.{stage}.1")
        assert (
            len(rows)
            == conn.execute(
                "SELECT count(*) FROM pgeval.query q JOIN pgeval.testset "
                "t USING (testset_id) WHERE t.name = 'va'"
            ).fetchone()[0]
        )
        for items in rows.values():
            assert [r[0] for r in items] == list(range(1, 21))
            scores = [r[2] for r in items]
            assert scores == sorted(scores)
            assert len({r[1] for r in items}) == 20
        n, lat = conn.execute(
            "SELECT count(*), min(latency_ms) FROM pgeval.query_timing JOIN "
            "pgeval.run USING (run_id) WHERE name = %s",
            (f"st.{stage}.1",),
        ).fetchone()
        assert n == len(rows) and lat > 0
    assert (
        conn.execute("SELECT params->>'index' FROM pgeval.run WHERE name = 'st.hnsw.1'").fetchone()[
            0
        ]
        == "va_one_hnsw"
    )


def test_results_are_written_between_queries_never_while_one_is_timed(setup, conn, monkeypatch):
    """A write that overlaps a timed query adds pgeval's own work to the latency it reports (a
    writer thread made p99 1.3 to 4 times the bare loop's): every batch is written by the
    stage's own thread while no statement is being timed, and every query's results arrive."""
    import threading

    from evaluator.stages import store, timing

    timed = {"now": False}
    writes: list[tuple[bool, bool]] = []
    execute, write = timing.TimedStatement.execute, store.RunWriter._write

    def timed_execute(self, params):
        timed["now"] = True
        try:
            return execute(self, params)
        finally:
            timed["now"] = False

    def recorded_write(self, *batch):
        writes.append((threading.current_thread() is threading.main_thread(), timed["now"]))
        return write(self, *batch)

    monkeypatch.setattr(timing.TimedStatement, "execute", timed_execute)
    monkeypatch.setattr(store.RunWriter, "_write", recorded_write)
    scope = store.run_scope
    monkeypatch.setattr(  # several batches per stage run
        store, "run_scope", lambda *a, **k: scope(*a, **{**k, "flush_every": 3})
    )
    run(setup, "exact,hnsw", name="inline", depth=10)
    assert len(writes) >= 4, writes
    assert all(own and not during for own, during in writes), writes
    n = conn.execute(
        "SELECT count(*) FROM pgeval.result_list JOIN pgeval.run USING (run_id) "
        "WHERE name = 'inline.hnsw.1'"
    ).fetchone()[0]
    assert (
        n
        == conn.execute(
            "SELECT count(*) FROM pgeval.query JOIN pgeval.testset t USING (testset_id) "
            "WHERE t.name = 'va'"
        ).fetchone()[0]
    )


def test_hnsw_recall_against_exact_is_high(setup, conn):
    run(setup, "exact,hnsw", name="rc", depth=10, settings={"hnsw.ef_search": "100"})
    exact, hnsw = ranked(conn, "rc.exact.1"), ranked(conn, "rc.hnsw.1")
    recall = np.mean([len({r[1] for r in hnsw[q]} & {r[1] for r in exact[q]}) / 10 for q in exact])
    assert recall >= 0.95


def test_exact_plan_has_no_ann_index(setup, conn):
    # forcing the index scan back on (and making the sequential scan's distance computations
    # look expensive) lets the planner use HNSW: the exact stage must refuse to report that as
    # exact search (it keeps enable_seqscan on whatever --set says, so cost is the lever here)
    with pytest.raises(PlanError, match="exact search must not use an ANN index.*va_one_hnsw"):
        run(
            setup,
            "exact",
            name="bad",
            settings={"enable_indexscan": "on", "cpu_operator_cost": "1000"},
        )
    assert conn.execute("SELECT count(*) FROM pgeval.experiment").fetchone()[0] == 0


def test_wrong_index_is_named_and_isolate_index_fixes_it(setup, conn):
    with pytest.raises(
        PlanError,
        match=r"uses index va_two_diskann \(diskann.*not a hnsw index "
        r"\(va_two_hnsw\).*--isolate-index",
    ):
        run(setup, "hnsw", target="two", name="wrong")
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == 0
    res, warnings = run(setup, "hnsw,diskann", target="two", name="iso", isolate_index=True)
    params = conn.execute("SELECT params FROM pgeval.run WHERE name = 'iso.hnsw.1'").fetchone()[0]
    assert params["index"] == "va_two_hnsw" and params["isolated_from"] == ["va_two_diskann"]
    # rolled back: both indexes are still there, and the diskann stage used its own index
    assert (
        conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'va_two' AND indexname "
            "IN ('va_two_hnsw', 'va_two_diskann')"
        ).fetchone()[0]
        == 2
    )
    assert (
        conn.execute(
            "SELECT params->>'index' FROM pgeval.run WHERE name = 'iso.diskann.1'"
        ).fetchone()[0]
        == "va_two_diskann"
    )


def test_named_index_must_exist(setup):
    with pytest.raises(InputError, match="index 'nope' is not a hnsw index"):
        run(setup, "hnsw", name="x", options={"hnsw": {"index": "nope"}})


def test_ef_search_below_depth_trap(setup, conn):
    _, warnings = run(setup, "hnsw", name="ef", depth=50, settings={"hnsw.ef_search": "20"})
    assert any("hnsw.ef_search=20 is below --depth 50" in w for w in warnings)
    lo, hi = conn.execute(
        "SELECT min(rows_returned), max(rows_returned) FROM pgeval.query_timing "
        "JOIN pgeval.run USING (run_id) WHERE name = 'ef.hnsw.1'"
    ).fetchone()
    assert lo == hi == 20
    assert max(len(v) for v in ranked(conn, "ef.hnsw.1").values()) == 20
    _, warnings = run(
        setup,
        "hnsw",
        name="it",
        depth=50,
        settings={"hnsw.ef_search": "20", "hnsw.iterative_scan": "relaxed_order"},
    )
    assert not any("below --depth" in w for w in warnings)
    assert (
        conn.execute(
            "SELECT min(rows_returned) FROM pgeval.query_timing JOIN pgeval.run "
            "USING (run_id) WHERE name = 'it.hnsw.1'"
        ).fetchone()[0]
        == 50
    )
    got = ranked(conn, "it.hnsw.1")  # relaxed order came back re-sorted by exact distance
    assert all([r[2] for r in v] == sorted(r[2] for r in v) for v in got.values())


def test_diskann_relaxed_order_is_resorted(setup, conn):
    from evaluator.stages import vector_sql

    # the bare index scan (no re-sort) with rescoring off returns rows out of distance order
    t = kb.target(conn, "two", kb.TWO)
    body, _ = vector_sql.inner(t, 100, vector_sql.sql.Placeholder("q"))
    q_rows = conn.execute("SELECT query_id, embedding::text FROM pgeval.query").fetchall()
    unsorted = 0
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL diskann.query_rescore = 0")
        for _, qv in q_rows[:40]:
            d = [r[1] for r in conn.execute(body, {"q": qv})]
            unsorted += d != sorted(d)
    assert unsorted > 0
    run(setup, "diskann", target="two", name="dk", settings={"diskann.query_rescore": "0"})
    got = ranked(conn, "dk.diskann.1")
    assert all([r[2] for r in v] == sorted(r[2] for r in v) for v in got.values())


def test_similarity_order_by_cannot_use_the_index(setup, conn):
    """The trap: ORDER BY 1 - distance DESC is a sequential scan; the stage's SQL orders by the
    bare operator, which the index serves."""
    from psycopg import sql

    from evaluator.stages import plan_check, vector_sql

    t = kb.target(conn, "one", kb.ONE)
    q = conn.execute("SELECT embedding::text FROM pgeval.query LIMIT 1").fetchone()[0]
    stmt, _, _ = vector_sql.per_query(t, 10)
    text = stmt.as_string(conn)
    assert 'ORDER BY "emb" <=> %(q)s::vector LIMIT 10' in text
    all_ann = plan_check.ann_indexes(
        conn, conn.execute("SELECT 'va_one'::regclass::oid").fetchone()[0]
    )
    conn.execute("SET enable_seqscan = off")  # as the ANN stages do (a 1400-row table)
    good = plan_check.explain(conn, stmt, {"q": q})
    assert (
        plan_check.check_ann(
            good, stage="hnsw", method="hnsw", candidates=["va_one_hnsw"], all_ann=all_ann
        )
        == "va_one_hnsw"
    )
    trap = sql.SQL(
        "SELECT doc_id, 1 - (emb <=> %(q)s::vector) AS sim FROM va_one "
        "ORDER BY 1 - (emb <=> %(q)s::vector) DESC LIMIT 10"
    )
    with pytest.raises(PlanError, match="sequential scan"):
        plan_check.check_ann(
            plan_check.explain(conn, trap, {"q": q}),
            stage="hnsw",
            method="hnsw",
            candidates=["va_one_hnsw"],
            all_ann=all_ann,
        )


def test_batch_equals_per_query_for_exact_and_hnsw(setup, conn):
    run(setup, "exact,hnsw", name="pq", depth=30)
    run(setup, "exact,hnsw", name="bt", depth=30, batch=True)
    for stage in ("exact", "hnsw"):
        a, b = ranked(conn, f"pq.{stage}.1"), ranked(conn, f"bt.{stage}.1")
        assert a.keys() == b.keys()
        for qid in a:
            assert [r[1] for r in a[qid]] == [r[1] for r in b[qid]]
            assert np.allclose([r[2] for r in a[qid]], [r[2] for r in b[qid]])
    boundary, params = conn.execute(
        "SELECT timing_boundary, params FROM pgeval.run WHERE name = 'bt.hnsw.1'"
    ).fetchone()
    assert boundary.startswith("batch") and params["batch_ms"] > 0
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.query_timing JOIN pgeval.run USING (run_id) "
            "WHERE name = 'bt.hnsw.1'"
        ).fetchone()[0]
        == 0
    )


def test_ivfflat_probes_and_short_lists(setup, conn):
    run(setup, "ivfflat", target="ivf", name="iv1", settings={"ivfflat.probes": "1"})
    run(setup, "ivfflat", target="ivf", name="iv20", settings={"ivfflat.probes": "20"})
    p1 = conn.execute("SELECT params FROM pgeval.run WHERE name = 'iv1.ivfflat.1'").fetchone()[0]
    p20 = conn.execute("SELECT params FROM pgeval.run WHERE name = 'iv20.ivfflat.1'").fetchone()[0]
    assert p1["index"] == "va_ivf_ivfflat" and p1["settings"]["ivfflat.probes"] == "1"
    assert p1["queries_short"] > 0  # one list of ~70 rows cannot fill depth 100
    assert p20["queries_short"] == 0 and p20["rows_returned_min"] == 100


def test_server_timing_is_recorded(setup, conn):
    run(setup, "hnsw", name="sv", depth=10, server_timing=True)
    n, srv = conn.execute(
        "SELECT count(*), min(server_ms) FROM pgeval.query_timing JOIN "
        "pgeval.run USING (run_id) WHERE name = 'sv.hnsw.1' AND server_ms IS NOT "
        "NULL"
    ).fetchone()
    assert n > 0 and srv > 0
    assert (
        "EXPLAIN ANALYZE"
        in conn.execute(
            "SELECT timing_boundary FROM pgeval.run WHERE name = 'sv.hnsw.1'"
        ).fetchone()[0]
    )


@pytest.mark.parametrize(
    "setting, message",
    [
        ("hnsw.ef_serch=10", "unknown setting 'hnsw.ef_serch'.*hnsw.ef_search"),
        ("hnsw.ef_search=0", "out of range 1..1000"),
        ("hnsw.ef_search=ten", "expected an integer"),
        ("hnsw.iterative_scan=sometimes", "expected one of off, relaxed_order, strict_order"),
        ("shared_buffers=1GB", "cannot be changed per transaction"),
        ("enable_seqscan=maybe", "expected on or off"),
    ],
)
def test_settings_are_validated(setup, conn, setting, message):
    from evaluator.stages import gucs

    with pytest.raises(InputError, match=message):
        run(setup, "exact,hnsw", name="gv", settings=gucs.parse([setting]))
    assert conn.execute("SELECT count(*) FROM pgeval.experiment").fetchone()[0] == 0


def test_exact_stays_exact_under_a_global_seqscan_off():
    """--set enable_seqscan=off is meant for ANN stages; the exact stage keeps its sequential
    scan (index scans stay off by default), so it never turns into an index scan."""
    from evaluator.stages.exact import ExactStage

    class Ctx:
        def settings_for(self, prefixes):
            return {"enable_seqscan": "off", "work_mem": "64MB"}

    settings = ExactStage().stage_settings(Ctx())
    assert settings["enable_seqscan"] == "on" and settings["enable_indexscan"] == "off"
    assert settings["work_mem"] == "64MB"


def test_rows_ranked_after_the_timing_as_postgresql_orders_them(conn):
    """The vector stages time the application's bare statement and rank its rows afterwards
    (vector_sql.ranked_rows): the same order as PostgreSQL's ``ORDER BY dist + 0, chunk_id
    COLLATE "C"`` (ties by byte order, NaN after every number, NULL last) and the same cut as
    ``dist > threshold`` (NaN is past it, NULL is not), on rows full of ties."""
    import math
    import random

    from evaluator.stages.vector_sql import ranked_rows

    rnd = random.Random(5)
    ids = ["a", "B", "b", "é", "e", "Z", "z1", "z10", "z2", "ß", "ä", "A", "10", "9", "_", "~"]
    values = [0.5, 0.25, 0.25, -0.0, 0.0, 1.0, math.nan, None, 0.75, 0.5]
    for _ in range(40):
        chunks = rnd.sample(ids, rnd.randint(1, len(ids)))
        dists = [rnd.choice(values) for _ in chunks]
        rows = list(zip(chunks, dists, strict=True))
        for threshold in (None, 0.5):
            want = conn.execute(
                "SELECT c, d FROM unnest(%s::text[], %s::float8[]) AS u(c, d) "
                "WHERE %s::float8 IS NULL OR NOT coalesce(d > %s::float8, false) "
                'ORDER BY d + 0, c COLLATE "C"',
                (chunks, dists, threshold, threshold),
            ).fetchall()
            got, dropped = ranked_rows(list(rows), threshold)
            assert [c for c, _ in got] == [c for c, _ in want], (rows, threshold)
            assert dropped == len(rows) - len(want)
    strictly = [("b", 0.1), ("a", 0.2), ("c", 0.3)]  # as HNSW returns them: kept as they are
    assert ranked_rows(strictly)[0] is strictly
