"""An experiment's name where a run is asked for: said so, with its runs (issue "Output a DBA
can trust", item 1), on the real server."""

from __future__ import annotations

from helpers import make_run, make_testset


def test_an_experiment_name_is_named_as_one(clean, conn, pgeval):
    make_testset(conn, "ts", {"q1": {"c1": 1}})
    make_run(conn, "lonely", "ts", {"q1": ["c1"]})
    exp = conn.execute(
        "INSERT INTO pgeval.experiment (name, testset_id, config, config_hash) "
        "SELECT 'my-pipe', testset_id, '{}', 'h' FROM pgeval.testset LIMIT 1 "
        "RETURNING experiment_id"
    ).fetchone()[0]
    conn.execute("UPDATE pgeval.run SET experiment_id = %s WHERE name = 'lonely'", (exp,))
    for args in (["metrics", "my-pipe"], ["run", "delete", "my-pipe"]):
        code, out, err = pgeval(*args)
        assert code == 1 and "Traceback" not in err
        assert err.strip() == (
            "pgeval: error: 'my-pipe' is an experiment, not a run: its runs are lonely "
            "(`pgeval stage-report my-pipe` reads them all)"
        ), err
    code, out, err = pgeval("metrics", "nothing-here")
    assert err.strip() == "pgeval: error: no run named 'nothing-here' (see `pgeval run list`)"
