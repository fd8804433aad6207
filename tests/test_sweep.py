"""`pgeval sweep` on the real server: recall against exact search rises with hnsw.ef_search; an
interrupted sweep resumes and measures only the missing points; points measured under the same
configuration are reused by another sweep, never under another one; bad grids are refused.

Each test fixes its own work_mem so that its configuration hashes are its own (points are reused
across sweeps by config hash, and the session's server is shared)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from dba_data import CRAN_TARGET, CRAN_TESTSET, ensure_cranfield

from evaluator.cli.options import option_for
from evaluator.core.errors import Conflict, InputError
from evaluator.tuning.sweep import SweepConfig, run_sweep

pytestmark = pytest.mark.slow


@pytest.fixture
def cran(conn):
    return ensure_cranfield(conn)[0]


def config(work_mem: str, **kw) -> SweepConfig:
    kw.setdefault("params", ("hnsw.ef_search=1,10,40,200",))
    kw.setdefault("repeat", 1)
    return SweepConfig(
        testset=CRAN_TESTSET,
        target=CRAN_TARGET,
        stage="hnsw",
        settings={"enable_seqscan": "off", "work_mem": work_mem},
        **kw,
    )


def runs_of(conn, experiment_id: int) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT name, status FROM pgeval.run WHERE experiment_id = %s ORDER BY run_id",
        (experiment_id,),
    ).fetchall()


def test_recall_rises_with_ef_search(database, cran, conn):
    res = run_sweep(database, config("5MB", repeat=2, name="dba-sweep-rise"))
    assert res.measured == 8 and res.reused == 0 and not res.resumed
    pts = res.points
    assert [p["label"] for p in pts] == [
        "ef_search=1",
        "ef_search=10",
        "ef_search=40",
        "ef_search=200",
    ]
    recall = [p["index_recall"] for p in pts]
    assert all(a <= b + 1e-9 for a, b in zip(recall, recall[1:], strict=False)), recall
    assert recall[0] < 0.5 < 0.95 <= recall[-1]
    for p in pts:
        assert p["repetitions"] == 2 and p["reused"] == 0
        assert p["p50_ms"] <= p["p95_ms"] <= p["p99_ms"] and p["qps"] > 0
        assert set(res.measures) <= set(p["metrics"]) and "recall@10" in p["metrics"]
        assert p["index_recall_sd"] is not None and p["p95_sd"] is not None
    # ef_search = 1 returns one row per query (iterative scan off): recorded, and warned
    assert pts[0]["rows_mean"] == 1 and pts[-1]["rows_mean"] == 20
    # ... where a printed figure is affected only: recall@10 of ef_search=10 counts every row
    # it needs, though it returns fewer than the 20 fetched (issue 40, item 9)
    assert any(
        "ef_search=1 is below the 10 rows the figures at cut-off 10" in w for w in res.warnings
    )
    assert not any("ef_search=10 " in w for w in res.warnings), res.warnings
    # the recommendation is the cheapest point that reaches 0.95: the least work (the smallest
    # ef_search), whatever latency noise says, and the rule is named
    ok = [p for p in pts if p["index_recall"] >= 0.95 - 1e-12]  # (the rule's tolerance)
    rec = res.recommendation
    least = min(ok, key=lambda p: int(p["settings"]["hnsw.ef_search"]))
    if rec["point"] == least["point"]:
        assert rec["why"].startswith(
            f"least work: hnsw.ef_search={least['settings']['hnsw.ef_search']}"
        )
    else:  # (a loaded machine: the least work's round slower than a larger value's, beyond
        # noise; the rule then names the point that beats it on both axes, as pgeval.sql says)
        chosen = next(p for p in pts if p["point"] == rec["point"])
        assert rec["why"].startswith(
            f"{least['label']} reaches recall 0.95 with less work but is beaten beyond noise "
            f"on both axes by {chosen['label']}"
        ), rec["why"]
        assert chosen["index_recall"] >= least["index_recall"] - 1e-12
    # one experiment: exact once per repetition, then the points; all complete
    names = runs_of(conn, res.experiment_id)
    assert len(names) == 10 and all(s == "complete" for _, s in names)
    assert names[0][0] == "dba-sweep-rise.exact.1"
    assert ("dba-sweep-rise.ef_search=40.2", "complete") in names
    # every run carries its fingerprint with the point's setting
    fp = conn.execute(
        "SELECT fingerprint FROM pgeval.run WHERE name = 'dba-sweep-rise.ef_search=40.1'"
    ).fetchone()[0]
    assert fp["query_settings"]["hnsw.ef_search"] == "40" and fp["stage"] == "hnsw"


class Stop(KeyboardInterrupt):
    pass


def test_interrupted_sweep_resumes_only_missing_points(database, cran, conn):
    cfg = config("6MB", repeat=2, name="dba-sweep-resume")
    seen = []

    def interrupt_after_three(point, rep, how):
        seen.append((point.number, rep, how))
        if len(seen) == 3:
            raise Stop()

    with pytest.raises(Stop):
        run_sweep(database, cfg, on_point=interrupt_after_three)
    status, exp_id = conn.execute(
        "SELECT status, experiment_id FROM pgeval.sweep WHERE name = 'dba-sweep-resume'"
    ).fetchone()
    assert status == "interrupted"
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.sweep_point sp JOIN pgeval.sweep s "
            "USING (sweep_id) WHERE s.name = 'dba-sweep-resume'"
        ).fetchone()[0]
        == 3
    )
    # a run the interruption left half-written is measured again, not a name conflict
    conn.execute(
        "INSERT INTO pgeval.run (name, testset_id, experiment_id, stage, repetition, "
        "order_rule, status) SELECT 'dba-sweep-resume.ef_search=200.1', testset_id, "
        "%s, 'hnsw', 1, 'x', 'failed' FROM pgeval.testset WHERE name = %s",
        (exp_id, CRAN_TESTSET),
    )
    again = []
    res = run_sweep(database, cfg, on_point=lambda p, r, how: again.append((p.number, r, how)))
    assert res.resumed and res.kept == 3 and res.measured == 5 and res.reused == 0
    assert [x for x in again if x[2] == "measured"] == [  # (round 2 starts at point 2)
        (4, 1, "measured"),
        (2, 2, "measured"),
        (3, 2, "measured"),
        (4, 2, "measured"),
        (1, 2, "measured"),
    ]
    runs = runs_of(conn, res.experiment_id)
    assert len(runs) == 10 and all(s == "complete" for _, s in runs)
    assert all(p["repetitions"] == 2 for p in res.points)
    # the same command once more measures nothing
    res = run_sweep(database, cfg)
    assert (res.measured, res.kept) == (0, 8)


def test_points_are_reused_under_the_same_fingerprint_only(database, cran, conn):
    first = run_sweep(database, config("7MB", params=("hnsw.ef_search=10,40",), name="dba-sweep-a"))
    assert first.measured == 2
    second = run_sweep(
        database, config("7MB", params=("hnsw.ef_search=40,80",), name="dba-sweep-b")
    )
    assert (second.measured, second.reused) == (1, 1)
    reused = [p for p in second.points if p["label"] == "ef_search=40"][0]
    original = [p for p in first.points if p["label"] == "ef_search=40"][0]
    assert reused["reused"] == 1 and reused["index_recall"] == original["index_recall"]
    assert reused["config_hash"] == original["config_hash"]
    # another work_mem is another configuration: nothing reused
    third = run_sweep(database, config("8MB", params=("hnsw.ef_search=40",), name="dba-sweep-c"))
    assert (third.measured, third.reused) == (1, 0)
    # --fresh measures again under the same name
    fresh = run_sweep(
        database, config("7MB", params=("hnsw.ef_search=40,80",), name="dba-sweep-b", fresh=True)
    )
    assert (fresh.measured, fresh.reused, fresh.kept) == (2, 0, 0) and not fresh.resumed
    # a name reused with another grid is refused
    with pytest.raises(Conflict, match="another grid"):
        run_sweep(database, config("7MB", params=("hnsw.ef_search=5",), name="dba-sweep-b"))


def test_concurrency_measures_throughput(database, cran):
    res = run_sweep(
        database, config("9MB", params=("hnsw.ef_search=40",), concurrency=2, name="dba-sweep-qps")
    )
    p = res.points[0]
    assert p["qps"] > 0 and p["index_recall"] > 0.9


@pytest.mark.parametrize(
    "kw, field, text",
    [
        ({"stage": "exact"}, "--stage", "ANN stage"),
        ({"params": ("diskann.query_rescore=10",)}, "--param", "does not apply"),
        ({"params": ("hnsw.ef_search=10,10",)}, "--param", "twice"),
        ({"params": (), "build": ()}, "--param", "nothing to sweep"),
        ({"params": (), "build": ("lists=10",)}, "--build", "not a hnsw build option"),
        ({"params": ("hnsw.ef_search=0",)}, "--param", "out of range"),
        ({"target_recall": 1.5}, "--target-recall", "(0, 1]"),
        ({"concurrency": 2, "isolate_index": True}, "--concurrency", "cannot be combined"),
    ],
)
def test_bad_grids_are_refused(database, cran, kw, field, text):
    cfg = config("10MB", **{k: v for k, v in kw.items() if k != "stage"})
    if "stage" in kw:
        cfg = replace(cfg, stage=kw["stage"])
    with pytest.raises(InputError) as exc:
        run_sweep(database, cfg)
    # the library names the parameter; the command line's option for it is the one expected
    assert option_for(exc.value.field) == field and text in str(exc.value)


def test_cli_sweep_outputs_and_plot(pgeval, cran, tmp_path):
    png = tmp_path / "sweep.png"
    args = [
        "sweep",
        "--testset",
        CRAN_TESTSET,
        "--target",
        CRAN_TARGET,
        "--stage",
        "hnsw",
        "--param",
        "hnsw.ef_search=10,40",
        "--set",
        "enable_seqscan=off",
        "--set",
        "work_mem=11MB",
        "--repeat",
        "1",
        "--name",
        "dba-sweep-cli",
    ]
    code, out, err = pgeval(*args, "--plot", str(png))
    assert code == 0, err
    assert "index_recall@10" in out and "recommended:" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, err = pgeval(*args, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["kept"] == 2 and doc["measured"] == 0
    assert [p["label"] for p in doc["points"]] == ["ef_search=10", "ef_search=40"]
    code, out, err = pgeval(*args, "--format", "csv")
    header = out.splitlines()[0].split(",")
    assert code == 0 and "index_recall@10" in header and "ndcg@10" in header
    code, out, err = pgeval(*args[:-2], "--param", "hnsw.ef_search=x", "--name", "dba-bad")
    assert code == 1 and "Traceback" not in err


def test_statement_timeout_is_applied_and_recorded(pgeval, cran, conn):
    args = [
        "sweep",
        "--testset",
        CRAN_TESTSET,
        "--target",
        CRAN_TARGET,
        "--stage",
        "hnsw",
        "--param",
        "hnsw.ef_search=40",
        "--set",
        "enable_seqscan=off",
        "--set",
        "work_mem=12MB",
        "--repeat",
        "1",
    ]
    code, _, err = pgeval(*args, "--statement-timeout", "45s", "--name", "dba-sweep-timeout")
    assert code == 0, err
    settings = conn.execute(
        "SELECT settings FROM pgeval.sweep WHERE name = 'dba-sweep-timeout'"
    ).fetchone()[0]
    assert settings["statement_timeout"] == "45s"
    runs = conn.execute(
        "SELECT name, params->'settings'->>'statement_timeout' FROM pgeval.run "
        "WHERE name LIKE 'dba-sweep-timeout.%' ORDER BY name"
    ).fetchall()
    assert runs == [
        ("dba-sweep-timeout.ef_search=40.1", "45s"),
        ("dba-sweep-timeout.exact.1", "45s"),
    ]
    code, _, err = pgeval(*args, "--statement-timeout", "soon", "--name", "dba-sweep-bad-timeout")
    assert code == 1 and "--statement-timeout" in err and "Traceback" not in err
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.sweep WHERE name = 'dba-sweep-bad-timeout'"
        ).fetchone()[0]
        == 0
    )


@pytest.mark.parametrize(
    "grid",
    [
        ("--param", "hnsw.ef_search=0,40"),  # out of range: the server refuses it
        ("--param", "hnsw.ef_search=1O"),  # not a number
        ("--param", "hnsw.ef_serch=10,40"),  # no such setting
        ("--param", "hnsw.ef_search=10", "--set", "work_mem=11XB"),  # --set the server refuses
    ],
)
def test_a_refused_option_stores_no_query_set(pgeval, cran, conn, grid):
    """A typo in --param (or --set) is refused before anything is stored (issue 50): no query set
    of 50 sampled rows, no sweep, nothing that was not there before."""

    def stored() -> list:
        return conn.execute(
            "SELECT (SELECT array_agg(name ORDER BY name) FROM pgeval.testset), "
            "(SELECT array_agg(name ORDER BY name) FROM pgeval.sweep)"
        ).fetchone()

    before = stored()
    args = ["sweep", "--target", CRAN_TARGET, "--stage", "hnsw", "--sample-queries", "50"]
    seed = str(5050 + len(" ".join(grid)))  # a sample of its own (a query set stored before
    # by another case would make this one pass vacuously)
    code, out, err = pgeval(*args, *grid, "--seed", seed, "--name", "dba-typo")
    assert code == 1 and err.startswith("pgeval: error: ") and "Traceback" not in err, err
    assert err.count("\n") == 1, err
    assert stored() == before
