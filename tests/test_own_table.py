"""A DBA's own table without judgements (issue 11): query vectors sampled from the table, from a
statement or from a file; exact ground truth computed once, stored, reused across repetitions and
sweeps, and computed again when the table changes. Real server, real pgvector."""

from __future__ import annotations

import json

import numpy as np
import pytest
from dba_data import corpus, ensure_index, vec_text

from evaluator.core.errors import InputError
from evaluator.ground_truth import exact_scan
from evaluator.ground_truth import store as ground_truth
from evaluator.run.pipeline import PipelineConfig, run_pipeline
from evaluator.targets.targets import Target, save
from evaluator.testset.query_source import QuerySource
from evaluator.tuning.sweep import SweepConfig, run_sweep

TABLE, TARGET = "own_kb", "own-kb"


def _table(conn, name: str, docs: np.ndarray) -> None:
    if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()[0]:
        return
    conn.execute(f"CREATE TABLE {name} (id text PRIMARY KEY, embedding vector({docs.shape[1]}))")
    with conn.cursor().copy(f"COPY {name} (id, embedding) FROM STDIN") as cp:
        for i, v in enumerate(docs, 1):
            cp.write_row((f"d{i}", vec_text(v)))
    conn.execute(f"ANALYZE {name}")


@pytest.fixture
def own(conn):
    """A table of the user's (1,400 rows, HNSW index) and its target; no test set."""
    docs, _, _ = corpus()
    _table(conn, TABLE, docs)
    ensure_index(conn, TABLE, "own_kb_hnsw", "hnsw", "m = 8, ef_construction = 32")
    t = Target(
        name=TARGET,
        table=TABLE,
        id_column="id",
        vector_column="embedding",
        distance="cosine",
        dimension=docs.shape[1],
        unique_id=True,
    )
    save(conn, t, replace=True)
    return t


def sweep_cfg(work_mem: str, n: int = 30, **kw) -> SweepConfig:
    kw.setdefault("params", ("hnsw.ef_search=10,40",))
    kw.setdefault("repeat", 2)
    return SweepConfig(
        testset=None,
        queries=QuerySource("sample", count=n, seed=kw.pop("seed", 1)),
        target=TARGET,
        stage="hnsw",
        settings={"enable_seqscan": "off", "work_mem": work_mem},
        **kw,
    )


def test_sampled_exact_search_against_itself_is_one(database, own, conn, pgeval):
    """The stored ground truth (client scan) against the server's exact statement, both with
    each query's own chunk removed, through pgeval.index_recall: 1.0 for every query."""
    res = run_pipeline(
        database,
        PipelineConfig(
            testset="",
            queries=QuerySource("sample", count=25, seed=3),
            target=TARGET,
            stages="exact,check=exact",
            options={"check": {"ground_truth": "off"}},
            depth=10,
            repeat=1,
            name="own-self",
        ),
    )
    runs = {r["stage"]: r["run_id"] for r in res.runs}
    params = conn.execute(
        "SELECT params FROM pgeval.run WHERE run_id = %s", (runs["exact"],)
    ).fetchone()[0]
    assert params["ground_truth"]["status"] in ("computed", "reused")
    assert (
        "ground_truth"
        not in conn.execute(
            "SELECT params FROM pgeval.run WHERE run_id = %s", (runs["check"],)
        ).fetchone()[0]
    )
    # the configuration records where the queries came from
    cfg = conn.execute(
        "SELECT config FROM pgeval.experiment WHERE experiment_id = %s", (res.experiment_id,)
    ).fetchone()[0]
    assert cfg["queries"]["source"] == "sample" and cfg["queries"]["seed"] == 3
    # exactly a sample's record (no file: a sample of the table was read from none)
    assert set(cfg["queries"]) == {
        "source", "count", "content_hash", "own_chunk_removed", "seed", "target"
    }  # fmt: skip
    assert cfg["queries"]["count"] == 25 and len(cfg["queries"]["content_hash"]) == 64
    # no query finds its own chunk, in either run; both keep 10 rows
    for run_id in runs.values():
        own_hits, short = conn.execute(
            "SELECT count(*) FILTER (WHERE chunk_id = query_id), "
            "(SELECT count(*) FROM (SELECT query_id FROM pgeval.result WHERE run_id = %(r)s "
            "GROUP BY 1 HAVING count(*) <> 10) s) FROM pgeval.result WHERE run_id = %(r)s",
            {"r": run_id},
        ).fetchone()
        assert own_hits == 0 and short == 0
    conn.execute(
        'UPDATE pgeval.run SET params = params || \'{"role": "ann"}\' WHERE run_id = %s',
        (runs["check"],),
    )
    n, recall = conn.execute(
        "SELECT queries, index_recall FROM pgeval.index_recall(%s, 10, 1)", (res.experiment_id,)
    ).fetchone()
    assert n == 25 and recall == pytest.approx(1.0, abs=1e-12)
    same = conn.execute(
        "SELECT bool_and(a.chunk_id = b.chunk_id AND abs(a.score - b.score) < 1e-6) "
        "FROM pgeval.result a JOIN pgeval.result b ON b.run_id = %s AND b.query_id = a.query_id "
        "AND b.rank = a.rank WHERE a.run_id = %s",
        (runs["check"], runs["exact"]),
    ).fetchone()[0]
    assert same is True
    # the stage report says what the measures are, with no empty quality columns
    code, out, err = pgeval("stage-report", "own-self")
    assert code == 0, err
    assert "no graded judgements" in out and "ndcg@10" not in out
    assert "index_recall@10" in out
    assert any(line.split()[:2] == ["check", "1"] for line in out.splitlines()), out


def _gt_row(conn, status_filter_target=TARGET):
    return conn.execute(
        "SELECT gt_id, computed_at, uses FROM pgeval.ground_truth "
        "WHERE target = %s ORDER BY gt_id DESC LIMIT 1",
        (status_filter_target,),
    ).fetchone()


def test_ground_truth_computed_once_across_a_sweep_and_the_next(database, own, conn, pgeval):
    before = ground_truth.COMPUTED["count"]
    first = run_sweep(database, sweep_cfg("3MB", seed=11, name="own-gt-1"))
    assert first.ground_truth["status"] == "computed" and not first.judged
    assert ground_truth.COMPUTED["count"] == before + 1  # 2 points x 2 repetitions
    gt_id, at, uses = _gt_row(conn)
    assert uses == 2  # one exact run per repetition
    for p in first.points:
        assert p["index_recall"] is not None and 0 < p["index_recall"] <= 1
    # ef_search=10 caps the scan at 10 rows; at 40 the stage fetched 21 (depth 20 + the query's
    # own chunk) and kept 20, none of them the query's own chunk
    assert first.points[0]["rows_mean"] == 10 and first.points[1]["rows_mean"] == 21
    kept, own_hits = conn.execute(
        "SELECT max(n), sum(o) FROM (SELECT r.query_id, count(*) AS n, "
        "count(*) FILTER (WHERE r.chunk_id = r.query_id) AS o FROM pgeval.result r "
        "JOIN pgeval.run u USING (run_id) WHERE u.name = 'own-gt-1.ef_search=40.1' "
        "GROUP BY 1) s"
    ).fetchone()
    assert kept == 20 and own_hits == 0
    # a second sweep (another grid) on the same queries and data: reused, nothing computed
    code, out, err = pgeval(
        "sweep",
        "--sample-queries",
        "30",
        "--seed",
        "11",
        "--target",
        TARGET,
        "--stage",
        "hnsw",
        "--param",
        "hnsw.ef_search=20,80",
        "--set",
        "enable_seqscan=off",
        "--set",
        "work_mem=3MB",
        "--repeat",
        "3",
        "--name",
        "own-gt-2",
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ground_truth"]["status"] == "reused" and doc["judgements"] is False
    assert doc["queries"]["source"] == "sample" and doc["queries"]["count"] == 30
    assert ground_truth.COMPUTED["count"] == before + 1
    assert _gt_row(conn) == (gt_id, at, uses + 3)
    # the table output says what the measures are instead of empty quality columns
    code, out, err = pgeval(
        "sweep",
        "--sample-queries",
        "30",
        "--seed",
        "11",
        "--target",
        TARGET,
        "--stage",
        "hnsw",
        "--param",
        "hnsw.ef_search=20,80",
        "--set",
        "enable_seqscan=off",
        "--set",
        "work_mem=3MB",
        "--repeat",
        "3",
        "--name",
        "own-gt-2",
    )
    assert code == 0, err
    assert "no graded judgements" in out and "ndcg@10" not in out
    assert ground_truth.COMPUTED["count"] == before + 1


def test_ground_truth_computed_again_when_the_table_changes(database, own, conn):
    run_sweep(database, sweep_cfg("4MB", n=20, seed=5, repeat=1, name="own-inv-1"))
    before = ground_truth.COMPUTED["count"]
    conn.execute(f"INSERT INTO {TABLE} SELECT 'extra', embedding FROM {TABLE} WHERE id = 'd7'")
    try:
        res = run_sweep(
            database,
            sweep_cfg(
                "4MB", n=20, seed=5, repeat=1, name="own-inv-2", params=("hnsw.ef_search=30",)
            ),
        )
    finally:
        conn.execute(f"DELETE FROM {TABLE} WHERE id = 'extra'")
    assert ground_truth.COMPUTED["count"] == before + 1
    assert res.ground_truth["status"] == "computed"
    assert "data changed" in res.ground_truth["reason"]
    assert any("data changed" in w for w in res.warnings)
    # the stored ground truth now describes the changed table (one slot: the old one replaced)
    rows = conn.execute(
        "SELECT data->>'rows' FROM pgeval.ground_truth WHERE target = %s AND "
        "spec->>'queries' = (SELECT content_hash FROM pgeval.testset WHERE "
        "name = %s)",
        (TARGET, res.testset),
    ).fetchall()
    assert rows == [("1401",)]


def test_ground_truth_computed_again_when_one_vector_changes_in_place(database, own, conn):
    """Same row count, one vector changed: the checksum cache (pgeval.data_checksum) sees the new
    row version, the checksum moves and the stored ground truth is not reused."""
    run_sweep(
        database,
        sweep_cfg("5MB", n=20, seed=6, repeat=1, name="own-vec-1", params=("hnsw.ef_search=12",)),
    )
    again = run_sweep(
        database,
        sweep_cfg("5MB", n=20, seed=6, repeat=1, name="own-vec-2", params=("hnsw.ef_search=14",)),
    )
    assert again.ground_truth["status"] == "reused"
    before = ground_truth.COMPUTED["count"]
    old = conn.execute(f"SELECT embedding::text FROM {TABLE} WHERE id = 'd9'").fetchone()[0]
    conn.execute(
        f"UPDATE {TABLE} SET embedding = (SELECT embedding FROM {TABLE} WHERE id = 'd8') WHERE id = 'd9'"
    )
    try:
        res = run_sweep(
            database,
            sweep_cfg(
                "5MB", n=20, seed=6, repeat=1, name="own-vec-3", params=("hnsw.ef_search=16",)
            ),
        )
    finally:
        conn.execute(f"UPDATE {TABLE} SET embedding = %s WHERE id = 'd9'", (old,))
    assert ground_truth.COMPUTED["count"] == before + 1
    assert res.ground_truth["status"] == "computed" and "data changed" in res.ground_truth["reason"]


def test_queries_from_file_and_statement_are_one_query_set(database, own, conn, tmp_path):
    _, queries, _ = corpus()
    q = queries[:12]
    npy = tmp_path / "q.npy"
    np.save(npy, q)
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "embedding": [float(x) for x in v]}) + "\n"
            for i, v in enumerate(q, 1)
        )
    )
    from evaluator.testset.query_source import materialize

    name_npy, info_npy = materialize(database, QuerySource("file", path=str(npy)), own)
    name_jsonl, info_jsonl = materialize(database, QuerySource("file", path=str(jsonl)), own)
    assert name_npy == name_jsonl and info_npy["content_hash"] == info_jsonl["content_hash"]
    assert info_npy["count"] == 12 and not info_npy["own_chunk_removed"]
    conn.execute("CREATE TABLE IF NOT EXISTS own_query_log (qid text, v vector)")
    conn.execute("TRUNCATE own_query_log")
    with conn.cursor().copy("COPY own_query_log FROM STDIN") as cp:
        for i, v in enumerate(q, 1):
            cp.write_row((f"q{i}", vec_text(v)))
    name_sql, info_sql = materialize(
        database,
        QuerySource("sql", statement='SELECT qid, v FROM own_query_log ORDER BY qid COLLATE "C"'),
        own,
    )
    assert info_sql["count"] == 12 and info_sql["sql"].startswith("SELECT")
    # the statement orders q1, q10, q11, q12, q2, ...: another order, another query set
    assert name_sql != name_npy
    res = run_sweep(
        database,
        SweepConfig(
            testset=None,
            queries=QuerySource("file", path=str(jsonl)),
            target=TARGET,
            stage="hnsw",
            params=("hnsw.ef_search=40",),
            repeat=1,
            settings={"enable_seqscan": "off", "work_mem": "5MB"},
            name="own-file",
        ),
    )
    assert res.testset == name_npy and res.points[0]["index_recall"] > 0.5


@pytest.mark.parametrize(
    "line, field",
    [
        ('{"id": "q1"}', "embedding"),
        ('{"id": "q1", "embedding": [1, "x"]}', "embedding"),
        ('{"embedding": [1, 2]}', "id"),
        ("not json", None),
    ],
)
def test_bad_query_file_names_file_line_and_field(database, own, tmp_path, line, field):
    from evaluator.testset.query_source import materialize

    f = tmp_path / "bad.jsonl"
    f.write_text('{"id": "q0", "embedding": [0.5, 0.5]}\n' + line + "\n")
    with pytest.raises(InputError) as exc:
        materialize(database, QuerySource("file", path=str(f)), own)
    assert exc.value.file == str(f) and exc.value.line == 2 and exc.value.field == field


def test_wrong_dimension_and_two_sources_are_refused(database, own, tmp_path):
    from evaluator.testset.query_source import from_options, materialize

    f = tmp_path / "q.npy"
    np.save(f, np.ones((3, 5), dtype=np.float32))
    with pytest.raises(InputError, match="5 dimensions, the target searches"):
        materialize(database, QuerySource("file", path=str(f)), own)
    with pytest.raises(InputError, match="exactly one of"):
        from_options(testset="x", sample=10, seed=None, queries_sql=None, queries_file=None)
    with pytest.raises(InputError, match="fewer than"):
        materialize(database, QuerySource("sample", count=5000), own)


@pytest.mark.parametrize(
    "distance, column, filters",
    [
        ("l2", "embedding", {"grp": "a"}),
        ("ip", "embedding", {}),
        ("cosine", "embedding", {}),
        ("cosine", "h", {"grp": "b"}),
        ("l2", "h", {}),
    ],
)
def test_client_scan_equals_server_with_several_rows_per_chunk(
    database, conn, distance, column, filters
):
    """Several rows per chunk (collapsed to the best), every distance, vector and halfvec, with
    and without a filter: the streamed client scan gives the server's exact lists."""
    table = "own_dup"
    if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]:
        rng = np.random.default_rng(5)
        docs = rng.normal(size=(600, 24)).astype(np.float32)
        conn.execute(
            f"CREATE TABLE {table} (chunk text, embedding vector(24), h halfvec(24), grp text)"
        )
        with conn.cursor().copy(f"COPY {table} FROM STDIN") as cp:
            for i, v in enumerate(docs):  # chunks c0..c249 have two rows
                cp.write_row((f"c{i % 350}", vec_text(v), vec_text(v), "ab"[i % 2]))
    t = Target(
        name=f"own-dup-{distance}",
        table=table,
        id_column="chunk",
        vector_column=column,
        distance=distance,
        dimension=24,
        unique_id=False,
        vector_type="halfvec" if column == "h" else "vector",
        filters=filters,
    )
    queries = list(np.random.default_rng(9).normal(size=(8, 24)).astype(np.float32))
    with database.connect(results=False, read_only=True) as kb:
        client = exact_scan.scan(kb, t, queries, 15)
        server = exact_scan.server_lists(kb, t, queries, 15, {})
    assert len(client) == len(server) == len(queries)  # (a list missing on one side fails)
    for c, s in zip(client, server, strict=True):
        assert len(s) == 15 and len(set(x[0] for x in s)) == 15  # collapsed: one row a chunk
        assert [x[0] for x in c[:15]] == [x[0] for x in s]
        assert np.allclose([x[1] for x in c[:15]], [x[1] for x in s], rtol=1e-5, atol=1e-6)


def _pipeline(database, name: str):
    return run_pipeline(
        database,
        PipelineConfig(
            testset="",
            queries=QuerySource("sample", count=20, seed=21),
            target=TARGET,
            stages="exact,hnsw",
            settings={"enable_seqscan": "off", "hnsw.ef_search": "20"},
            depth=10,
            repeat=2,
            name=name,
        ),
    )


def _recall(conn, experiment: str) -> list[tuple]:
    return conn.execute(
        "SELECT r.label, r.repetition, r.queries, r.index_recall FROM generate_series(1, 2) rep, "
        "pgeval.index_recall((SELECT experiment_id FROM pgeval.experiment WHERE name = %s), "
        "10, rep) r ORDER BY 1, 2",
        (experiment,),
    ).fetchall()


def _lists(conn, run: str) -> list[tuple]:
    return conn.execute(
        "SELECT query_id, rank, chunk_id, round(score::numeric, 6) FROM pgeval.result "
        "JOIN pgeval.run USING (run_id) WHERE name = %s ORDER BY 1, 2",
        (run,),
    ).fetchall()


def test_resume_of_sampled_queries_reuses_the_stored_ground_truth(database, own, conn, pgeval):
    """`pgeval run resume` of a pipeline on sampled queries, interrupted in repetition 2 while
    its exact stage was being written: the exact stage is copied again from the stored ground
    truth (reused: not computed again, no exact statement per query, so no per-query timing),
    and every list and recall equals an uninterrupted pipeline's."""
    _pipeline(database, "own-res-ref")
    _pipeline(database, "own-res-x")
    gt_id, at, uses = _gt_row(conn)
    before = ground_truth.COMPUTED["count"]
    # as a kill -9 leaves it: exact.2 half written, hnsw.2 never started
    conn.execute("UPDATE pgeval.experiment SET status = 'running' WHERE name = 'own-res-x'")
    conn.execute("DELETE FROM pgeval.run WHERE name = 'own-res-x.hnsw.2'")
    rid = conn.execute(
        "UPDATE pgeval.run SET status = 'running', finished_at = NULL WHERE "
        "name = 'own-res-x.exact.2' RETURNING run_id"
    ).fetchone()[0]
    for table in ("run_progress", "result_list"):
        conn.execute(
            f"DELETE FROM pgeval.{table} WHERE run_id = %s AND query_id IN (SELECT query_id "
            f"FROM pgeval.{table} WHERE run_id = %s ORDER BY query_id LIMIT 12)",
            (rid, rid),
        )
    code, out, err = pgeval("run", "resume", "own-res-x", "--format", "json")
    assert code == 0, err
    actions = {r["run"]: r["action"] for r in json.loads(out)["rows"]}
    assert actions == {
        "own-res-x.exact.1": "kept",
        "own-res-x.hnsw.1": "kept",
        "own-res-x.exact.2": "restarted",
        "own-res-x.hnsw.2": "ran",
    }
    # the exact stage took the stored ground truth: nothing computed, no statement per query
    assert ground_truth.COMPUTED["count"] == before
    params, timings = conn.execute(
        "SELECT params, (SELECT count(*) FROM pgeval.query_timing t WHERE t.run_id = r.run_id) "
        "FROM pgeval.run r WHERE name = 'own-res-x.exact.2'"
    ).fetchone()
    assert params["ground_truth"]["status"] == "reused" and timings == 0
    assert _gt_row(conn) == (gt_id, at, uses + 1)
    # the resumed experiment holds the uninterrupted one's lists and recall
    for run in ("exact.1", "hnsw.1", "exact.2", "hnsw.2"):
        assert _lists(conn, f"own-res-x.{run}") == _lists(conn, f"own-res-ref.{run}"), run
    ref, resumed = _recall(conn, "own-res-ref"), _recall(conn, "own-res-x")
    assert len(ref) == 2 and all(r[2] == 20 and 0 < r[3] <= 1 for r in ref)
    assert resumed == ref


@pytest.mark.parametrize("unique_id", [True, False])
def test_sample_is_the_first_chunks_with_a_vector_in_hash_order(conn, unique_id):
    """``--sample-queries`` reads ids first, then the vectors of those ids: the chunks it draws
    are those of the one-statement definition (rows with a vector, filters applied, in the order
    of hashtextextended(id, seed)), chunks whose vectors are all NULL passed over, one row per
    chunk, and a filtered-out row never drawn."""
    from evaluator.testset.query_source import sample

    rng = np.random.default_rng(5)
    conn.execute("DROP TABLE IF EXISTS sample_kb")
    conn.execute("CREATE TABLE sample_kb (id text, kb text, emb vector(4))")
    with conn.cursor().copy("COPY sample_kb (id, kb, emb) FROM STDIN") as cp:
        for i in range(400):
            n = 1 if unique_id else 1 + i % 3
            for j in range(n):
                null = i % 7 == 0 or (j == 0 and i % 5 == 0 and n > 1)
                cp.write_row(
                    (f"c{i}", "a" if i % 4 else "b", None if null else vec_text(rng.normal(size=4)))
                )
    t = Target(
        name="sample-kb",
        table="sample_kb",
        id_column="id",
        vector_column="emb",
        dimension=4,
        unique_id=unique_id,
        filters={"kb": "a"},
    )
    got = sample(conn, t, 120, 9)
    want = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM sample_kb WHERE kb = 'a' AND emb IS NOT NULL GROUP BY id "
            "ORDER BY hashtextextended(id, 9), id LIMIT 120"
        ).fetchall()
    ]
    assert [c for c, _ in got] == want
    vecs = {
        r[0]: r[1]
        for r in conn.execute("SELECT id, array_agg(emb::text) FROM sample_kb GROUP BY id")
    }
    for chunk, v in got:  # the vector is one of the chunk's own non-NULL rows
        rows = [np.array(json.loads(x), dtype=np.float32) for x in vecs[chunk] if x is not None]
        assert any(np.array_equal(v, r) for r in rows)
    with pytest.raises(InputError, match="fewer than the 400"):
        sample(conn, t, 400, 9)
    conn.execute("DROP TABLE sample_kb")


def test_sweep_points_carry_the_recall_tail(database, own, conn):
    """Per point: the per-query index recall's p5, p10, min, the queries at 0 and the exact
    neighbours missed, equal to numpy over the stored exact and ANN lists (random vectors: no
    distance ties, so a hit is a shared chunk id)."""
    import math

    res = run_sweep(
        database,
        sweep_cfg(
            "6MB", n=20, seed=9, repeat=2, name="own-tail", params=("hnsw.ef_search=1,40",), k=10
        ),
    )

    def lists(run_id):
        return {
            q: ids[:10]
            for q, ids in conn.execute(
                "SELECT query_id, chunk_ids FROM pgeval.result_list WHERE run_id = %s", (run_id,)
            )
        }

    for p in res.points:
        tail = p["recall_tail"]
        per_query: dict[str, list[float]] = {}
        missed = []
        for rep, run_id, exp_id in conn.execute(
            "SELECT sp.repetition, sp.run_id, r.experiment_id FROM pgeval.sweep_point sp "
            "JOIN pgeval.run r USING (run_id) JOIN pgeval.sweep s USING (sweep_id) "
            "WHERE s.name = 'own-tail' AND sp.point = %s ORDER BY sp.repetition",
            (p["point"],),
        ).fetchall():
            exact_run = conn.execute(
                "SELECT run_id FROM pgeval.run WHERE experiment_id = %s AND repetition = %s "
                "AND stage = 'exact'",
                (exp_id, rep),
            ).fetchone()[0]
            exact, ann = lists(exact_run), lists(run_id)
            for q, want in sorted(exact.items()):
                got = set(ann.get(q, []))
                per_query.setdefault(q, []).append(len(got & set(want)) / len(want))
                lost = [(i, c) for i, c in enumerate(want, 1) if c not in got]
                if lost:
                    missed.append((q, rep, lost))
        values = np.sort([np.mean(v) for v in per_query.values()])
        n = len(values)
        assert tail["queries"] == n == 20
        assert tail["min"] == pytest.approx(values[0])
        assert tail["p5"] == pytest.approx(values[math.ceil(0.05 * n) - 1])
        assert tail["p10"] == pytest.approx(values[math.ceil(0.10 * n) - 1])
        zeros = sorted(q for q, v in per_query.items() if max(v) == 0)
        assert tail["at_zero"] == len(zeros) and tail["zero_queries"] == zeros
        got = sorted(
            (m["query_id"], m["repetition"], [(x["rank"], x["chunk_id"]) for x in m["neighbours"]])
            for m in tail["missed"]
        )
        assert got == sorted((q, r, lost) for q, r, lost in missed)
        assert all(x["distance"] > 0 for m in tail["missed"] for x in m["neighbours"])
    low, high = res.points[0]["recall_tail"], res.points[1]["recall_tail"]
    # ef_search=1 returns one row, the sampled query's own (dropped): every query misses all
    assert (
        low["missed"] and low["p5"] <= res.points[0]["index_recall"] < res.points[1]["index_recall"]
    )
    assert low["min"] <= high["min"] and low["at_zero"] >= high["at_zero"]
