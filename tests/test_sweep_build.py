"""Build-time sweeps: every index is built on a scratch copy in a schema of pgeval's own, which is
empty (gone) afterwards — after success, an error, Ctrl-C, SIGTERM and a build timeout; the
user's table and its indexes are never touched."""

from __future__ import annotations

import os
import signal

import pytest
from dba_data import CRAN_TARGET, CRAN_TESTSET, ensure_cranfield

from evaluator.cli.options import option_for
from evaluator.core.errors import DatabaseError, InputError
from evaluator.table import fingerprint as fpmod
from evaluator.tuning.build_sweep import SCRATCH_PREFIX
from evaluator.tuning.sweep import SweepConfig, run_sweep

pytestmark = pytest.mark.slow


@pytest.fixture
def cran(conn):
    return ensure_cranfield(conn)[0]


def scratch_schemas(conn) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
            (SCRATCH_PREFIX.replace("_", r"\_") + "%",),
        ).fetchall()
    ]


def config(work_mem: str, **kw) -> SweepConfig:
    kw.setdefault("repeat", 1)
    kw.setdefault("stage", "hnsw")
    return SweepConfig(
        testset=CRAN_TESTSET,
        target=CRAN_TARGET,
        settings={"enable_seqscan": "off", "work_mem": work_mem},
        **kw,
    )


def test_build_sweep_on_a_scratch_copy(database, conn, cran):
    before = fpmod.config_hash(fpmod.capture(conn, cran))
    res = run_sweep(
        database,
        config("12MB", build=("m=8,16",), params=("hnsw.ef_search=10,40",), name="dba-build-hnsw"),
    )
    assert scratch_schemas(conn) == []
    assert fpmod.config_hash(fpmod.capture(conn, cran)) == before  # the user's table as it was
    assert res.measured == 4
    assert [p["label"] for p in res.points] == [
        "m=8,ef_search=10",
        "m=8,ef_search=40",
        "m=16,ef_search=10",
        "m=16,ef_search=40",
    ]
    for p in res.points:
        assert p["build_ms"] > 0 and p["index_bytes"] > 8192 and p["index_recall"] > 0.5
    assert res.points[1]["index_recall"] >= res.points[0]["index_recall"]
    fp = conn.execute(
        "SELECT fingerprint FROM pgeval.run WHERE name = 'dba-build-hnsw.m=16,ef_search=40.1'"
    ).fetchone()[0]
    assert fp["indexes"]["scratch"]["options"] == {"m": "16", "ef_construction": "64"}
    assert fp["target"]["scratch_copy"] is True
    assert any("CVE-2026-3172" in w for w in res.warnings) == (
        conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        == "0.8.1"
    )
    # the same command again: nothing to build, nothing measured
    again = run_sweep(
        database,
        config("12MB", build=("m=8,16",), params=("hnsw.ef_search=10,40",), name="dba-build-hnsw"),
    )
    assert (again.measured, again.kept) == (0, 4)


def test_diskann_build_sweep(database, conn, cran):
    res = run_sweep(
        database,
        config(
            "13MB",
            stage="diskann",
            build=("storage_layout=memory_optimized,plain",),
            params=("diskann.query_rescore=10,50",),
            name="dba-build-diskann",
        ),
    )
    assert scratch_schemas(conn) == []
    assert res.measured == 4 and all(p["index_recall"] > 0.5 for p in res.points)
    assert {p["build"]["storage_layout"] for p in res.points} == {"memory_optimized", "plain"}


class Stop(KeyboardInterrupt):
    pass


def test_interrupted_build_sweep_drops_scratch_and_resumes(database, conn, cran):
    cfg = config("14MB", build=("m=8,12",), params=("hnsw.ef_search=20",), name="dba-build-stop")

    def stop(point, rep, how):
        assert scratch_schemas(conn) != []  # the copy exists while building
        raise Stop()

    with pytest.raises(Stop):
        run_sweep(database, cfg, on_point=stop)
    assert scratch_schemas(conn) == []
    res = run_sweep(database, cfg)
    assert (res.measured, res.kept) == (1, 1) and scratch_schemas(conn) == []


def test_sigterm_drops_scratch(database, conn, cran):
    previous = signal.getsignal(signal.SIGTERM)

    def term(point, rep, how):
        os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(
            database,
            config("15MB", build=("m=10",), params=("hnsw.ef_search=20",), name="dba-build-term"),
            on_point=term,
        )
    assert scratch_schemas(conn) == []
    assert signal.getsignal(signal.SIGTERM) == previous


def test_build_timeout_cancels_and_cleans_up(database, conn, cran):
    with pytest.raises(DatabaseError, match="exceeded `build_timeout`"):
        run_sweep(
            database,
            config(
                "16MB",
                build=("ef_construction=400",),
                params=("hnsw.ef_search=20",),
                build_timeout_s=0.001,
                name="dba-build-timeout",
            ),
        )
    assert scratch_schemas(conn) == []


def test_bad_build_option_value(database, conn, cran):
    with pytest.raises(InputError) as exc:
        run_sweep(
            database,
            config("17MB", build=("m=1",), params=("hnsw.ef_search=20",), name="dba-build-bad"),
        )
    assert option_for(exc.value.field) == "--build" and "m" in str(exc.value)
    assert scratch_schemas(conn) == []
    # a sweep that stored no point is undone: no sweep row, no run left behind
    assert (
        conn.execute("SELECT 1 FROM pgeval.sweep WHERE name = 'dba-build-bad'").fetchone() is None
    )
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.run r JOIN pgeval.experiment e USING (experiment_id) "
            "WHERE e.name = 'dba-build-bad'"
        ).fetchone()[0]
        == 0
    )
