"""Full lists with several rows per chunk (WeKnora's layout: a chunk's generated-question rows)
on every stage that collapses rows to chunks: exact, hnsw, ivfflat, diskann, bm25 (per query and
in batch mode). A stage fetches until it has --depth distinct chunks or its scan is exhausted, and
rows, short queries and the rows-returned minimum count the chunks stored.

The tables (built once per module; small: 1,800 rows of 8 dimensions, so that DiskANN builds in
seconds): 300 chunks of 6 rows each, a chunk's rows almost the same vector and the same words, so
that the nearest rows of a query come in runs of one chunk and the first LIMIT (depth x 2 rows)
collapses to far fewer than depth chunks."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.run.pipeline import PipelineConfig, run_pipeline

CHUNKS, ROWS, DIM, DEPTH = 300, 6, 8, 10
WORDS = [f"w{i}" for i in range(40)]
TABLES = {"hnsw": "fl_hnsw", "ivfflat": "fl_ivf", "diskann": "fl_diskann"}
_BUILT: dict = {}


def _vtext(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def _rows():
    rng = np.random.default_rng(5)
    centers = rng.normal(size=(CHUNKS, DIM)).astype(np.float32)
    rows = []
    for c in range(CHUNKS):
        words = " ".join(rng.choice(WORDS, size=4, replace=False))
        for j in range(ROWS):
            v = centers[c] + 0.01 * rng.normal(size=DIM)
            rows.append((f"c{c:03d}", f"{words} question {j}", _vtext(v)))
    queries = centers[:12] + 0.3 * rng.normal(size=(12, DIM))
    return rows, queries.astype(np.float32)


def _build(conn) -> np.ndarray:
    if "queries" in _BUILT:
        return _BUILT["queries"]
    rows, queries = _rows()
    conn.execute("SET maintenance_work_mem = '64MB'")
    for kind, table in TABLES.items():
        if conn.execute("SELECT to_regclass(%s) IS NULL", (table,)).fetchone()[0]:
            conn.execute(
                f"CREATE TABLE {table} (doc_id text NOT NULL, body text, emb vector({DIM}))"
            )
            with conn.cursor().copy(f"COPY {table} (doc_id, body, emb) FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(r)
            opts = {
                "ivfflat": " WITH (lists = 10)",  # 8 dimensions: no quantisation
                "diskann": " WITH (storage_layout = 'plain')",
            }.get(kind, "")
            conn.execute(f"CREATE INDEX ON {table} USING {kind} (emb vector_cosine_ops){opts}")
            if kind == "hnsw":
                conn.execute(
                    f"CREATE INDEX fl_hnsw_bm25 ON {table} USING bm25 (body) "
                    "WITH (text_config = 'simple')"
                )
            conn.execute(f"ANALYZE {table}")
    _BUILT["queries"] = queries
    return queries


@pytest.fixture
def setup(clean, conn):
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    queries = _build(conn)
    tid = conn.execute(
        "INSERT INTO pgeval.testset (name, content_hash, source_format, n_queries, n_judgements) "
        "VALUES ('fl', 'hash-fl', 'test', %s, %s) RETURNING testset_id",
        (len(queries), len(queries)),
    ).fetchone()[0]
    texts = [
        " ".join(WORDS[(3 * i + k) % len(WORDS)] for k in range(3)) for i in range(len(queries))
    ]
    with conn.cursor().copy(
        "COPY pgeval.query (testset_id, query_id, position, query_text, embedding) FROM STDIN"
    ) as cp:
        for i, v in enumerate(queries):
            cp.write_row((tid, f"q{i:02d}", i + 1, texts[i], _vtext(v)))
    with conn.cursor().copy(
        "COPY pgeval.qrel (testset_id, query_id, chunk_id, grade) FROM STDIN"
    ) as cp:
        for i in range(len(queries)):
            cp.write_row((tid, f"q{i:02d}", f"c{i:03d}", 1))
    conn.execute("SELECT pgeval.refresh_ideal(%s)", (tid,))
    for kind, table in TABLES.items():
        t = Target(
            name=kind, table=table, id_column="doc_id", vector_column="emb", text_column="body"
        )
        validate(conn, t)
        assert t.unique_id is False  # the layout under test: several rows per chunk
        save(conn, t, replace=True)
    return clean


SETTINGS = {
    "hnsw.ef_search": "200",
    "ivfflat.probes": "10",
    "diskann.query_search_list_size": "200",
}


def _run(database, stage: str, target: str, name: str, **kw):
    return run_pipeline(
        database,
        PipelineConfig(
            testset="fl",
            stages=stage,
            target=target,
            depth=kw.pop("depth", DEPTH),
            repeat=1,
            name=name,
            settings=dict(SETTINGS),
            **kw,
        ),
    )


def _stored(conn, run_id: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for q, c in conn.execute(
        "SELECT query_id, chunk_id FROM pgeval.result WHERE run_id = %s ORDER BY query_id, rank",
        (run_id,),
    ):
        out.setdefault(q, []).append(c)
    return out


def _check_full(conn, res, depth: int = DEPTH, refetched: bool = True) -> dict:
    (run,) = res.runs
    rid = run["run_id"]
    got = _stored(conn, rid)
    assert len(got) == 12
    for qid, chunks in got.items():
        assert len(chunks) == depth == len(set(chunks)), (qid, chunks)
    timing = conn.execute(
        "SELECT min(rows_returned), max(rows_returned), count(*) "
        "FROM pgeval.query_timing WHERE run_id = %s",
        (rid,),
    ).fetchone()
    params = conn.execute("SELECT params FROM pgeval.run WHERE run_id = %s", (rid,)).fetchone()[0]
    if not params.get("batch"):
        assert timing == (depth, depth, 12)  # rows_returned: chunks stored
        assert run["min_rows_returned"] == depth
    assert params["queries_short"] == 0 and params["rows_returned_min"] == depth
    # the run says what it timed
    boundary = conn.execute(
        "SELECT timing_boundary FROM pgeval.run WHERE run_id = %s", (rid,)
    ).fetchone()[0]
    assert "LIMIT" in params["timed_statement"] and f"timed: {params['timed']}" in boundary
    if refetched:  # the first LIMIT collapsed to fewer chunks: the stage asked again
        assert params["fetch_limit"] == 2 * depth
        assert params["queries_refetched"] > 0 and params["fetch_limit_max"] > 2 * depth
    report = conn.execute(
        "SELECT rows_min, short_queries FROM pgeval.stage_latency(%s)", (res.experiment_id,)
    ).fetchone()
    assert report == (depth, 0)
    return got


def _exact_truth(conn, table: str, queries: np.ndarray, depth: int) -> dict[str, list[str]]:
    rows = conn.execute(f"SELECT doc_id, emb::text FROM {table}").fetchall()
    ids = np.array([r[0] for r in rows])
    m = np.array([np.array(r[1].strip("[]").split(","), dtype=np.float64) for r in rows])
    out = {}
    for i, q in enumerate(queries.astype(np.float64)):
        d = 1.0 - (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
        best: dict[str, float] = {}
        for c, x in zip(ids, d, strict=True):
            best[c] = min(best.get(c, np.inf), x)
        out[f"q{i:02d}"] = [c for c, _ in sorted(best.items(), key=lambda t: (t[1], t[0]))][:depth]
    return out


def test_exact_has_depth_chunks(setup, conn):
    res = _run(setup, "exact", "hnsw", "fl-exact")
    got = _check_full(conn, res, refetched=False)  # exact groups every row: one statement
    truth = _exact_truth(conn, TABLES["hnsw"], _BUILT["queries"], DEPTH)
    assert got == truth


@pytest.mark.parametrize("kind", ["hnsw", "ivfflat", "diskann"])
@pytest.mark.parametrize("batch", [False, True], ids=["each", "batch"])
def test_ann_stages_fetch_until_depth_chunks(setup, conn, kind, batch):
    res = _run(setup, kind, kind, f"fl-{kind}-{int(batch)}", batch=batch)
    got = _check_full(conn, res)
    truth = _exact_truth(conn, TABLES[kind], _BUILT["queries"], DEPTH)
    hits = sum(len(set(got[q]) & set(truth[q])) for q in truth)
    assert hits >= 0.9 * DEPTH * len(truth)  # the index finds the true neighbours


@pytest.mark.parametrize("batch", [False, True], ids=["each", "batch"])
def test_bm25_fetches_until_depth_chunks(setup, conn, batch):
    res = _run(setup, "bm25", "hnsw", f"fl-bm25-{int(batch)}", batch=batch)
    got = _check_full(conn, res)
    # the stored lists are the chunks' best scores, best first, from pg_textsearch
    texts = dict(conn.execute("SELECT query_id, query_text FROM pgeval.query"))
    for qid, chunks in got.items():
        best = conn.execute(
            "SELECT doc_id, min(body <@> to_bm25query(%s, 'fl_hnsw_bm25')) AS s FROM fl_hnsw "
            "GROUP BY doc_id HAVING min(body <@> to_bm25query(%s, 'fl_hnsw_bm25')) < 0 "
            "ORDER BY 2, 1 LIMIT %s",
            (texts[qid], texts[qid], DEPTH),
        ).fetchall()
        assert chunks == [c for c, _ in best]


def test_an_exhausted_source_stops_short_and_says_so(setup, conn):
    """A word of only some chunks and a depth beyond them: the stage stops when the scan runs
    dry, and stores (and counts) what it found."""
    few = conn.execute(
        "SELECT split_part(body, ' ', 1) FROM fl_hnsw WHERE doc_id = 'c007' LIMIT 1"
    ).fetchone()[0]
    n_chunks = conn.execute(
        "SELECT count(DISTINCT doc_id) FROM fl_hnsw WHERE body ~ %s", (rf"\m{few}\M",)
    ).fetchone()[0]
    assert 0 < n_chunks < CHUNKS
    conn.execute("UPDATE pgeval.query SET query_text = %s WHERE query_id = 'q01'", (few,))
    res = _run(setup, "bm25", "hnsw", "fl-bm25-dry", depth=n_chunks + 5)
    rid = res.runs[0]["run_id"]
    assert len(_stored(conn, rid)["q01"]) == n_chunks
    n = conn.execute(
        "SELECT rows_returned FROM pgeval.query_timing WHERE run_id = %s AND query_id = 'q01'",
        (rid,),
    ).fetchone()[0]
    assert n == n_chunks
    short = conn.execute(
        "SELECT short_queries FROM pgeval.stage_latency(%s)", (res.experiment_id,)
    ).fetchone()[0]
    assert short >= 1
