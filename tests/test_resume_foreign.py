"""A run belongs to exactly one experiment and test set: nothing adopts a run it did not create.

A run imported under a name that a pipeline would give one of its stages (``col2.bm25.1``, from
another test set) makes the pipeline refuse before it writes anything, naming that run; and
`run resume` never keeps, continues or counts a run of that name that is not its experiment's
(it used to keep the foreign run as the bm25 stage and mark the experiment complete)."""

from __future__ import annotations

import pytest
from robust_kb import add_target, ensure_table, ensure_testset

ARGS = [
    "run",
    "pipeline",
    "--testset",
    "fr",
    "--target",
    "fr",
    "--stages",
    "exact,bm25",
    "--repeat",
    "1",
    "--depth",
    "10",
]


@pytest.fixture
def kb(clean, conn, tmp_path):
    ensure_table(conn, "fr_kb", 300, 8, seed=7)
    ensure_testset(conn, "fr", "fr_kb", 12, 8, n_rows=300, seed=7)
    ensure_testset(conn, "fr-other", "fr_kb", 5, 8, n_rows=300, seed=8)
    conn.execute("UPDATE pgeval.query SET query_text = 'document ' || substr(query_id, 2)")
    add_target(conn, "fr", "fr_kb")
    run_file = tmp_path / "foreign.trec"
    run_file.write_text("".join(f"q{i} Q0 c{i} 1 1.0 x\n" for i in range(1, 6)))
    return conn, run_file


def _counts(conn, name: str):
    return (
        conn.execute("SELECT count(*) FROM pgeval.experiment WHERE name = %s", (name,)).fetchone()[
            0
        ],
        conn.execute(
            "SELECT count(*) FROM pgeval.run WHERE name LIKE %s", (name + ".%",)
        ).fetchone()[0],
    )


def test_pipeline_refuses_a_name_whose_stage_run_exists(kb, pgeval):
    conn, run_file = kb
    code, _, err = pgeval(
        "run", "import", str(run_file), "--testset", "fr-other", "--name", "col2.bm25.1"
    )
    assert code == 0, err
    code, out, err = pgeval(*ARGS, "--name", "col2")
    assert code == 1
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "col2.bm25.1" in err and "--name" in err and "run delete" in err
    assert "resume" not in err and "Traceback" not in err
    # nothing written: no experiment, and the foreign run is untouched
    assert _counts(conn, "col2") == (0, 1)
    assert conn.execute(
        "SELECT experiment_id, stage FROM pgeval.run WHERE name = 'col2.bm25.1'"
    ).fetchone() == (None, "import")
    code, out, err = pgeval(*ARGS, "--name", "col3")
    assert code == 0, err


def test_resume_never_adopts_a_foreign_run(kb, pgeval):
    conn, run_file = kb
    code, _, err = pgeval(*ARGS, "--name", "col4")
    assert code == 0, err
    # the experiment loses its bm25 run (as if never run) and a foreign run takes the name
    conn.execute("DELETE FROM pgeval.run WHERE name = 'col4.bm25.1'")
    conn.execute("UPDATE pgeval.experiment SET status = 'failed' WHERE name = 'col4'")
    code, _, err = pgeval(
        "run", "import", str(run_file), "--testset", "fr-other", "--name", "col4.bm25.1"
    )
    assert code == 0, err
    code, out, err = pgeval("run", "resume", "col4")
    assert code == 1, out
    assert "col4.bm25.1" in err and "Traceback" not in err
    assert len([x for x in err.strip().splitlines() if x.strip()]) == 1, err
    status = conn.execute("SELECT status FROM pgeval.experiment WHERE name = 'col4'").fetchone()
    assert status[0] != "complete"
    assert (
        conn.execute("SELECT experiment_id FROM pgeval.run WHERE name = 'col4.bm25.1'").fetchone()[
            0
        ]
        is None
    )
    # once the foreign run is gone, resume measures the stage itself
    code, _, err = pgeval("run", "delete", "col4.bm25.1")
    assert code == 0, err
    code, out, err = pgeval("run", "resume", "col4", "--format", "json")
    assert code == 0, err
    exp_id, ts = conn.execute(
        "SELECT experiment_id, testset_id FROM pgeval.experiment WHERE name = 'col4'"
    ).fetchone()
    assert conn.execute(
        "SELECT experiment_id, testset_id, status FROM pgeval.run WHERE name = 'col4.bm25.1'"
    ).fetchone() == (exp_id, ts, "complete")


def test_resume_by_run_name_of_an_import_is_refused(kb, pgeval):
    conn, run_file = kb
    code, _, err = pgeval(
        "run", "import", str(run_file), "--testset", "fr-other", "--name", "lone.bm25.1"
    )
    assert code == 0, err
    code, _, err = pgeval("run", "resume", "lone.bm25.1")
    assert code == 1 and "imported" in err and "Traceback" not in err
