"""Build sweeps set maintenance_work_mem and report a build that spilled (issue 11 item 2): on a
server whose own maintenance_work_mem is the minimum (1MB), an HNSW build of a few thousand rows
at --maintenance-work-mem 1MB gets pgvector's "graph no longer fits into maintenance_work_mem"
notice and is reported as spilled; the same build at the size pgeval estimates for the index
(the default) or at an ample explicit size is not. Real server, real pgvector."""

from __future__ import annotations

import numpy as np
import pytest
from dba_data import vec_text

from evaluator.targets.targets import Target, save
from evaluator.testset.query_source import QuerySource
from evaluator.tuning.build_sweep import Scratch, sized_memory
from evaluator.tuning.sweep import SweepConfig, run_sweep

TABLE, TARGET = "spill_kb", "spill-kb"
ROWS, DIM = 4000, 32

pytestmark = pytest.mark.slow


@pytest.fixture
def spill_target(database, conn):
    """A 4,000 x 32 table and its target; the database's maintenance_work_mem lowered to 1MB for
    the test (what a build session RESETs to), restored afterwards."""
    if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()[0]:
        rng = np.random.default_rng(17)
        docs = rng.normal(size=(ROWS, DIM)).astype(np.float32)
        conn.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, embedding vector({DIM}))")
        with conn.cursor().copy(f"COPY {TABLE} (id, embedding) FROM STDIN") as cp:
            for i, v in enumerate(docs, 1):
                cp.write_row((f"s{i}", vec_text(v)))
        conn.execute(f"ANALYZE {TABLE}")
    t = Target(
        name=TARGET,
        table=TABLE,
        id_column="id",
        vector_column="embedding",
        distance="l2",
        dimension=DIM,
        unique_id=True,
    )
    save(conn, t, replace=True)
    db = conn.execute("SELECT current_database()").fetchone()[0]
    conn.execute(f"ALTER DATABASE \"{db}\" SET maintenance_work_mem = '1MB'")
    try:
        yield t
    finally:
        conn.execute(f'ALTER DATABASE "{db}" RESET maintenance_work_mem')


def test_scratch_build_reports_spill_at_1mb_and_none_when_sized(database, spill_target):
    with Scratch(database, spill_target, maintenance_work_mem="1MB") as small:
        # the session's own value is the database's 1MB: the build runs at 1MB
        assert small.rows == ROWS
        info = small.build("hnsw", {"m": 16})
        assert info["maintenance_work_mem"] == "1MB"
        assert info["spilled"] is True
        assert any(
            "spilled" in w
            and "no longer fits into maintenance_work_mem" in w
            and "maintenance_work_mem 1MB" in w
            for w in small.warnings
        ), small.warnings
    with Scratch(database, spill_target) as sized:  # default: sized to the index
        info = sized.build("hnsw", {"m": 16})
        assert info["maintenance_work_mem"] == sized_memory(ROWS, DIM, "vector", {"m": 16})
        assert info["spilled"] is False
        assert not any("spilled" in w for w in sized.warnings), sized.warnings


def _sweep(memory: str | None, name: str) -> SweepConfig:
    return SweepConfig(
        testset=None,
        queries=QuerySource("sample", count=10, seed=2),
        target=TARGET,
        stage="hnsw",
        build=("m=16",),
        params=("hnsw.ef_search=20",),
        settings={"enable_seqscan": "off"},
        repeat=1,
        name=name,
        fresh=True,
        maintenance_work_mem=memory,
    )


def test_build_sweep_warns_when_the_build_spilled(database, spill_target):
    spilled = run_sweep(database, _sweep("1MB", "spill-small"))
    assert spilled.measured == 1  # the index was built (not a reused point)
    notes = [w for w in spilled.warnings if "spilled" in w]
    assert len(notes) == 1, spilled.warnings
    assert "hnsw graph no longer fits into maintenance_work_mem" in notes[0]
    assert "--maintenance-work-mem" in notes[0]
    ample = run_sweep(database, _sweep("64MB", "spill-ample"))
    assert ample.measured == 1
    assert not any("spilled" in w for w in ample.warnings), ample.warnings
    sized = run_sweep(database, _sweep(None, "spill-sized"))
    assert sized.measured == 1
    assert not any("spilled" in w for w in sized.warnings), sized.warnings


def test_a_size_below_the_servers_is_named_not_silently_ignored(database, conn, spill_target):
    """Builds never lower the server's maintenance_work_mem: asking for less says so."""
    db = conn.execute("SELECT current_database()").fetchone()[0]
    conn.execute(f"ALTER DATABASE \"{db}\" SET maintenance_work_mem = '4MB'")
    with Scratch(database, spill_target, maintenance_work_mem="1MB") as small:
        info = small.build("hnsw", {"m": 16})
        assert info["maintenance_work_mem"] == "4MB"
        notes = [w for w in small.warnings if "below the server's" in w]
        assert notes == [
            "--maintenance-work-mem 1MB is below the server's maintenance_work_mem; "
            "builds use the server's setting"
        ], small.warnings
    with Scratch(database, spill_target, maintenance_work_mem="8MB") as ample:
        ample.build("hnsw", {"m": 16})
        assert not any("below the server's" in w for w in ample.warnings), ample.warnings
