"""Clear errors for half states made by another session (issue 9, item 11), against the real
embedded server:

- the test set replaced under a running pipeline: say so, and suggest no resume (the experiment
  is gone with the old test set);
- the loser of two concurrent `run import --replace`: another session wrote the run, retry;
- `run resume` right after `kill -9` of a pipeline whose database session lives on (blocked in a
  statement): say that the client is gone, end its session, and resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import wait_experiment_unlocked
from robust_kb import add_target, ensure_table, ensure_testset

ROOT = Path(__file__).resolve().parent.parent
KB, N, DEPTH = "hs_kb", 250, 10


@pytest.fixture
def kb(clean, conn):
    ensure_table(conn, KB, 1000, 8, seed=5)
    ensure_testset(conn, "hs", KB, N, 8, n_rows=1000, seed=5)
    add_target(conn, "hs", KB)
    return conn


def _wait_for(cond, timeout=60, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended early: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError("timed out")


PIPELINE = (
    "run",
    "pipeline",
    "--testset",
    "hs",
    "--target",
    "hs",
    "--stages",
    "exact,second=exact",
    "--repeat",
    "1",
    "--depth",
    str(DEPTH),
)


# ---- (a) the test set replaced under a running pipeline ------------------------------------------
def test_testset_replaced_under_a_pipeline_says_so_and_suggests_no_resume(
    kb, database, pgeval, monkeypatch, tmp_path
):
    from evaluator.stages import store
    from evaluator.testset import load

    new = tmp_path / "hs-v2.jsonl"
    new.write_text(
        json.dumps({"id": "q1", "query": "other", "relevant": {"c1": 2}}) + "\n", encoding="utf-8"
    )
    real_write = store.RunWriter._write
    replaced = []

    def write_then_replace(self, *batch):  # a pause point after the first committed batch
        real_write(self, *batch)
        if not replaced:

            def replace_testset():
                with database.connect(autocommit=True) as other:
                    replaced.append(load(other, new, "hs", replace=True))

            t = threading.Thread(target=replace_testset)
            t.start()
            t.join(60)
            assert replaced, "the test set was not replaced"

    monkeypatch.setattr(store.RunWriter, "_write", write_then_replace)
    code, out, err = pgeval(*PIPELINE, "--name", "race1")
    assert replaced and replaced[0].replaced
    assert (code, out) == (1, "")
    assert err.splitlines()[-1] == (
        "pgeval: error: experiment 'race1' stopped: another session replaced its test set 'hs' "
        "while it ran (`pgeval testset load --replace` deletes the old test set's experiments "
        "and runs); nothing is left to resume: run the pipeline again (the name 'race1' is free)"
    )
    assert "resume" not in err.replace("nothing is left to resume", "")
    assert (
        kb.execute("SELECT count(*) FROM pgeval.experiment WHERE name = 'race1'").fetchone()[0] == 0
    )
    code, _, err = pgeval("run", "resume", "race1")
    assert code == 1 and "no experiment or run named 'race1'" in err


def test_testset_deleted_under_a_pipeline_says_so(kb, database, pgeval, monkeypatch):
    from evaluator.stages import store

    real_write = store.RunWriter._write
    done = []

    def write_then_delete(self, *batch):
        real_write(self, *batch)
        if not done:
            with database.connect(autocommit=True) as other:
                other.execute("DELETE FROM pgeval.testset WHERE name = 'hs'")
            done.append(True)

    monkeypatch.setattr(store.RunWriter, "_write", write_then_delete)
    code, out, err = pgeval(*PIPELINE, "--name", "race2")
    assert done and code == 1
    assert err.splitlines()[-1] == (
        "pgeval: error: experiment 'race2' stopped: another session deleted its test set 'hs' "
        "while it ran (`pgeval testset delete` deletes the test set's experiments and runs); "
        "nothing is left to resume: run the pipeline again (the name 'race2' is free)"
    )


# ---- (c) two concurrent `run import --replace` ---------------------------------------------------
def test_loser_of_two_concurrent_replacing_imports_says_retry(kb, database, pgeval, tmp_path):
    from helpers import make_run

    make_run(kb, "imp", "hs", {"q1": ["c1", "c2"]})
    path = tmp_path / "mine.trec"
    path.write_text("q1 Q0 c9 1 2 mine\nq2 Q0 c8 1 1 mine\n", encoding="utf-8")
    with database.connect() as other:  # another session's import, not yet committed
        other.execute("DELETE FROM pgeval.run WHERE name = 'imp'")
        make_run(other, "imp", "hs", {"q3": ["c7"]})
        result = {}
        loser = threading.Thread(
            target=lambda: result.update(
                out=pgeval(
                    "run", "import", str(path), "--testset", "hs", "--name", "imp", "--replace"
                )
            )
        )
        loser.start()
        # this import deletes the run it saw: it waits for the other session's row lock
        _wait_for(
            lambda: (
                kb.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                    "'DELETE FROM pgeval.run WHERE run_id%'"
                ).fetchone()[0]
                == 1
            )
        )
        other.commit()
    loser.join(60)
    code, out, err = result["out"]
    assert (code, out) == (1, "")
    assert err == (
        "pgeval: error: another session wrote run 'imp' at the same time as this "
        "import (a concurrent `run import --replace` or pipeline); this import stored "
        "nothing: retry it to replace that run\n"
    )
    assert kb.execute(
        "SELECT query_id, chunk_id FROM pgeval.result JOIN pgeval.run USING "
        "(run_id) WHERE name = 'imp'"
    ).fetchall() == [("q3", "c7")]
    # the retry replaces it
    code, _, err = pgeval(
        "run", "import", str(path), "--testset", "hs", "--name", "imp", "--replace"
    )
    assert code == 0, err


# ---- (d) resume right after kill -9 while the dead client's session lives on --------------------
def _lists(conn, run: str):
    return conn.execute(
        "SELECT query_id, rank, chunk_id, score FROM pgeval.result JOIN "
        "pgeval.run USING (run_id) WHERE name = %s ORDER BY 1, 2",
        (run,),
    ).fetchall()


@pytest.mark.slow
def test_resume_after_kill_9_ends_the_dead_clients_session(kb, database, pgeval):
    code, _, err = pgeval(*PIPELINE, "--name", "hs-ref")
    assert code == 0, err
    blocker = database.connect()  # holds the pipeline's first write (its session stays busy)
    proc = None
    try:
        blocker.execute("LOCK TABLE pgeval.run_progress IN SHARE MODE")
        proc = subprocess.Popen(
            [sys.executable, "-m", "evaluator", *PIPELINE, "--name", "hs-kill"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        backend = _wait_for(
            lambda: (
                kb.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND state = "
                    "'active' AND query LIKE '%run_progress%' AND pid <> pg_backend_pid()"
                ).fetchone()
                or [None]
            )[0],
            proc=proc,
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        # the client is gone; its backend still waits on the lock, holding the experiment
        assert kb.execute(
            "SELECT state FROM pg_stat_activity WHERE pid = %s", (backend,)
        ).fetchone() == ("active",)
        result = {}
        resumer = threading.Thread(
            target=lambda: result.update(out=pgeval("run", "resume", "hs-kill", "--format", "json"))
        )
        resumer.start()
        _wait_for(
            lambda: (
                kb.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,)
                ).fetchone()[0]
                == 0
            )
        )
    finally:
        blocker.rollback()  # let the resume write
        blocker.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
    resumer.join(120)
    code, out, err = result["out"]
    assert code == 0, err
    assert (
        f"is gone, but its database session (backend pid {backend}, active, waiting on a "
        "Lock) still holds the experiment until its current statement ends: ended that "
        "session"
    ) in " ".join(err.split())
    assert "being run by another pgeval process" not in err
    assert kb.execute("SELECT status FROM pgeval.experiment WHERE name = 'hs-kill'").fetchone() == (
        "complete",
    )
    for stage in ("exact", "second"):
        assert _lists(kb, f"hs-kill.{stage}.1") == _lists(kb, f"hs-ref.{stage}.1")
        assert len(_lists(kb, f"hs-kill.{stage}.1")) == N * DEPTH


def test_a_live_lock_holder_is_still_refused_at_once(kb, database, pgeval):
    """The client recorded with the running run is alive (this test process): resume refuses
    at once, as before, and ends nobody's session."""
    from evaluator.run.experiment_scope import try_lock

    code, _, err = pgeval(*PIPELINE, "--name", "hs-live")
    assert code == 0, err
    exp_id = kb.execute(
        "SELECT experiment_id FROM pgeval.experiment WHERE name = 'hs-live'"
    ).fetchone()[0]
    import socket

    kb.execute(
        "UPDATE pgeval.experiment SET status = 'running' WHERE experiment_id = %s", (exp_id,)
    )
    kb.execute(
        "UPDATE pgeval.run SET status = 'running', pid = %s, host = %s WHERE experiment_id = %s",
        (os.getpid(), socket.gethostname(), exp_id),
    )
    with database.connect(autocommit=True) as other:
        assert try_lock(other, exp_id)
        holder = other.execute("SELECT pg_backend_pid()").fetchone()[0]
        t0 = time.monotonic()
        code, _, err = pgeval("run", "resume", "hs-live")
        assert time.monotonic() - t0 < 10
        assert code == 1 and "is being run by another pgeval process" in err
        assert other.execute("SELECT pg_backend_pid()").fetchone()[0] == holder


@pytest.mark.slow
def test_a_role_that_may_not_end_the_dead_session_waits_a_bounded_time(kb, database, pgeval):
    """The lock holder's client is gone but its session runs on (here: in pg_sleep), and this
    role may not end another role's session: it says so, waits the bounded time, and names the
    statement a superuser can run; a role that may (the owner) ends it and gets the lock."""
    import psycopg
    from robust_kb import dsn

    from evaluator.core.errors import Conflict
    from evaluator.run.experiment_scope import acquire

    code, _, err = pgeval(*PIPELINE, "--name", "hs-sleep")
    assert code == 0, err
    exp_id = kb.execute(
        "SELECT experiment_id FROM pgeval.experiment WHERE name = 'hs-sleep'"
    ).fetchone()[0]
    script = (
        "import sys\n"
        "from evaluator.core.db import Database, client_name\n"
        "from evaluator.run.experiment_scope import try_lock\n"
        "c = Database(dsn=sys.argv[1]).connect(autocommit=True)\n"
        f"assert try_lock(c, {exp_id})\n"
        "print(c.execute('SELECT pg_backend_pid()').fetchone()[0], flush=True)\n"
        # a write transaction names its client, as the stage writer's do
        "with c.transaction():\n"
        "    c.execute(\"SELECT set_config('application_name', %s, true)\", (client_name(),))\n"
        "    c.execute('SELECT pg_sleep(60)')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, database.uri()], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        backend = int(proc.stdout.readline())
        import socket

        kb.execute(
            "UPDATE pgeval.run SET status = 'running', pid = %s, host = %s WHERE name = "
            "'hs-sleep.second.1'",
            (proc.pid, socket.gethostname()),
        )
        # in pg_sleep (not merely active: the statements before it are active too, and a
        # client killed then leaves no statement running)
        _wait_for(
            lambda: (
                kb.execute(
                    "SELECT state, wait_event FROM pg_stat_activity WHERE pid = %s", (backend,)
                ).fetchone()
                == ("active", "PgSleep")
            )
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        # the lock's own session (idle in its transaction) ends once its backend sees the
        # client gone: some time after the kill, not at once. Until then the lock is held
        # and acquire() would first wait for that session (another warning)
        wait_experiment_unlocked(kb, exp_id)
        kb.execute("DROP ROLE IF EXISTS hs_other")
        kb.execute("CREATE ROLE hs_other LOGIN NOSUPERUSER")
        kb.execute(
            "GRANT USAGE ON SCHEMA pgeval TO hs_other; GRANT SELECT ON pgeval.run TO hs_other"
        )
        warnings = []
        with psycopg.connect(dsn(database, "hs_other"), autocommit=True) as other:
            t0 = time.monotonic()
            with pytest.raises(Conflict) as exc:
                acquire(other, exp_id, "hs-sleep", warnings.append, wait_s=1.5)
            assert 1.5 <= time.monotonic() - t0 < 10
        assert warnings == [
            f"the pgeval process that ran experiment 'hs-sleep' (pid {proc.pid} on "
            f"{socket.gethostname()}) is gone, but its database session (backend pid {backend}, "
            "its state hidden from this role) still holds the experiment until its current "
            "statement ends: waiting for it (up to 1.5 s)"
        ]
        assert str(exc.value).endswith(
            f"did not end within 1.5 s: retry later, or have a superuser end it: "
            f"SELECT pg_terminate_backend({backend})"
        )
        with database.connect(autocommit=True) as owner:
            acquire(owner, exp_id, "hs-sleep", warnings.append, wait_s=30)
            assert warnings[-1].endswith("ended that session")
        assert (
            kb.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,)
            ).fetchone()[0]
            == 0
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        kb.execute("DROP OWNED BY hs_other")
        kb.execute("DROP ROLE IF EXISTS hs_other")
