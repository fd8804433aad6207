"""Failed commands leave nothing behind (issue 40, "Failed commands leave nothing behind"), on
the real server with a small table (400 rows, HNSW):

- a sweep refused by the plan check after its configuration changed (the index dropped) keeps
  the earlier sweep's name, its runs and experiment as they were, and stores no exact run;
- a sweep or a watch probe on a table without an index is refused before the ground truth is
  computed: no ``…exact.1`` run, no ground truth, no sweep, no probe;
- `pgeval run list` says ``failed`` and ``interrupted`` of runs that are so (Ctrl-C; a writer
  that is gone), ``complete`` again once resumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from helpers import wait_for

TABLE, TARGET, DIM, N = "fail_kb", "fail-kb", 16, 400
SWEEP = (
    f"sweep --sample-queries 8 --target {TARGET} --stage hnsw --repeat 1 --name s1 "
    "--param hnsw.ef_search=10,40 --set enable_seqscan=off"
)


def vtext(v) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


@pytest.fixture
def kb(database, clean, conn):
    conn.execute("DELETE FROM pgeval.probe")
    rng = np.random.default_rng(5)
    docs = rng.normal(size=(N, DIM)).astype(np.float32)
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({DIM}))")
        with c.cursor().copy(f"COPY {TABLE} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(docs, 1):
                cp.write_row((f"c{i}", vtext(v)))
        c.execute(f"CREATE INDEX {TABLE}_hnsw ON {TABLE} USING hnsw (e vector_cosine_ops)")
        c.execute(f"ANALYZE {TABLE}")
    from evaluator.targets.add import add_target

    add_target(database, TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield docs
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")


def state(conn) -> tuple:
    """Every run, sweep, experiment, ground truth and probe, as a reader would list them."""
    return tuple(
        conn.execute(q).fetchall()
        for q in (
            "SELECT name, status, config_hash FROM pgeval.run ORDER BY run_id",
            "SELECT name, status FROM pgeval.sweep ORDER BY sweep_id",
            "SELECT name, status FROM pgeval.experiment ORDER BY experiment_id",
            "SELECT gt_id, computed_at FROM pgeval.ground_truth ORDER BY gt_id",
            "SELECT count(*) FROM pgeval.probe",
        )
    )


def run_list(pgeval) -> list[dict]:
    code, out, err = pgeval("run list --format json")
    assert code == 0, err
    return json.loads(out)


def test_a_refused_sweep_leaves_run_list_and_the_sweep_names_as_they_were(kb, conn, pgeval):
    code, _, err = pgeval(SWEEP)
    assert code == 0, err
    listed, before = run_list(pgeval), state(conn)
    assert [r["run"] for r in listed] == ["s1.exact.1", "s1.ef_search=10.1", "s1.ef_search=40.1"]
    conn.execute(f"DROP INDEX {TABLE}_hnsw")  # the configuration changed, and no index serves
    code, out, err = pgeval(SWEEP)
    assert code == 1 and out == ""
    assert "the plan uses a sequential scan on fail_kb, not a hnsw index" in err
    assert "configuration changed" not in err and "@" not in err  # nothing was renamed
    assert state(conn) == before and run_list(pgeval) == listed
    # another sweep on the table without its index: refused before the ground truth
    code, _, err = pgeval(SWEEP.replace("s1", "s2"))
    assert code == 1 and "not a hnsw index" in err
    assert state(conn) == before and run_list(pgeval) == listed
    # a watch probe: refused before any work too, no probe recorded
    code, _, err = pgeval(
        f"watch --target {TARGET} --stage hnsw --sample-queries 8 --set enable_seqscan=off"
    )
    assert code == 1 and "not a hnsw index" in err, err
    assert state(conn) == before
    # an index again (another index): s1's points are archived once, by the sweep that measures
    conn.execute(f"CREATE INDEX {TABLE}_hnsw ON {TABLE} USING hnsw (e vector_cosine_ops)")
    code, out, err = pgeval(SWEEP + " --format json")
    assert code == 0, err
    res = json.loads(out)
    assert res["sweep"] == "s1" and res["previous"]["sweep"].startswith("s1@")
    old = res["previous"]["sweep"]
    assert [r["run"] for r in run_list(pgeval)][:3] == [
        f"{old}.exact.1",
        f"{old}.ef_search=10.1",
        f"{old}.ef_search=40.1",
    ]


def test_a_sweep_that_fails_before_its_first_point_is_undone(kb, conn, database, pgeval):
    """A failure after the plan check (here: Ctrl-C while the exact ground truth is written)
    still leaves no sweep, no exact run, and the earlier sweep under its own name."""
    from evaluator.testset.query_source import QuerySource
    from evaluator.tuning.sweep import SweepConfig, run_sweep

    cfg = SweepConfig(
        testset=None,
        queries=QuerySource("sample", count=8, seed=1),
        target=TARGET,
        stage="hnsw",
        params=("hnsw.ef_search=10",),
        settings={"enable_seqscan": "off"},
        repeat=1,
        name="s3",
    )
    run_sweep(database, cfg)
    before = state(conn)
    conn.execute(f"INSERT INTO {TABLE} SELECT 'new', e FROM {TABLE} WHERE id = 'c1'")

    def interrupt(rows, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(database, cfg, on_ground_truth=interrupt)
    runs, sweeps, exps, _, _ = state(conn)
    assert (runs, sweeps, exps) == before[:3]


class _StopAtThird:
    """A stage's progress display that presses Ctrl-C at the third query."""

    def __init__(self) -> None:
        self.n = 0

    def start(self, description: str, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        self.n += n
        if self.n == 3:
            raise KeyboardInterrupt

    def finish(self) -> None:
        pass


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def test_run_list_says_failed_and_interrupted(kb, conn, database, pgeval):
    from evaluator.run.pipeline import PipelineConfig, run_pipeline
    from evaluator.testset.query_source import QuerySource

    cfg = PipelineConfig(
        testset="",
        queries=QuerySource("sample", count=8, seed=3),
        target=TARGET,
        stages="hnsw",
        settings={"enable_seqscan": "off"},
        repeat=1,
        name="p1",
    )
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(database, cfg, progress_factory=lambda stage, rep: _StopAtThird())
    assert {r["run"]: r["status"] for r in run_list(pgeval)} == {"p1.hnsw.1": "interrupted"}
    code, out, _ = pgeval("run list")
    assert code == 0 and "interrupted" in out
    code, _, err = pgeval("run resume p1")
    assert code == 0, err
    assert {r["run"]: r["status"] for r in run_list(pgeval)} == {"p1.hnsw.1": "complete"}
    # a run whose writer is gone (kill -9): still 'running' in its row, 'interrupted' listed;
    # a live writer's is running; one whose stage raised is failed
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    conn.execute("UPDATE pgeval.run SET status = 'running', pid = %s", (dead.pid,))
    assert [r["status"] for r in run_list(pgeval)] == ["interrupted"]
    # killed and not yet reaped by its parent (a zombie): gone too, as `run resume` judges it
    zombie = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        zombie.send_signal(signal.SIGKILL)
        wait_for(lambda: _state(zombie.pid) == "Z")
        conn.execute("UPDATE pgeval.run SET pid = %s", (zombie.pid,))
        assert [r["status"] for r in run_list(pgeval)] == ["interrupted"]
    finally:
        zombie.wait()
    conn.execute("UPDATE pgeval.run SET pid = %s", (os.getpid(),))
    assert [r["status"] for r in run_list(pgeval)] == ["running"]
    conn.execute("UPDATE pgeval.run SET status = 'failed'")
    assert [r["status"] for r in run_list(pgeval)] == ["failed"]
