"""A table that changes while it is measured (issue 39, item 5), on the real server: a writer
inserts rows next to the queries and moves their nearest rows away, on its own connection,
while a sweep of three points runs.

- **one snapshot** (the default): every point's stored recall equals the recall numpy computes
  over exactly the rows of the sweep's snapshot (the initial rows plus the writer's changes
  whose transactions the snapshot sees, ``txid_visible_in_snapshot``), to 1e-9, and the
  exact list of each query is numpy's top K over those rows; the writer committed changes
  during the sweep that the snapshot does not see (without the snapshot, the exact answer and
  the later points read other rows than the earlier ones);
- **detection** (``consistency="detect"``): a write committed while a point is measured (the
  point's lists wait on a lock the test holds until the write is committed) has that point
  measured again against a fresh exact answer, and the output names it;
- past ``snapshot_max_age_s`` the snapshot is released and the output says so.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from helpers import wait_for

from evaluator.testset.query_source import QuerySource
from evaluator.tuning.sweep import SweepConfig, run_sweep

pytestmark = pytest.mark.slow

TABLE, TARGET, DIM, N, NQ, K = "cw_kb", "cw-kb", 32, 3000, 20, 10
QUERIES = QuerySource("sql", statement='SELECT qid, v FROM cw_queries ORDER BY qid COLLATE "C"')


def vtext(v) -> str:
    return "[" + ",".join(f"{float(x):.6f}" for x in v) + "]"


@pytest.fixture
def kb(database, clean):
    rng = np.random.default_rng(39)
    docs = rng.normal(size=(N, DIM)).astype(np.float32)
    queries = rng.normal(size=(NQ, DIM)).astype(np.float32)
    with database.connect(results=False, autocommit=True) as c:
        for t in (TABLE, "cw_queries", "cw_log"):
            c.execute(f"DROP TABLE IF EXISTS {t}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({DIM}))")
        c.execute(f"CREATE TABLE cw_queries (qid text PRIMARY KEY, v vector({DIM}))")
        # the writer's changes, each in the transaction that made it (its txid)
        c.execute("CREATE TABLE cw_log (seq bigserial PRIMARY KEY, xid bigint, id text, e text)")
        with c.cursor().copy(f"COPY {TABLE} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(docs, 1):
                cp.write_row((f"c{i}", vtext(v)))
        with c.cursor().copy("COPY cw_queries (qid, v) FROM STDIN") as cp:
            for i, v in enumerate(queries, 1):
                cp.write_row((f"q{i:02d}", vtext(v)))
        c.execute(f"CREATE INDEX {TABLE}_hnsw ON {TABLE} USING hnsw (e vector_cosine_ops)")
        c.execute(f"ANALYZE {TABLE}")
    from evaluator.targets.add import add_target

    add_target(database, TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield {f"c{i}": v for i, v in enumerate(docs, 1)}, queries
    with database.connect(results=False, autocommit=True) as c:
        for t in (TABLE, "cw_queries", "cw_log"):
            c.execute(f"DROP TABLE IF EXISTS {t}")


def cosine(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    x64, q64 = x.astype(np.float64), q.astype(np.float64)
    return 1.0 - (x64 @ q64) / (np.linalg.norm(x64, axis=1) * np.linalg.norm(q64))


def nearest(docs: dict, q: np.ndarray, n: int) -> list[str]:
    ids = list(docs)
    d = cosine(np.stack([docs[i] for i in ids]), q)
    return [ids[j] for j in np.argsort(d)[:n]]


class Writer(threading.Thread):
    """Inserts a row next to a query and moves one of its nearest rows far away, one
    transaction each, logged (txid, id, vector) in the same transaction."""

    def __init__(self, database, docs: dict, queries: np.ndarray, *, seed: int = 1):
        super().__init__(daemon=True)
        self.database, self.queries = database, queries
        self.near = [nearest(docs, q, 5) for q in queries]
        self.rng = np.random.default_rng(seed)
        self.stop = threading.Event()
        self.commits = 0
        self.error: BaseException | None = None

    def write_one(self, c, n: int) -> None:
        qi = n % len(self.queries)
        q = self.queries[qi]
        if n % 2 == 0:  # a row right next to the query
            rid, v = f"w{n}", q + self.rng.normal(scale=0.02, size=DIM).astype(np.float32)
            c.execute(f"INSERT INTO {TABLE} (id, e) VALUES (%s, %s)", (rid, vtext(v)))
        else:  # one of its nearest rows moved far away
            rid = self.near[qi][(n // 2) % 5]
            v = -q + self.rng.normal(scale=0.5, size=DIM).astype(np.float32)
            c.execute(f"UPDATE {TABLE} SET e = %s WHERE id = %s", (vtext(v), rid))
        c.execute(
            "INSERT INTO cw_log (xid, id, e) VALUES (txid_current(), %s, %s)", (rid, vtext(v))
        )
        c.commit()
        self.commits += 1

    def run(self) -> None:
        try:
            with self.database.connect(results=False) as c:
                n = 0
                while not self.stop.is_set():
                    self.write_one(c, n)
                    n += 1
                    time.sleep(0.003)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc


def rows_in(database, docs: dict, txids: str | None) -> tuple[dict, int, int]:
    """The rows visible in snapshot ``txids`` (None: all committed), and how many of the
    writer's changes it sees and misses."""
    rows = dict(docs)
    seen = missed = 0
    with database.connect(results=False) as c:
        log = c.execute(
            "SELECT id, e, CASE WHEN %s::text IS NULL THEN true "
            "ELSE txid_visible_in_snapshot(xid, %s::txid_snapshot) END FROM cw_log ORDER BY seq",
            (txids, txids),
        ).fetchall()
    for rid, e, visible in log:
        if visible:
            rows[rid] = np.array([float(x) for x in e.strip("[]").split(",")], dtype=np.float32)
            seen += 1
        else:
            missed += 1
    return rows, seen, missed


def numpy_recall(rows: dict, queries: np.ndarray, lists: dict) -> tuple[float, dict]:
    """pgeval.index_recall's rule over ``rows``: per query, the ANN list's first K rows whose
    distance is within the K-th exact distance (+1e-6 relative), over min(K, rows); the mean;
    and numpy's top K per query."""
    ids = list(rows)
    x = np.stack([rows[i] for i in ids])
    per, tops = [], {}
    for i, q in enumerate(queries, 1):
        qid = f"q{i:02d}"
        d = cosine(x, q)
        order = np.argsort(d)[:K]
        tops[qid] = [ids[j] for j in order]
        dk = float(d[order[-1]])
        chunk_ids, scores = lists.get(qid, ([], []))
        hits = sum(1 for s in scores[:K] if s <= dk + 1e-6 * max(1.0, abs(dk)))
        per.append(hits / min(K, len(ids)))
    return float(np.mean(per)), tops


def stored_lists(conn, run_id: int) -> dict:
    return {
        qid: (list(ids), list(scores))
        for qid, ids, scores in conn.execute(
            "SELECT query_id, chunk_ids, scores FROM pgeval.result_list WHERE run_id = %s",
            (run_id,),
        ).fetchall()
    }


def unseen(lists: dict, exact: dict) -> int:
    """ANN rows closer than the K-th exact distance that the exact list does not hold: rows the
    exact answer never saw (whatever the implementation)."""
    n = 0
    for qid, (ids, scores) in lists.items():
        ex_ids, ex_scores = exact[qid]
        dk = sorted(ex_scores)[K - 1]
        n += sum(1 for c, s in zip(ids, scores, strict=True) if s < dk - 1e-6 and c not in ex_ids)
    return n


def runs(conn, sweep: str) -> dict:
    """label -> run id of the sweep's runs (the exact one as 'exact')."""
    out = {}
    for name, run_id in conn.execute(
        "SELECT name, run_id FROM pgeval.run WHERE name LIKE %s", (sweep + ".%",)
    ).fetchall():
        out[name[len(sweep) + 1 : -2]] = run_id
    return out


def config(name: str, **kw) -> SweepConfig:
    return SweepConfig(
        testset="",
        target=TARGET,
        stage="hnsw",
        queries=QUERIES,
        settings={"enable_seqscan": "off"},
        k=K,
        repeat=1,
        name=name,
        **{"params": ("hnsw.ef_search=10,20,40",), **kw},
    )


def sweep_while_writing(database, docs, queries, cfg) -> tuple:
    """``cfg`` swept while a :class:`Writer` writes before and all through it: (the result,
    the writer's commits by the sweep's end)."""
    writer = Writer(database, docs, queries)
    writer.start()

    def on_point(point, rep, how):
        # the sweep's snapshot was taken before its first point: two more commits (the second
        # begun after the snapshot) are writes it does not see, committed during the sweep,
        # whatever the machine's load (a fast sweep could otherwise end between two commits)
        if point.number == 1:
            seen = writer.commits
            wait_for(lambda: writer.commits >= seen + 2 or writer.error is not None, pause=0.005)

    try:
        while writer.commits < 20:  # writing before the sweep starts, and all through it
            time.sleep(0.005)
        res = run_sweep(database, cfg, on_point=on_point)
        during = writer.commits
        time.sleep(0.05)
    finally:
        writer.stop.set()
        writer.join(10)
    assert writer.error is None, writer.error
    return res, during


def assert_over_the_snapshot(database, conn, res, docs, queries, during: int) -> None:
    """Every point's stored recall is numpy's over the rows of the sweep's snapshot, the exact
    lists numpy's top K there, and the writer committed changes during the sweep it misses."""
    cons = res.consistency
    assert cons["how"] == "one snapshot" and not cons["snapshot"]["released_early"], cons
    visible, seen, missed = rows_in(database, docs, cons["snapshot"]["txids"])
    # the snapshot saw the writes before it and none of those committed during the sweep
    assert seen >= 20 and missed > 0 and during - seen > 0, (seen, missed, during)
    by_label = runs(conn, res.name)
    exact = stored_lists(conn, by_label["exact"])
    for p in res.points:
        lists = stored_lists(conn, by_label[p["label"]])
        want, tops = numpy_recall(visible, queries, lists)
        assert p["index_recall"] == pytest.approx(want, abs=1e-9), p["label"]
        # the exact answer is numpy's top K over the snapshot's rows, query by query
        assert {q: ids[:K] for q, (ids, _) in exact.items()} == tops
        # no ANN row the exact answer could not see: every one is a row of the snapshot
        assert all(c in visible for ids, _ in lists.values() for c in ids)
        assert unseen(lists, exact) == 0
    # the same lists against the table as it is now: another answer (the writer moved it)
    now, _, _ = rows_in(database, docs, None)
    assert numpy_recall(now, queries, lists)[1] != tops
    assert res.as_dict()["consistency"] == cons  # what the JSON says


def test_every_recall_is_over_the_rows_of_one_snapshot(database, kb, conn):
    docs, queries = kb
    res, during = sweep_while_writing(database, docs, queries, config("cw-snapshot"))
    assert len(res.points) == 3
    assert res.consistency["snapshot"]["held_s"] > 0 and res.consistency["max_age_s"] == 900
    assert_over_the_snapshot(database, conn, res, docs, queries, during)


def test_a_build_sweep_copies_the_rows_of_the_snapshot(database, kb, conn):
    """The scratch copy is taken under the snapshot the exact answer read; the snapshot is
    released once the copy is taken (the builds and points read the copy)."""
    docs, queries = kb
    cfg = config("cw-build", params=("hnsw.ef_search=10,40",), build=("m=8,16",))
    res, during = sweep_while_writing(database, docs, queries, cfg)
    assert len(res.points) == 4
    assert_over_the_snapshot(database, conn, res, docs, queries, during)


class PointWriter(threading.Thread):
    """Writes once while a point is measured, deterministically (no race with the statements):
    :meth:`hold` (from ``on_point`` after the point before it) takes pgeval.result_list in
    EXCLUSIVE mode on a connection of the test's, which lets every read go on and makes every
    write of it wait. The sweep's next write of it is that point's lists, stored by its run
    between the two reads of the table's version value that bracket the point (detection,
    consistency.detected_point). The writer waits until that write waits on the lock (pg_locks),
    commits its change, then releases the lock: the write always lands after the point's
    first read of the version value and before its second."""

    def __init__(self, database, docs, queries):
        super().__init__(daemon=True)
        self.writer = Writer(database, docs, queries, seed=2)
        self.database = database
        self.holder = None
        self.armed, self.done = threading.Event(), threading.Event()
        self.error: BaseException | None = None

    def hold(self) -> None:
        self.holder = self.database.connect()
        self.holder.execute("LOCK TABLE pgeval.result_list IN EXCLUSIVE MODE")
        self.armed.set()

    def run(self) -> None:
        try:
            if not self.armed.wait(60):
                raise AssertionError("the sweep never reached the point before the write")
            with self.database.connect(autocommit=True) as watch:  # (where pgeval lives)
                deadline = time.monotonic() + 60
                while not watch.execute(
                    "SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND locktype = "
                    "'relation' AND relation = 'pgeval.result_list'::regclass AND database = "
                    "(SELECT oid FROM pg_database WHERE datname = current_database())"
                ).fetchone()[0]:
                    if time.monotonic() > deadline:
                        raise AssertionError("the point's lists never waited on the lock")
                    time.sleep(0.01)
            with self.database.connect(results=False) as c:
                self.writer.write_one(c, 0)  # a row next to the first query
                self.writer.write_one(c, 1)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc
        finally:
            if self.holder is not None:
                self.holder.close()  # the lock released: the point's lists are stored
            self.done.set()


def test_detection_measures_a_changed_point_again_and_names_it(database, kb, conn, pgeval):
    docs, queries = kb
    writer = PointWriter(database, docs, queries)
    writer.start()

    def on_point(point, rep, how):
        if point.number == 1:
            writer.hold()  # the write lands while point 2 is measured

    res = run_sweep(database, config("cw-detect", consistency="detect"), on_point=on_point)
    writer.join(30)
    assert writer.error is None and writer.done.is_set(), writer.error
    cons = res.consistency
    assert cons["how"] == "re-measured points" and cons["reason"] == "--consistency detect"
    assert [(r["label"], r["repetition"], r["measurements"]) for r in cons["remeasured"]] == [
        ("ef_search=20", 1, 2)
    ], cons
    assert any("changed while point ef_search=20" in w for w in res.warnings), res.warnings
    assert cons["exact_answers"] == 2  # the first point's, and the one after the write
    # the point measured again, its recall against the exact answer over the rows it saw: the
    # table after the writes (the exact run now is the fresh one)
    now, _, _ = rows_in(database, docs, None)
    by_label = runs(conn, "cw-detect")
    p2 = next(p for p in res.points if p["label"] == "ef_search=20")
    want, tops = numpy_recall(now, queries, stored_lists(conn, by_label["ef_search=20"]))
    assert p2["index_recall"] == pytest.approx(want, abs=1e-9)
    exact = stored_lists(conn, by_label["exact"])
    assert {q: ids[:K] for q, (ids, _) in exact.items()} == tops
    assert "w0" in tops["q01"]  # the row written next to the first query is in its answer
    # the text output names the point
    code, out, err = pgeval(
        f"sweep --target {TARGET} --stage hnsw --queries-sql "
        f"'SELECT qid, v FROM cw_queries' --param hnsw.ef_search=10,20,40 --repeat 1 "
        "--set enable_seqscan=off --consistency detect --name cw-detect-text"
    )
    assert code == 0, err
    assert "consistency: re-measured points: none" in out, out


def test_a_snapshot_held_too_long_is_released_and_said(database, kb, pgeval):
    sweep = (
        f"sweep --target {TARGET} --stage hnsw --queries-sql 'SELECT qid, v FROM cw_queries' "
        "--param hnsw.ef_search=10,20 --repeat 1 --set enable_seqscan=off"
    )
    code, out, err = pgeval(sweep + " --name cw-age-text")
    assert code == 0, err
    assert "consistency: one snapshot (taken " in out and "of --snapshot-max-age 900 s" in out
    code, out, err = pgeval(
        sweep + " --name cw-age-json --fresh --snapshot-max-age 0 --format json"
    )
    assert code == 0, err
    assert json.loads(out)["consistency"]["snapshot"]["released_early"] is True
    res = run_sweep(database, config("cw-age", snapshot_max_age_s=0))
    cons = res.consistency
    assert cons["how"] == "re-measured points" and cons["snapshot"]["released_early"]
    assert "past --snapshot-max-age 0 s" in cons["reason"] and cons["remeasured"] == []
    assert any("past --snapshot-max-age" in w for w in res.warnings)
    assert all(p["index_recall"] is not None for p in res.points)


def test_a_lost_snapshot_hands_the_rest_to_detection(database, kb, conn):
    """The holder's backend terminated after the first point (a pooler's idle timeout would do
    the same): the first point stands on the snapshot, the rest are measured by detection, and
    the output says why."""

    def on_point(point, rep, how):
        if point.number == 1:
            with database.connect(results=False, autocommit=True) as c:
                # the timeout: return once the backend has ended (without it, the signal is
                # only sent, and the next point may still import the snapshot)
                ended = c.execute(
                    "SELECT pg_terminate_backend(pid, 60000) FROM pg_stat_activity "
                    "WHERE query LIKE '%%pg_export_snapshot()%%' AND pid <> pg_backend_pid()"
                ).fetchall()
                assert (True,) in ended, ended

    res = run_sweep(database, config("cw-lost"), on_point=on_point)
    cons = res.consistency
    assert cons["how"] == "re-measured points" and cons["snapshot"]["released_early"], cons
    assert cons["reason"].startswith("the snapshot was lost (") and cons["remeasured"] == []
    assert cons["exact_answers"] == 1  # (the data did not change: the same exact answer)
    assert [p["index_recall"] is not None for p in res.points] == [True, True, True]
