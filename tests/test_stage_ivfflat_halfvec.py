"""The ``ivfflat-halfvec`` stage kind (issue 35): IVFFlat over ``(col::halfvec(N))
halfvec_cosine_ops`` on a ``vector`` column, found beside the plain IVFFlat index, each stage
served by its own index, with chunks that tie (the same vector under two chunk ids); a table with
several rows per chunk is refused with the reason, as for every kind that searches a cast. Adding
it took one module (stages/ivfflat_halfvec.py) and one registry line; a pipeline, a sweep's grid
and its --find, and advise's plan take it from there. It is not one of advise's default designs
(``Kind.advise_default``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluator.run.pipeline import PipelineConfig, run_pipeline

CHUNKS, DIM, DEPTH, NQ, LISTS = 1200, 8, 10, 12, 10
TABLE, MULTI = "ivh_kb", "ivh_multi"
TWINS = {f"c{c:04d}": f"c{c + 600:04d}" for c in range(0, 600, 40)}  # one vector, two ids


def _vtext(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


@pytest.fixture(scope="module")
def kb(database, tmp_path_factory):
    rng = np.random.default_rng(17)
    centers = rng.normal(size=(30, DIM))
    vectors = {
        f"c{c:04d}": (centers[c % 30] + 0.5 * rng.normal(size=DIM)).astype(np.float32)
        for c in range(CHUNKS)
    }
    for chunk, twin in TWINS.items():
        vectors[twin] = vectors[chunk]  # ties: every distance of the twin is the chunk's
    queries = np.array(
        [vectors[c] + 0.05 * rng.normal(size=DIM) for c in list(TWINS)[:NQ]], dtype=np.float32
    )
    path = tmp_path_factory.mktemp("ivh") / "q.npy"
    np.save(path, queries)
    with database.connect(results=False, autocommit=True) as c:
        for table, key in ((TABLE, "PRIMARY KEY"), (MULTI, "NOT NULL")):
            c.execute(f"DROP TABLE IF EXISTS {table}")
            c.execute(f"CREATE TABLE {table} (doc_id text {key}, emb vector({DIM}))")
        with c.cursor().copy(f"COPY {TABLE} (doc_id, emb) FROM STDIN") as cp:
            for chunk, v in vectors.items():
                cp.write_row((chunk, _vtext(v)))
        c.execute(f"INSERT INTO {MULTI} SELECT doc_id, emb FROM {TABLE}")
        c.execute(f"INSERT INTO {MULTI} SELECT doc_id, emb FROM {TABLE} WHERE doc_id < 'c0100'")
        c.execute(
            f"CREATE INDEX ivh_plain ON {TABLE} USING ivfflat (emb vector_cosine_ops) "
            f"WITH (lists = {LISTS})"
        )
        for table in (TABLE, MULTI):
            c.execute(
                f"CREATE INDEX {table}_half ON {table} USING ivfflat ((emb::halfvec({DIM})) "
                f"halfvec_cosine_ops) WITH (lists = {LISTS})"
            )
            c.execute(f"ANALYZE {table}")
    yield path, queries, vectors
    with database.connect(results=False, autocommit=True) as c:
        for table in (TABLE, MULTI):
            c.execute(f"DROP TABLE IF EXISTS {table}")


def _truth(vectors, queries) -> dict[str, dict[str, float]]:
    """Each query's full-precision cosine distance to every chunk."""
    ids = list(vectors)
    m = np.array([vectors[c] for c in ids], dtype=np.float64)
    out = {}
    for i, q in enumerate(queries.astype(np.float64)):
        d = 1.0 - (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
        out[f"q{i:02d}"] = dict(zip(ids, map(float, d), strict=True))
    return out


def _testset(conn, queries) -> None:
    tid = conn.execute(
        "INSERT INTO pgeval.testset (name, content_hash, source_format, n_queries, n_judgements) "
        "VALUES ('ivh', 'hash-ivh', 'test', %s, %s) RETURNING testset_id",
        (len(queries), len(queries)),
    ).fetchone()[0]
    with conn.cursor().copy(
        "COPY pgeval.query (testset_id, query_id, position, query_text, embedding) FROM STDIN"
    ) as cp:
        for i, v in enumerate(queries):
            cp.write_row((tid, f"q{i:02d}", i + 1, f"query {i}", _vtext(v)))
    with conn.cursor().copy(
        "COPY pgeval.qrel (testset_id, query_id, chunk_id, grade) FROM STDIN"
    ) as cp:
        for i, chunk in enumerate(list(TWINS)[: len(queries)]):
            cp.write_row((tid, f"q{i:02d}", chunk, 1))
    conn.execute("SELECT pgeval.refresh_ideal(%s)", (tid,))


def _target(conn, name: str = "ivh", table: str = TABLE) -> None:
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    t = Target(name=name, table=table, id_column="doc_id", vector_column="emb")
    validate(conn, t)
    assert t.unique_id is (table == TABLE)
    save(conn, t, replace=True)


def _pipeline(database, stages: str, target: str, name: str):
    return run_pipeline(
        database,
        PipelineConfig(
            testset="ivh",
            stages=stages,
            target=target,
            depth=DEPTH,
            repeat=1,
            name=name,
            settings={"ivfflat.probes": str(LISTS), "enable_seqscan": "off"},
        ),
    )


def test_pipeline_ranks_chunks_through_the_halfvec_index(kb, database, clean, conn):
    path, queries, vectors = kb
    _testset(conn, queries)
    _target(conn)
    res = _pipeline(database, "exact,ivfflat-halfvec,plain=ivfflat", "ivh", "ivh-pipe")
    truth = _truth(vectors, queries)
    by_stage = {r["stage"]: r["run_id"] for r in res.runs}
    params = {
        stage: conn.execute("SELECT params FROM pgeval.run WHERE run_id = %s", (rid,)).fetchone()[0]
        for stage, rid in by_stage.items()
    }
    half = params["ivfflat-halfvec"]
    assert half["index"] == f"{TABLE}_half" and half["kind"] == "ivfflat-halfvec"
    assert half["role"] == "ann" and f"::halfvec({DIM})" in half["timed_statement"]
    assert params["plain"]["index"] == "ivh_plain"
    assert "halfvec" not in params["plain"]["timed_statement"]
    stored: dict[str, list[tuple[str, float]]] = {}
    for q, c, s in conn.execute(
        "SELECT query_id, chunk_id, score FROM pgeval.result WHERE run_id = %s "
        "ORDER BY query_id, rank",
        (by_stage["ivfflat-halfvec"],),
    ):
        stored.setdefault(q, []).append((c, s))
    assert len(stored) == NQ
    hits = twins = 0
    for qid, got in stored.items():
        chunks = [c for c, _ in got]
        assert len(chunks) == DEPTH == len(set(chunks)), (qid, chunks)
        best = sorted(truth[qid], key=lambda c: (truth[qid][c], c))[:DEPTH]
        hits += len(set(chunks) & set(best))
        for c, s in got:  # scores: the full-precision distance, ordered at half precision
            assert s == pytest.approx(truth[qid][c], abs=1e-6), (qid, c)
        for chunk, twin in TWINS.items():  # twins tie: both kept, at one score
            if chunk in chunks[: DEPTH // 2]:
                assert twin in chunks, (qid, chunks)
                assert dict(got)[chunk] == dict(got)[twin]
                twins += 1
    assert hits >= 0.9 * DEPTH * NQ  # every list probed: halfvec precision only
    assert twins >= NQ // 2  # the ties were in the lists


def test_several_rows_per_chunk_are_refused_with_the_reason(kb, database, clean, conn):
    from evaluator.core.errors import InputError

    _, queries, _ = kb
    _testset(conn, queries)
    _target(conn, "ivh_multi", MULTI)
    with pytest.raises(InputError, match="several rows per chunk"):
        _pipeline(database, "exact,ivfflat-halfvec", "ivh_multi", "ivh-multi")


def test_sweep_grid_and_find_on_the_halfvec_index(kb, clean, conn, pgeval):
    path, _, _ = kb
    _target(conn)
    base = ["sweep", "--queries-file", str(path), "--target", "ivh", "--stage", "ivfflat-halfvec"]
    base += ["--repeat", "1", "--set", "enable_seqscan=off", "--format", "json"]
    values = list(range(1, LISTS + 1))
    code, out, err = pgeval(
        *base, "--param", "ivfflat.probes=" + ",".join(map(str, values)), "--name", "ivh-grid"
    )
    assert code == 0, err
    recall = {
        int(p["settings"]["ivfflat.probes"]): p["index_recall"] for p in json.loads(out)["points"]
    }
    # (k-means centres of a random sample: one probe may already find what two find)
    assert recall[LISTS] >= 0.9 and recall[1] <= recall[2] <= recall[LISTS]
    assert recall[1] < recall[LISTS]
    run = conn.execute(
        "SELECT params FROM pgeval.run WHERE name = %s", (f"ivh-grid.probes={LISTS}.1",)
    ).fetchone()[0]
    assert run["index"] == f"{TABLE}_half" and run["kind"] == "ivfflat-halfvec"
    goal = round((recall[1] + recall[2]) / 2, 4)  # between one probe and two
    expected = min(v for v in values if recall[v] >= goal - 1e-12)
    code, out, err = pgeval(*base, "--find", "ivfflat.probes", "--target-recall", str(goal))
    assert code == 0, err
    found = json.loads(out)["find"]
    assert found["reached"] and found["value"] == expected, (found, expected)
    assert found["recall"] == pytest.approx(recall[expected])


def test_build_sweep_builds_the_halfvec_expression_index(kb, clean, conn, pgeval):
    """--build on a scratch copy builds the index the kind searches (its expression and
    operator class) and measures through it; nothing is left behind."""
    path, _, _ = kb
    _target(conn)
    code, out, err = pgeval(
        "sweep", "--queries-file", str(path), "--target", "ivh", "--stage", "ivfflat-halfvec",
        "--build", "lists=5", "--param", "ivfflat.probes=5", "--set", "enable_seqscan=off",
        "--repeat", "1", "--format", "json", "--name", "ivh-built",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["measured"] == 1 and doc["points"][0]["index_recall"] >= 0.9
    assert doc["points"][0]["index_bytes"] > 0
    params = conn.execute(
        "SELECT params FROM pgeval.run WHERE name LIKE 'ivh-built.%' AND stage <> 'exact'"
    ).fetchone()[0]
    assert f"::halfvec({DIM})" in params["timed_statement"]
    assert "pgeval_scratch" in params["timed_statement"]
    assert (
        conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pgeval\\_scratch%'"
        ).fetchone()[0]
        == 0
    )


def test_advise_plans_it_only_when_named():
    """Not a default design: advise's plan without --designs is the registry's default designs;
    named, it is planned like ivfflat (lists at its default, probes found, nothing fixed)."""
    from evaluator.kinds import registry
    from evaluator.tuning.advise.plan import AdviseConfig, designs

    every = list(registry.ann_kinds())
    assert "ivfflat-halfvec" in every
    default = [d.kind for d in designs(AdviseConfig(target="t"), every, {})]
    assert default == list(registry.advise_kinds()) and "ivfflat-halfvec" not in default
    (named,) = designs(AdviseConfig(target="t", designs=("ivfflat-halfvec",)), every, {})
    assert (named.build, named.find, named.fixed) == ({"lists": "100"}, "ivfflat.probes", {})


def test_warmup_watch_and_fingerprint_take_the_kind(kb, clean, conn, pgeval):
    """warmup warms each IVFFlat index through its own kind's statement; watch probes the
    halfvec index at its setting; the fingerprint holds the ivfflat settings of the stage."""
    _target(conn)
    base = "warmup --target ivh --set enable_seqscan=off --random-queries 10 --max-passes 2"
    code, out, err = pgeval(base + " --format json")
    assert code == 0, err
    warmed = {i["index"]: i["kind"] for i in json.loads(out)["indexes"]}
    assert warmed == {"ivh_plain": "ivfflat", f"{TABLE}_half": "ivfflat-halfvec"}
    args = ["watch", "--target", "ivh", "--stage", "ivfflat-halfvec", "--set", "enable_seqscan=off"]
    code, out, err = pgeval(*args, "--sample-queries", "30", "--format", "json")
    assert code == 0, err
    probe = json.loads(out)
    assert probe["index_name"] == f"{TABLE}_half" and probe["setting"] == {"ivfflat.probes": "1"}
    assert 0 < probe["recall"] <= 1
    code, out, err = pgeval(
        "fingerprint", "--target", "ivh", "--stage", "ivfflat-halfvec", "--set",
        "ivfflat.probes=4", "--no-checksum", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["fingerprint"]["query_settings"]["ivfflat.probes"] == "4"
    assert f"{TABLE}_half" in doc["fingerprint"]["indexes"]


@pytest.mark.slow
def test_advise_measures_it_when_named(kb, clean, conn, pgeval, tmp_path):
    """--designs ivfflat-halfvec: lists=10 is the table's own expression index, measured in
    place through it; lists=20 one build on a scratch copy (its expression index); probes found,
    and the DDL printed for a new index (naming the one it supersedes), none for the kept one."""
    path, _, _ = kb
    _target(conn)
    code, out, err = pgeval(
        "advise", "--target", "ivh", "--queries-file", str(path), "--designs",
        "ivfflat-halfvec", "--build", "ivfflat-halfvec:lists=10,20", "--target-recall", "0.9",
        "--set", "enable_seqscan=off", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    kept, built = doc["designs"]
    for design in (kept, built):
        assert design["design"] == "ivfflat-halfvec" and "ivfflat.probes" in design["setting"]
    assert kept["in_place"]["name"] == f"{TABLE}_half" and kept["build_ms"] is None
    assert built["in_place"] is None and built["build_ms"] > 0
    rec = doc["recommendation"]
    assert rec["design"] == "ivfflat-halfvec"
    if rec["build"] == {"lists": "10"}:
        assert rec["ddl"] is None and rec["keep"] == f"{TABLE}_half"
        return
    assert f'USING ivfflat ((("emb")::halfvec({DIM})) halfvec_cosine_ops)' in rec["ddl"]
    assert "--find ivfflat.probes on your index" in rec["why"]
    olds = {o["name"]: o["serves_statement"] for o in rec["supersedes"]}
    assert olds == {f"{TABLE}_half": True, "ivh_plain": False}
