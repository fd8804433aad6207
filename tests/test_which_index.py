"""Which index was measured (issue 40, "Which index was measured"), on the real server: a
column with two HNSW indexes (a small graph and a larger one)."""

from __future__ import annotations

import json

import numpy as np
import pytest

TABLE, TARGET, DIM, N = "two_ix_kb", "two-ix", 16, 600
SMALL, LARGE = "two_ix_small", "two_ix_large"


def vtext(v) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


@pytest.fixture
def kb(database, clean):
    rng = np.random.default_rng(9)
    centers = rng.normal(size=(12, DIM))
    docs = (centers[rng.integers(0, 12, N)] + 0.4 * rng.normal(size=(N, DIM))).astype(np.float32)
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({DIM}))")
        with c.cursor().copy(f"COPY {TABLE} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(docs, 1):
                cp.write_row((f"c{i}", vtext(v)))
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(
            f"CREATE INDEX {SMALL} ON {TABLE} USING hnsw (e vector_cosine_ops) "
            "WITH (m = 2, ef_construction = 4)"
        )
        c.execute(f"CREATE INDEX {LARGE} ON {TABLE} USING hnsw (e vector_cosine_ops)")
        c.execute(f"ANALYZE {TABLE}")
    from evaluator.targets.add import add_target

    add_target(database, TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield docs
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")


SWEEP = (
    f"sweep --sample-queries 10 --target {TARGET} --stage hnsw --repeat 1 "
    "--param hnsw.ef_search=10,40 --set enable_seqscan=off"
)


def sweep(pgeval, extra: str = "", fmt: str = "json"):
    code, out, err = pgeval(SWEEP + extra + f" --format {fmt}")
    assert code == 0, err
    return (json.loads(out) if fmt == "json" else out), err


def test_each_point_names_its_index_and_the_name_depends_on_index(kb, conn, pgeval):
    planner, _ = sweep(pgeval)  # the planner's choice of the two: the small graph here
    chosen = {p["index"] for p in planner["points"]}
    assert len(chosen) == 1 and chosen <= {SMALL, LARGE}
    (other,) = {SMALL, LARGE} - chosen
    small, err = sweep(pgeval, f" --index {SMALL} --isolate-index")
    large, err = sweep(pgeval, f" --index {LARGE} --isolate-index")
    assert "configuration changed" not in err  # its own sweep: nothing archived
    assert [p["index"] for p in small["points"]] == [SMALL, SMALL]
    assert [p["index"] for p in large["points"]] == [LARGE, LARGE]
    names = [planner["sweep"], small["sweep"], large["sweep"]]
    assert len(set(names)) == 3, names
    # the larger graph finds more at the same ef_search: two measurements, not one named twice
    assert large["points"][0]["index_recall"] > small["points"][0]["index_recall"]
    # the same command again resumes its own sweep
    again, _ = sweep(pgeval, f" --index {SMALL} --isolate-index")
    assert again["sweep"] == small["sweep"] and again["measured"] == 0 and not again["previous"]
    assert conn.execute("SELECT count(*) FROM pgeval.sweep").fetchone()[0] == 3
    # the table says which index every point measured; csv has it per point
    table, _ = sweep(pgeval, f" --index {LARGE} --isolate-index", fmt="table")
    assert f"index measured: {LARGE} (every point)" in table
    csv, _ = sweep(pgeval, f" --index {LARGE} --isolate-index", fmt="csv")
    header, *lines = csv.strip().splitlines()
    assert header.split(",")[2] == "index" and all(f",{LARGE}," in line for line in lines)
    # --index of the planner's own choice, without --isolate-index: named apart from the default
    named, _ = sweep(pgeval, f" --index {next(iter(chosen))}")
    assert named["sweep"] not in names and named["previous"] is None
    # the other index without --isolate-index: refused before any work, nothing left behind
    code, _, err = pgeval(SWEEP + f" --index {other}")
    assert code == 1 and f"not index {other}" in err and "--isolate-index" in err
    assert conn.execute("SELECT count(*) FROM pgeval.sweep").fetchone()[0] == 4
