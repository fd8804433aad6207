"""Filters and settings as the application sets them (issue 11, items 3 and 4), against the real
server: a table laid out as WeKnora lays out its ``embeddings`` table (mixed-dimension halfvec,
one partial HNSW index per dimension, btree indexes on knowledge_base_id and is_enabled, two rows
per chunk, other knowledge bases, NULL and false is_enabled), searched through the weknora
preset at WeKnora's own settings, checked against a numpy brute force; IN filters, NULL-as-true,
the similarity threshold (drops counted), stage-scoped settings (no leak into another stage),
the plan check's hint and `pgeval plans`' chosen plan next to the forced one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluator.cli.options import option_for
from evaluator.core.errors import InputError, PlanError
from evaluator.kinds import registry
from evaluator.run.pipeline import PipelineConfig, prepare_contexts, run_pipeline, stage_queries
from evaluator.stages import gucs
from evaluator.stages.base import StageContext

SCHEMA, DIM, DEPTH = "wkf", 32, 20
N_QUERIES = 12


def _vtext(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def _rows(rng):
    """(chunk_id, knowledge_id, knowledge_base_id, tag_id, dimension, is_enabled, vector)."""
    centers = rng.normal(size=(20, DIM))
    rows = []

    def vec():
        return centers[rng.integers(20)] + 0.6 * rng.normal(size=DIM)

    for kb, n in (("kbA", 150), ("kbB", 100)):
        for i in range(1, n + 1):
            chunk = f"{kb[-1].lower()}{i}"
            enabled = None if i % 10 == 0 else i % 10 != 5  # NULL, false, true
            v = vec()
            for copy in (v, v + 0.05 * rng.normal(size=DIM)):  # two rows per chunk
                rows.append((chunk, f"k{i % 4}", kb, f"t{i % 3}", DIM, enabled, copy))
    for i in range(1, 3001):  # another knowledge base
        rows.append((f"c{i}", f"k{i % 4}", "kbC", f"t{i % 3}", DIM, True, vec()))
    for i in range(1, 101):  # another dimension
        rows.append((f"s{i}", "k0", "kbA", "t0", 8, True, rng.normal(size=8)))
    return rows, centers


@pytest.fixture(scope="module")
def wk(database):
    """The table (built once), and the query vectors."""
    rng = np.random.default_rng(2024)
    rows, centers = _rows(rng)
    queries = [centers[rng.integers(20)] + 0.6 * rng.normal(size=DIM) for _ in range(N_QUERIES)]
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        c.execute(f"CREATE SCHEMA {SCHEMA}")
        # WeKnora's migrations/versioned/000002_embeddings.up.sql (+ 000007 tag_id)
        c.execute(
            f"CREATE TABLE {SCHEMA}.embeddings (id serial PRIMARY KEY, "
            "source_id varchar(64) NOT NULL, source_type integer NOT NULL DEFAULT 1, "
            "chunk_id varchar(64), knowledge_id varchar(64), "
            "knowledge_base_id varchar(64), tag_id varchar(36), content text, "
            "dimension integer NOT NULL, embedding halfvec, "
            "is_enabled boolean DEFAULT true)"
        )
        with c.cursor().copy(
            f"COPY {SCHEMA}.embeddings (source_id, chunk_id, knowledge_id, "
            "knowledge_base_id, tag_id, content, dimension, is_enabled, "
            "embedding) FROM STDIN"
        ) as cp:
            for n, (chunk, kid, kb, tag, d, enabled, v) in enumerate(rows):
                cp.write_row(
                    (f"src{n}", chunk, kid, kb, tag, f"text of {chunk}", d, enabled, _vtext(v))
                )
        c.execute("SET maintenance_work_mem = '128MB'")
        for d in (DIM, 8):
            c.execute(
                f"CREATE INDEX embeddings_embedding_idx_{d} ON {SCHEMA}.embeddings USING "
                f"hnsw ((embedding::halfvec({d})) halfvec_cosine_ops) "
                f"WITH (m = 16, ef_construction = 64) WHERE (dimension = {d})"
            )
        c.execute(f"CREATE INDEX idx_embeddings_is_enabled ON {SCHEMA}.embeddings (is_enabled)")
        c.execute(
            f"CREATE INDEX idx_embeddings_knowledge_base_id ON {SCHEMA}.embeddings "
            "(knowledge_base_id)"
        )
        c.execute(f"ANALYZE {SCHEMA}.embeddings")
    yield queries
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def _testset(conn, queries, name="wkq") -> int:
    """Queries with embeddings; every query judges one chunk no stage can find (so that every
    query is flagged for `pgeval plans`)."""
    tid = conn.execute(
        "INSERT INTO pgeval.testset (name, content_hash, source_format, n_queries, n_judgements) "
        "VALUES (%s, %s, 'test', %s, %s) RETURNING testset_id",
        (name, f"hash-{name}", len(queries), len(queries)),
    ).fetchone()[0]
    for j, v in enumerate(queries, 1):
        conn.execute(
            "INSERT INTO pgeval.query (testset_id, query_id, position, query_text, "
            "embedding) VALUES (%s, %s, %s, %s, %s)",
            (tid, f"q{j}", j, f"query {j}", _vtext(v)),
        )
        conn.execute(
            "INSERT INTO pgeval.qrel (testset_id, query_id, chunk_id, grade) "
            "VALUES (%s, %s, 'nowhere', 1)",
            (tid, f"q{j}"),
        )
    conn.execute("SELECT pgeval.refresh_ideal(%s)", (tid,))
    return tid


def _add(pgeval, *extra: str) -> dict:
    code, out, err = pgeval(
        "target",
        "add",
        "wk",
        "--preset",
        "weknora",
        "--schema",
        SCHEMA,
        "--dimension",
        str(DIM),
        "--knowledge-base-id",
        "kbA",
        "--knowledge-base-id",
        "kbB",
        "--replace",
        *extra,
        "--format",
        "json",
    )
    assert code == 0, err
    return json.loads(out)


def _truth(conn, where: str = "") -> dict[str, list[tuple[str, float]]]:
    """numpy brute force: WeKnora's rows (kbA or kbB, dimension N, is_enabled NULL or true),
    best halfvec cosine distance per chunk, sorted by (distance, chunk id)."""
    rows = conn.execute(
        f"SELECT chunk_id, embedding::text FROM {SCHEMA}.embeddings WHERE "
        "dimension = %s AND knowledge_base_id IN ('kbA', 'kbB') AND "
        f"is_enabled IS DISTINCT FROM false {where}",
        (DIM,),
    ).fetchall()
    chunks = [r[0] for r in rows]
    mat = np.array([np.array(r[1].strip("[]").split(","), dtype=np.float64) for r in rows])
    out = {}
    for qid, qtext in conn.execute("SELECT query_id, embedding::halfvec::text FROM pgeval.query"):
        q = np.array(qtext.strip("[]").split(","), dtype=np.float64)
        d = 1 - mat @ q / (np.linalg.norm(mat, axis=1) * np.linalg.norm(q))
        best: dict[str, float] = {}
        for c, dist in zip(chunks, d, strict=True):
            best[c] = min(best.get(c, 9.0), float(dist))
        out[qid] = sorted(best.items(), key=lambda kv: (kv[1], kv[0]))
    return out


def _results(conn, run: str) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list] = {}
    for qid, chunk, score in conn.execute(
        "SELECT x.query_id, x.chunk_id, x.score FROM pgeval.result x JOIN pgeval.run r "
        "USING (run_id) WHERE r.name = %s ORDER BY x.query_id, x.rank",
        (run,),
    ):
        out.setdefault(qid, []).append((chunk, score))
    return out


def test_preset_spec_mirrors_weknora(clean, wk, pgeval):
    doc = _add(
        pgeval,
        "--knowledge-id",
        "k1",
        "--knowledge-id",
        "k2",
        "--tag-id",
        "t0",
        "--min-similarity",
        "0.4",
    )
    spec = doc["spec"]
    assert spec["filters"] == {
        "is_enabled": "true",
        "knowledge_base_id": ["kbA", "kbB"],
        "knowledge_id": ["k1", "k2"],
        "tag_id": "t0",
    }
    assert spec["null_true"] == ["is_enabled"]
    assert spec["threshold"] == {"similarity": 0.4}
    assert spec["settings"] == {"hnsw.ef_search": "100", "hnsw.iterative_scan": "strict_order"}


def test_where_composes_in_and_null_as_true(conn):
    from evaluator.targets.targets import Target

    t = Target(
        name="x",
        table="t",
        id_column="id",
        vector_column="v",
        distance="cosine",
        filters={"kb": ["a", "b'; --"], "flag": "true"},
        null_true=["flag"],
        dimension=4,
        dimension_column="dim",
    )
    where, params = t.where()
    assert where.as_string(conn) == (
        ' WHERE "dim" = 4 AND "kb" IN (%s, %s) AND ("flag" IS NULL OR "flag" = %s)'
    )
    assert params == ["a", "b'; --", "true"]
    where, named = t.where_named(vector=False)  # the keyword path: no dimension
    assert where.as_string(conn) == (
        ' WHERE "kb" IN (%(f0_0)s, %(f0_1)s) AND ("flag" IS NULL OR "flag" = %(f1)s)'
    )
    assert named == {"f0_0": "a", "f0_1": "b'; --", "f1": "true"}


def test_target_add_filter_options_refuse_bad_input(clean, wk, pgeval):
    base = [
        "target",
        "add",
        "t",
        "--schema",
        SCHEMA,
        "--table",
        "embeddings",
        "--id-column",
        "chunk_id",
        "--vector-column",
        "embedding",
        "--dimension",
        str(DIM),
        "--dimension-column",
        "dimension",
    ]
    for extra, msg in (
        (
            ["--null-as-true", "is_enabled"],
            "field '--null-as-true': column 'is_enabled' has no --where filter",
        ),
        (["--min-similarity", "0.5", "--max-distance", "0.3"], "not both"),
        (["--distance", "l2", "--min-similarity", "0.5"], "needs distance cosine or ip"),
        (
            ["--where", "knowledge_base_id=a", "--where", "knowledge_base_id=a"],
            "given value 'a' twice",
        ),
        (["--tag-id", "t1"], "field '--tag-id': --tag-id goes with --preset weknora"),
    ):
        code, _, err = pgeval(*base, *extra)
        assert code == 1 and msg in err, err
        assert "Traceback" not in err
    code, out, err = pgeval(
        *base,
        "--where",
        "knowledge_base_id=kbA",
        "--where",
        "knowledge_base_id=kbB",
        "--where",
        "is_enabled=true",
        "--null-as-true",
        "is_enabled",
        "--max-distance",
        "0.3",
        "--format",
        "json",
    )
    assert code == 0, err
    spec = json.loads(out)["spec"]
    assert spec["filters"]["knowledge_base_id"] == ["kbA", "kbB"]
    assert spec["null_true"] == ["is_enabled"] and spec["threshold"] == {"distance": 0.3}


def test_weknora_table_exact_and_hnsw_give_the_numpy_answer(clean, wk, pgeval, conn, database):
    """At WeKnora's settings the planner filters through the btree index: the plan check
    refuses and names the setting; with it scoped to the hnsw stage, exact and hnsw give the
    numpy answer (IN over two knowledge bases, NULL is_enabled counted as enabled)."""
    _add(pgeval)
    _testset(conn, wk)
    with pytest.raises(PlanError) as err:
        run_pipeline(
            database,
            PipelineConfig(
                testset="wkq",
                target="wk",
                stages="exact,hnsw",
                depth=DEPTH,
                repeat=1,
                name="wk-plain",
            ),
        )
    msg = str(err.value)
    assert "stage hnsw" in msg and "not a hnsw index" in msg
    assert "--set hnsw:enable_" in msg and "the planner uses embeddings_embedding_idx_32" in msg
    hint = msg.split("with ", 1)[1].split(" the planner uses")[0]
    scoped = [item.removeprefix("--set ") for item in hint.split(" ") if item.startswith("hnsw:")]
    settings = gucs.parse(scoped, stages=("exact", "hnsw"))
    res = run_pipeline(
        database,
        PipelineConfig(
            testset="wkq",
            target="wk",
            stages="exact,hnsw",
            depth=DEPTH,
            repeat=1,
            name="wk",
            settings=settings,
        ),
    )
    params = {
        r["stage"]: conn.execute(
            "SELECT params FROM pgeval.run WHERE run_id = %s", (r["run_id"],)
        ).fetchone()[0]
        for r in res.runs
    }
    assert params["hnsw"]["index"] == "embeddings_embedding_idx_32"
    assert params["hnsw"]["settings"]["hnsw.ef_search"] == "100"  # WeKnora's
    assert params["hnsw"]["settings"]["hnsw.iterative_scan"] == "strict_order"
    for name in settings:
        assert params["hnsw"]["settings"][name.split(":")[1]] == "off"
        assert name.split(":")[1] not in params["exact"]["settings"]  # scoped: hnsw only
    truth = _truth(conn)
    assert any(c.endswith("0") for q in truth.values() for c, _ in q[:DEPTH])  # NULL rows in
    exact, hnsw = _results(conn, "wk.exact.1"), _results(conn, "wk.hnsw.1")
    found = 0
    for qid, expected in truth.items():
        got = exact[qid]
        assert [c for c, _ in got] == [c for c, _ in expected[:DEPTH]]
        assert np.allclose([s for _, s in got], [s for _, s in expected[:DEPTH]], atol=1e-6)
        assert all(c[0] in "ab" for c, _ in hnsw[qid])  # kbA and kbB only, one each
        assert len({c for c, _ in hnsw[qid]}) == len(hnsw[qid]) == DEPTH
        found += len({c for c, _ in hnsw[qid]} & {c for c, _ in expected[:DEPTH]})
    assert found / (DEPTH * len(truth)) >= 0.95  # the index at ef_search 100
    disabled = {f"{k}{i}" for k in "ab" for i in range(5, 151, 10)}
    assert not disabled & {c for q in exact.values() for c, _ in q}


def test_threshold_drops_are_counted_and_reported(clean, wk, pgeval, conn, database):
    """--min-similarity: results under it are dropped as WeKnora drops them (distance <= 1 - s),
    counted in the run and shown by the stage report."""
    _testset(conn, wk)
    truth = _truth(conn)
    kth = sorted(q[DEPTH // 2][1] for q in truth.values())
    similarity = 1 - kth[len(kth) // 2]  # about half the queries lose results
    _add(pgeval, "--min-similarity", repr(similarity))
    for batch in (False, True):
        name = f"thr-{int(batch)}"
        run_pipeline(
            database,
            PipelineConfig(
                testset="wkq",
                target="wk",
                stages="exact",
                depth=DEPTH,
                repeat=1,
                name=name,
                batch=batch,
            ),
        )
        got = _results(conn, f"{name}.exact.1")
        expected_dropped = 0
        for qid, expected in truth.items():
            top = expected[:DEPTH]
            kept = [(c, d) for c, d in top if d <= 1 - similarity]
            expected_dropped += len(top) - len(kept)
            assert [c for c, _ in got.get(qid, [])] == [c for c, _ in kept]
        params = conn.execute(
            "SELECT params FROM pgeval.run WHERE name = %s", (f"{name}.exact.1",)
        ).fetchone()[0]
        assert 0 < expected_dropped < DEPTH * len(truth)
        assert params["threshold_dropped"] == expected_dropped
        assert params["threshold"]["similarity"] == similarity
    code, out, err = pgeval("stage-report", "thr-0", "--format", "json", "--allow-partial")
    assert code == 0, err
    stage = json.loads(out)["stages"][0]
    assert stage["threshold"]["dropped"] == expected_dropped
    code, out, err = pgeval("stage-report", "thr-0", "--allow-partial")
    assert code == 0 and "dropped" in out and str(expected_dropped) in out, err


def test_stage_scoped_setting_does_not_leak(clean, wk, pgeval, conn, database):
    """hnsw:enable_sort=off is what the hnsw stage's transaction sees, not the exact stage's;
    an unscoped setting reaches both; the fingerprint holds each stage's settings."""
    _add(pgeval)
    tid = _testset(conn, wk)
    settings = gucs.parse(["hnsw:enable_sort=off", "work_mem=7MB"], stages=("exact", "hnsw"))
    from evaluator.targets.targets import load

    with database.connect() as results, database.connect(results=False, read_only=True) as kb:
        target = load(results, "wk")
        stages = [(n, n, registry.get(n)) for n in ("exact", "hnsw")]
        queries, label, _ = stage_queries(results, "wkq", tid, stages)
        results.commit()
        base = StageContext(
            kb=kb,
            results=results,
            target=target,
            testset="wkq",
            testset_id=tid,
            experiment="leak",
            experiment_id=None,
            depth=DEPTH,
            settings={**target.settings, **settings},
            queries=queries,
            embedder=label,
        )
        contexts = prepare_contexts(base, stages, {})
        seen = {}
        for name, _, stage in stages:
            stage.begin(contexts[name])
            seen[name] = kb.execute(
                "SELECT current_setting('enable_sort'), current_setting('work_mem')"
            ).fetchone()
            kb.rollback()
        assert seen == {"exact": ("on", "7MB"), "hnsw": ("off", "7MB")}
        assert kb.execute("SELECT current_setting('enable_sort')").fetchone()[0] == "on"
        kb.rollback()
    res = run_pipeline(
        database,
        PipelineConfig(
            testset="wkq",
            target="wk",
            stages="exact,hnsw",
            depth=DEPTH,
            repeat=1,
            name="leak",
            settings=settings,
        ),
    )
    fp = conn.execute("SELECT fingerprint FROM pgeval.experiment WHERE name = 'leak'").fetchone()[0]
    assert fp["stage_settings"]["hnsw"]["enable_sort"] == "off"
    assert "enable_sort" not in fp["stage_settings"]["exact"]
    assert fp["stage_settings"]["exact"]["work_mem"] == fp["stage_settings"]["hnsw"]["work_mem"]
    assert "enable_sort" not in fp["planner"]["enable_off"]
    # another scoped value is another configuration
    res2 = run_pipeline(
        database,
        PipelineConfig(
            testset="wkq",
            target="wk",
            stages="exact,hnsw",
            depth=DEPTH,
            repeat=1,
            name="leak2",
            settings=gucs.parse(
                ["hnsw:enable_sort=off", "hnsw:enable_bitmapscan=off", "work_mem=7MB"]
            ),
        ),
    )
    assert res.config_hash != res2.config_hash


def test_scoped_settings_refuse_unknown_stages(clean, wk, pgeval, conn, database):
    _add(pgeval)
    _testset(conn, wk)
    with pytest.raises(InputError) as info:
        run_pipeline(
            database,
            PipelineConfig(
                testset="wkq",
                target="wk",
                stages="exact,hnsw",
                depth=DEPTH,
                repeat=1,
                name="bad",
                settings=gucs.parse(["fast:enable_sort=off"]),
            ),
        )
    # the library names parameters; the command line spells them as its options
    assert info.value.field == "settings"
    assert info.value.text(option_for).startswith(
        "field '--set': setting 'fast:enable_sort' names stage 'fast', which is not in --stages"
    )
    assert conn.execute("SELECT count(*) FROM pgeval.experiment").fetchone()[0] == 0
    code, _, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "wkq",
        "--target",
        "wk",
        "--stages",
        "exact,hnsw",
        "--set",
        "hnsw:enable_sort=maybe",
        "--repeat",
        "1",
    )
    assert code == 1 and "enable_sort='maybe'" in err and "Traceback" not in err
    code, _, err = pgeval(
        "sweep",
        "--testset",
        "wkq",
        "--target",
        "wk",
        "--stage",
        "hnsw",
        "--param",
        "hnsw.ef_search=40",
        "--set",
        "diskann:enable_sort=off",
    )
    assert code == 1 and "names stage 'diskann'" in err, err


def test_plans_show_the_chosen_plan_next_to_the_forced_one(clean, wk, pgeval, conn, database):
    _add(pgeval)
    _testset(conn, wk)
    run_pipeline(
        database,
        PipelineConfig(
            testset="wkq",
            target="wk",
            stages="hnsw",
            depth=DEPTH,
            repeat=1,
            name="pl",
            settings=gucs.parse(["hnsw:enable_sort=off"]),
        ),
    )
    code, out, err = pgeval("plans", "pl.hnsw.1", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert len({r["query_id"] for r in rows}) == N_QUERIES  # every query flagged
    for r in rows:
        assert "embeddings_embedding_idx_32" in r["access"]
        assert r["chosen_access"] and "embeddings_embedding_idx_32" not in r["chosen_access"]
        assert "enable_sort=off" in r["forced_by"]
    code, out, err = pgeval("plans", "pl.hnsw.1", "--no-capture", "--wide")
    assert code == 0 and "chosen_access" in out and "idx_embeddings" in out, err
    # `metrics --plans`: the same flagged queries with the plans that served them
    code, out, err = pgeval("metrics", "pl.hnsw.1", "--plans", "--format", "json")
    assert code == 0, err
    assert "embeddings_embedding_idx_32" in out


def test_parse_scoped_settings():
    """One parser: STAGE:GUC=VALUE next to GUC=VALUE; scope() gives each stage its set."""
    got = gucs.parse(
        ["hnsw:ENABLE_SORT = off", "enable_sort=on", "work_mem=8MB"], stages=("exact", "hnsw")
    )
    assert got == {"hnsw:enable_sort": "off", "enable_sort": "on", "work_mem": "8MB"}
    assert gucs.scope(got, "hnsw") == {"enable_sort": "off", "work_mem": "8MB"}
    assert gucs.scope(got, "exact") == {"enable_sort": "on", "work_mem": "8MB"}
    assert gucs.unscoped(got) == {"enable_sort": "on", "work_mem": "8MB"}
    for bad, msg in (
        (":enable_sort=off", "not GUC=VALUE or STAGE:GUC=VALUE"),
        ("diskann:enable_sort=off", "names stage 'diskann', which is not a stage"),
        ("hnsw:transaction_read_only=off", "cannot be changed"),
        ("hnsw:a b=1", "not a setting name"),
    ):
        with pytest.raises(InputError, match=msg):
            gucs.parse([bad], stages=("exact", "hnsw"))
    with pytest.raises(InputError, match="given twice"):
        gucs.parse(["hnsw:enable_sort=off", "hnsw:ENABLE_SORT=on"])
