"""`pgeval run pipeline` end to end on the embedded server: the experiment row and its config,
runs named EXPERIMENT.STAGE.REPETITION, repetitions, the hook for later stages (ctx.previous),
the import stage, errors that stop before anything is written."""

from __future__ import annotations

import json

import pytest
import vector_kb as kb

from evaluator.stages import store
from evaluator.stages.base import ORDER_SIMILARITY, BaseStage


@pytest.fixture
def setup(clean, conn, pgeval):
    kb.build(conn)
    kb.testset(conn, "va", n_queries=60)
    code, _, err = pgeval(
        "target",
        "add",
        "one",
        "--table",
        kb.ONE,
        "--id-column",
        "doc_id",
        "--vector-column",
        "emb",
        "--text-column",
        "body",
    )
    assert code == 0, err
    return clean


def test_pipeline_end_to_end(setup, conn, pgeval):
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "va",
        "--target",
        "one",
        "--stages",
        "exact,hnsw",
        "--set",
        "hnsw.ef_search=60",
        "--depth",
        "20",
        "--repeat",
        "2",
        "--name",
        "e2e",
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["experiment"] == "e2e"
    assert [r["run"] for r in doc["rows"]] == [
        "e2e.exact.1",
        "e2e.hnsw.1",
        "e2e.exact.2",
        "e2e.hnsw.2",
    ]
    assert all(r["queries"] == 60 and r["results"] == 60 * 20 for r in doc["rows"])
    assert all(r["p50_ms"] > 0 for r in doc["rows"])
    exp_id, status, config, chash = conn.execute(
        "SELECT experiment_id, status, config, config_hash FROM pgeval.experiment "
        "WHERE name = 'e2e'"
    ).fetchone()
    assert status == "complete" and chash == doc["config_hash"][:12] + chash[12:]
    assert [s["kind"] for s in config["stages"]] == ["exact", "hnsw"]
    assert config["settings"] == {"hnsw.ef_search": "60", "statement_timeout": "5min"}
    assert config["depth"] == 20
    assert config["repeat"] == 2 and config["embedder"] == "precomputed"
    assert config["dimension"] == kb.data()[0].shape[1]
    assert config["target"]["table"] == kb.ONE and config["filters"] == {}
    runs = conn.execute(
        "SELECT name, stage, repetition, status, config_hash, params->'settings' "
        "FROM pgeval.run WHERE experiment_id = %s ORDER BY run_id",
        (exp_id,),
    ).fetchall()
    assert [(r[1], r[2], r[3]) for r in runs] == [
        ("exact", 1, "complete"),
        ("hnsw", 1, "complete"),
        ("exact", 2, "complete"),
        ("hnsw", 2, "complete"),
    ]
    # one configuration hash per stage (the fingerprint names the stage), equal across repetitions
    assert runs[0][4] == runs[2][4] and runs[1][4] == runs[3][4] and runs[0][4] != runs[1][4]
    assert runs[0][5] == {
        "enable_indexscan": "off",
        "enable_seqscan": "on",
        "statement_timeout": "5min",
    }
    assert runs[1][5] == {
        "enable_seqscan": "off",
        "hnsw.ef_search": "60",
        "statement_timeout": "5min",
    }
    # the metrics of a pipeline run come from the SQL API like any other run
    code, out, err = pgeval("metrics", "e2e.hnsw.1", "--format", "json")
    assert code == 0, err
    assert 0 < json.loads(out)["summary"]["recall@10"] <= 1
    code, out, _ = pgeval("run", "list", "--experiment", "e2e", "--format", "json")
    assert len(json.loads(out)) == 4


def test_name_taken_and_config_errors_write_nothing(setup, conn, pgeval):
    assert (
        pgeval(
            "run pipeline --testset va --target one --stages exact --repeat 1 "
            "--name taken --depth 5"
        )[0]
        == 0
    )
    before = conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0]
    for args, message in [
        ("--stages exact --name taken", "an experiment named 'taken' exists"),
        ("--stages exact,nosuch", "unknown stage 'nosuch'"),
        ("--stages exact,exact", "stage 'exact' is listed twice"),
        ("--stages hnsw --set hnsw.ef_search=abc", "expected an integer"),
        ("--stages hnsw --opt merge:k=60", "names stage 'merge', which is not in --stages"),
        ("--stages hnsw --opt hnsw-k=60", "is not STAGE:KEY=VALUE"),
        ("--stages exact --embedder numpy:/no/such.npy", "no such file: /no/such.npy"),
    ]:
        code, out, err = pgeval(f"run pipeline --testset va --target one --repeat 1 {args}")
        assert code == 1, args
        assert message in err and "Traceback" not in err, (args, err)
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == before
    assert conn.execute("SELECT count(*) FROM pgeval.experiment").fetchone()[0] == 1
    code, _, err = pgeval("run pipeline --testset nope --target one --stages exact")
    assert code == 1 and "no test set named 'nope'" in err
    code, _, err = pgeval("run pipeline --testset va --target nope --stages exact")
    assert code == 1 and "no target named 'nope'" in err


def test_numpy_embedder_dimension_mismatch(setup, conn, pgeval, tmp_path):
    import numpy as np

    np.save(tmp_path / "small.npy", np.ones((60, 8), dtype=np.float32))
    code, _, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "va",
        "--target",
        "one",
        "--stages",
        "exact",
        "--embedder",
        f"numpy:{tmp_path / 'small.npy'}",
    )
    assert code == 1 and "gives 8-dimensional vectors but target 'one' searches vector(" in err
    assert conn.execute("SELECT count(*) FROM pgeval.experiment").fetchone()[0] == 0


def test_no_checksum_keeps_the_row_count_only(setup, conn, pgeval):
    for name, extra in (("with-sum", ()), ("no-sum", ("--no-checksum",))):
        code, _, err = pgeval(
            "run",
            "pipeline",
            "--testset",
            "va",
            "--target",
            "one",
            "--stages",
            "exact",
            "--repeat",
            "1",
            "--depth",
            "5",
            "--name",
            name,
            *extra,
        )
        assert code == 0, err
    data = dict(
        conn.execute(
            "SELECT name, fingerprint->'data' FROM pgeval.experiment "
            "WHERE name IN ('with-sum', 'no-sum')"
        ).fetchall()
    )
    rows = conn.execute(f"SELECT count(*) FROM {kb.ONE}").fetchone()[0]
    assert data["no-sum"] == {"rows": rows, "checksum": None}
    assert data["with-sum"]["rows"] == rows and len(data["with-sum"]["checksum"]) == 16
    code, out, _ = pgeval("run", "pipeline", "--help")
    assert "--no-checksum" in out and "keep the row count" in out


class ProbeStage(BaseStage):
    """A later stage as part B writes them: reads ctx.previous, writes through the store."""

    kind = "probe"
    seen: list[dict] = []

    def run(self, ctx, run_name):
        ProbeStage.seen.append({"rep": ctx.repetition, "previous": dict(ctx.previous)})
        src = ctx.previous["hnsw"]
        rows = ctx.results.execute(
            "SELECT query_id, chunk_id FROM pgeval.result WHERE run_id = %s "
            "AND rank <= 3 ORDER BY query_id, rank",
            (src,),
        ).fetchall()
        ctx.results.rollback()
        with store.run_scope(
            ctx,
            run_name,
            params={"kind": "probe", "score": "similarity"},
            order_rule=ORDER_SIMILARITY,
            timing_boundary=None,
        ) as out:
            by_q: dict[str, list] = {}
            for qid, chunk in rows:
                by_q.setdefault(qid, []).append((chunk, 1.0 / (len(by_q.get(qid, [])) + 1)))
            for qid, items in by_q.items():
                out.add(qid, items)
        return out.run_id


def test_later_stages_see_earlier_runs_of_their_repetition(setup, conn, monkeypatch):
    from evaluator.kinds import registry
    from evaluator.run.pipeline import PipelineConfig, run_pipeline

    monkeypatch.setitem(registry.STAGES, "probe", "test_pipeline:ProbeStage")
    ProbeStage.seen.clear()
    res = run_pipeline(
        setup,
        PipelineConfig(
            testset="va", target="one", stages="exact,hnsw,probe", depth=10, repeat=2, name="hook"
        ),
    )
    ids = {(r["stage"], r["repetition"]): r["run_id"] for r in res.runs}
    assert ProbeStage.seen == [
        {"rep": 1, "previous": {"exact": ids[("exact", 1)], "hnsw": ids[("hnsw", 1)]}},
        {"rep": 2, "previous": {"exact": ids[("exact", 2)], "hnsw": ids[("hnsw", 2)]}},
    ]
    status, n, ranks = conn.execute(
        "SELECT r.status, count(*), array_agg(DISTINCT x.rank ORDER BY x.rank) FROM pgeval.run r "
        "JOIN pgeval.result x USING (run_id) WHERE r.name = 'hook.probe.2' GROUP BY 1"
    ).fetchone()
    assert status == "complete" and n == 60 * 3 and ranks == [1, 2, 3]


def test_failed_stage_marks_run_and_experiment_failed(setup, conn, monkeypatch):
    from evaluator.kinds import registry
    from evaluator.run.pipeline import PipelineConfig, run_pipeline

    class Boom(ProbeStage):
        def run(self, ctx, run_name):
            with store.run_scope(
                ctx, run_name, params={}, order_rule=ORDER_SIMILARITY, timing_boundary=None
            ) as out:
                out.add("1", [("1", 1.0)])
                raise RuntimeError("reranker exploded")

    monkeypatch.setattr(ProbeStage, "run", Boom.run)
    monkeypatch.setitem(registry.STAGES, "probe", "test_pipeline:ProbeStage")
    with pytest.raises(RuntimeError, match="reranker exploded"):
        run_pipeline(
            setup,
            PipelineConfig(
                testset="va", target="one", stages="exact,probe", depth=5, repeat=1, name="boom"
            ),
        )
    assert (
        conn.execute("SELECT status FROM pgeval.experiment WHERE name = 'boom'").fetchone()[0]
        == "failed"
    )
    assert conn.execute("SELECT name, status FROM pgeval.run ORDER BY run_id").fetchall() == [
        ("boom.exact.1", "complete"),
        ("boom.probe.1", "failed"),
    ]


def test_import_stage_joins_the_experiment(setup, conn, pgeval, tmp_path):
    trec = tmp_path / "live.trec"
    trec.write_text(
        "".join(
            f"{q} Q0 {d} {r} {10 - r} live\n"
            for q in range(1, 61)
            for r, d in enumerate(("5", "9", "12"), 1)
        )
    )
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "va",
        "--target",
        "one",
        "--stages",
        "exact,live=import",
        "--opt",
        f"live:file={trec}",
        "--repeat",
        "1",
        "--depth",
        "10",
        "--name",
        "imp",
        "--format",
        "json",
    )
    assert code == 0, err
    row = conn.execute(
        "SELECT r.stage, r.repetition, r.status, e.name, r.params->>'kind' "
        "FROM pgeval.run r JOIN pgeval.experiment e USING (experiment_id) "
        "WHERE r.name = 'imp.live.1'"
    ).fetchone()
    assert row == ("live", 1, "complete", "imp", "import")
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.result JOIN pgeval.run USING (run_id) "
            "WHERE name = 'imp.live.1'"
        ).fetchone()[0]
        == 180
    )
    code, _, err = pgeval("run pipeline --testset va --stages imp2=import --repeat 1")
    assert code == 1 and "stage imp2 needs --opt imp2:file=PATH" in err


def test_resume_unknown_name(setup, pgeval):  # resume itself: tests/test_resume*.py
    code, _, err = pgeval("run resume something")
    assert code == 1 and "no experiment or run named 'something'" in err
