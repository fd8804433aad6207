"""Reports read in one snapshot (issue 9, item 10): output assembled from several statements
(metrics with --by-type/--flagged, report, compare, stage-report, run export) is either whole or
a clean "no run named" error while another session deletes the run — never a summary with empty
breakdowns. Real embedded server; the deletes run on their own connections."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest
from helpers import make_testset

N_QUERIES = 300
DEPTH = 10


def _qrels():
    return {f"q{i:03d}": {f"c{i}": 2, f"d{i}": 1} for i in range(N_QUERIES)}


def _types():
    return {f"q{i:03d}": ["lookup" if i % 2 else "howto"] for i in range(N_QUERIES)}


def _create_run(conn, name: str) -> None:
    """A run of the test set 'snap' written in one statement (every third query misses its
    relevant chunks, so some queries are flagged)."""
    with conn.transaction():
        rid = conn.execute(
            "INSERT INTO pgeval.run (name, testset_id, stage, order_rule, status) SELECT %s, "
            "testset_id, 'import', 'as given', 'complete' FROM pgeval.testset WHERE name = 'snap' "
            "RETURNING run_id",
            (name,),
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO pgeval.result (run_id, query_id, rank, chunk_id, score) "
            "SELECT %s, q.query_id, r, CASE WHEN r = 2 AND q.position %% 3 <> 0 "
            "THEN 'c' || (q.position - 1) ELSE 'x' || r END, (%s - r)::float8 "
            "FROM pgeval.query q, generate_series(1, %s) AS r "
            "WHERE q.testset_id = (SELECT testset_id FROM pgeval.testset WHERE name = 'snap')",
            (rid, DEPTH, DEPTH),
        )
        conn.execute(
            "SELECT pgeval.refresh_ideal(testset_id) FROM pgeval.testset WHERE name = 'snap'"
        )


def _delete(database, name: str) -> None:
    with database.connect(autocommit=True) as other:
        other.execute("DELETE FROM pgeval.run WHERE name = %s", (name,))


@pytest.fixture
def snap(clean, conn):
    make_testset(conn, "snap", _qrels(), types=_types())
    _create_run(conn, "snap-run")
    _create_run(conn, "snap-other")
    return conn


METRICS = ("metrics", "snap-run", "--by-type", "--flagged", "--format", "json")


def _whole(doc: dict, expected: dict) -> None:
    assert doc["by_type"] and doc["flagged"], doc
    assert doc == expected


def test_metrics_whole_when_the_run_is_deleted_between_statements(
    snap, database, pgeval, monkeypatch
):
    """The run is deleted (another connection, committed) right after the summary is read: the
    breakdowns read afterwards still see it."""
    from evaluator.measure import metrics

    code, out, err = pgeval(*METRICS)
    assert code == 0, err
    expected = json.loads(out)
    assert expected["by_type"] and expected["flagged"]

    real_summary = metrics.summary

    def summary_then_delete(conn, *args, **kwargs):  # a pause point, not a stand-in
        values = real_summary(conn, *args, **kwargs)
        _delete(database, "snap-run")
        return values

    monkeypatch.setattr(metrics, "summary", summary_then_delete)
    code, out, err = pgeval(*METRICS)
    assert code == 0, err
    _whole(json.loads(out), expected)
    assert (
        snap.execute("SELECT count(*) FROM pgeval.run WHERE name = 'snap-run'").fetchone()[0] == 0
    )
    # deleted before the snapshot: one clean error
    monkeypatch.setattr(metrics, "summary", real_summary)
    code, out, err = pgeval(*METRICS)
    assert code == 1 and out == ""
    assert err == "pgeval: error: no run named 'snap-run' (see `pgeval run list`)\n"


def test_report_built_in_a_snapshot_taken_before_the_delete(snap, database):
    """API level: the report's transaction has begun (its snapshot is taken), then another
    session deletes the run; the report built in that transaction is the whole report."""
    from evaluator.core.db import snapshot
    from evaluator.reporting import json as report_json

    with snapshot(database) as c:
        before = report_json.build(c, "snap-run")
    with snapshot(database) as c:
        c.execute("SELECT 1")  # the snapshot is taken here
        _delete(database, "snap-run")
        after = report_json.build(c, "snap-run")
    for doc in (before, after):
        doc.pop("generated_at")
    assert after["cases"] and after["by_type"] and after["flagged"]
    assert after == before


def test_compare_reads_both_sides_in_one_snapshot(snap, database, pgeval, monkeypatch):
    """The candidate is deleted once the baseline's report is built: the comparison still has
    both sides (before, the second side failed with "no run named")."""
    from evaluator.reporting import json as report_json

    real_build = report_json.build
    calls = []

    def build_then_delete(conn, name, *args, **kwargs):
        doc = real_build(conn, name, *args, **kwargs)
        if not calls:
            _delete(database, "snap-other")
        calls.append(name)
        return doc

    monkeypatch.setattr(report_json, "build", build_then_delete)
    code, out, err = pgeval(
        "compare", "snap-run", "snap-other", "--format", "json", "--permutations", "200"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert calls == ["snap-run", "snap-other"]
    assert doc["candidate"] == "snap-other" and doc["rows"]
    assert all(r["delta"] == 0 for r in doc["rows"] if r["delta"] is not None)


def test_export_whole_when_the_run_is_deleted_after_it_is_resolved(
    snap, database, pgeval, monkeypatch, tmp_path
):
    from evaluator.measure import metrics

    out_file = tmp_path / "before.trec"
    code, _, err = pgeval("run", "export", "snap-run", "--out", str(out_file))
    assert code == 0, err
    real_resolve = metrics.resolve_run

    def resolve_then_delete(conn, name):
        run = real_resolve(conn, name)
        _delete(database, name)
        return run

    monkeypatch.setattr(metrics, "resolve_run", resolve_then_delete)
    after = tmp_path / "after.trec"
    code, _, err = pgeval("run", "export", "snap-run", "--out", str(after))
    assert code == 0, err
    assert after.read_text() == out_file.read_text()
    assert len(after.read_text().splitlines()) == N_QUERIES * DEPTH


def _race(pgeval, other, offset: float) -> tuple[int, str, str, float, bool]:
    """One read of METRICS with the run deleted on connection ``other`` ``offset`` seconds after
    the read begins (before it, when negative): the read's (code, out, err), its seconds, and
    whether the delete committed before the read returned."""
    committed = []

    def delete():
        other.execute("DELETE FROM pgeval.run WHERE name = 'snap-run'")
        committed.append(time.perf_counter())

    deleter = threading.Timer(max(offset, 0.0), delete)
    deleter.start()
    time.sleep(max(-offset, 0.0))
    begin = time.perf_counter()
    code, out, err = pgeval(*METRICS)
    end = time.perf_counter()
    deleter.join()
    return code, out, err, end - begin, committed[0] < end


def test_metrics_read_repeatedly_while_the_run_is_deleted(snap, database, pgeval):
    """Another connection deletes the run at moments spread from just before each read to its
    end: every read is either the whole document or the one-line "no run named" error, and
    both happen: a delete committed before the read's snapshot, and deletes committed while a
    read went on (its snapshot, taken in its first milliseconds, still sees the run)."""
    code, out, err = pgeval(*METRICS)
    assert code == 0, err
    expected = json.loads(out)
    t0 = time.perf_counter()
    pgeval(*METRICS)
    span = time.perf_counter() - t0  # (then the shortest whole read of the rounds: a read taken
    # longer than it runs would see most deletes land after it, "whole" for want of a race)
    rng = random.Random(9)
    outcomes = {"whole": 0, "gone": 0}
    mid_read = 0
    with database.connect(autocommit=True) as other:
        t0 = time.perf_counter()
        other.execute("DELETE FROM pgeval.run WHERE name = 'snap-other'")  # (a run as large)
        lead = max(0.02, 3 * (time.perf_counter() - t0))  # a delete started this early is done
        for i in range(30):  # the delete's start, evenly from `lead` before the read to its end
            offset = -lead + (span + lead) * (i + rng.random()) / 30
            code, out, err, seconds, before_end = _race(pgeval, other, offset)
            if code == 0:
                span = min(span, seconds)
                _whole(json.loads(out), expected)
                outcomes["whole"] += 1
                mid_read += before_end
            else:
                assert (code, out) == (1, ""), err
                assert err == "pgeval: error: no run named 'snap-run' (see `pgeval run list`)\n"
                outcomes["gone"] += 1
            _create_run(snap, "snap-run")
    assert outcomes["whole"] > 0 and outcomes["gone"] > 0, outcomes
    assert mid_read > 0, "no delete committed while a read went on: the race was not run"


def test_stage_report_whole_when_a_stage_run_is_deleted_while_it_is_built(
    clean, conn, database, pgeval, monkeypatch
):
    """A stage run is deleted once the experiment is resolved: every later statement of the
    stage report still sees it (before, the report mixed the two states)."""
    from helpers import make_run

    from evaluator.measure import stage_report

    make_testset(conn, "exp-set", {f"q{i}": {f"c{i}": 2, f"d{i}": 1} for i in range(12)})
    eid = conn.execute(
        "INSERT INTO pgeval.experiment (name, testset_id, config, status) SELECT "
        "'exp', testset_id, %s, 'complete' FROM pgeval.testset "
        "RETURNING experiment_id",
        (json.dumps({"stages": ["bm25", "rerank"]}),),
    ).fetchone()[0]
    make_run(
        conn,
        "exp.bm25.1",
        "exp-set",
        {f"q{i}": ["x", f"c{i}", "y", f"d{i}"] for i in range(12)},
        stage="bm25",
        experiment_id=eid,
    )
    make_run(
        conn,
        "exp.rerank.1",
        "exp-set",
        {f"q{i}": [f"c{i}", "x"] for i in range(12)},
        stage="rerank",
        experiment_id=eid,
    )
    code, out, err = pgeval("stage-report", "exp", "--format", "json")
    assert code == 0, err
    expected = json.loads(out)
    real_resolve = stage_report.resolve_experiment

    def resolve_then_delete(c, name):
        exp = real_resolve(c, name)
        _delete(database, "exp.bm25.1")
        return exp

    monkeypatch.setattr(stage_report, "resolve_experiment", resolve_then_delete)
    code, out, err = pgeval("stage-report", "exp", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == expected
    assert [s["stage"] for s in expected["stages"]] == ["bm25", "rerank"]
