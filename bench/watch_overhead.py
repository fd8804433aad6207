"""Benchmark: what a `pgeval watch` probe costs (issue 27).

On the table of bench/sweep_own_table.py (--docs rows x --dim dimensions, seeded clustered vectors,
an HNSW index; built once and kept), measured in the same run on the same server:

(a) a probe's wall time (library call, its connections included) with its exact ground truth
    stored, against a bare psycopg loop of the statements it times (the same sampled queries,
    prepared, SET LOCAL hnsw.ef_search, LIMIT k + 1, nothing stored; its connection opened
    untimed): the issue's target is <= 1.2; rounds alternated, each round's ratio printed. Each
    round measures the probe on its steady state (with --track the steady path, an unchanged
    configuration epoch: tuning/sweep/remeasure.py; without it the lean path); then, in the same round,
    the floor (:func:`floor`: the least any probe that stores its lists and computes its recall
    in SQL can do), with --track the lean path (the epoch forgotten first, untimed), and the full
    path (a one-point sweep; the series' sweep deleted first, untimed);
(b) the exact ground truth after 1 % of the rows changed (a third inserted, a third updated, a
    third deleted; the probe refreshes it incrementally) against a full recomputation of the same
    queries on the same data (the stored one deleted first), and whether both give the same
    top-k ids per query.

With --track, (a) runs with the table's change log (`pgeval target track`): the probe reads
the data version from the log's count instead of a pass over the table's row versions, and a
probe whose configuration epoch is unchanged takes the steady path.

Usage: python bench/watch_overhead.py [--docs 100000] [--dim 384] [--queries 100]
       [--cache DIR] [--dsn DSN] [--track]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweep_own_table import TARGET, bare, server, table  # noqa: E402

from evaluator.table.target_table import resolve_table  # noqa: E402


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=100000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--ef", default="40")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cache", default=None)
    p.add_argument("--dsn", default=None)
    p.add_argument(
        "--track",
        action="store_true",
        help="(a) with the table's change log (`pgeval target track`): no data-version scan",
    )
    return p.parse_args()


def change(db, name: str, docs: int, dim: int, n: int, seed: int) -> int:
    """``n`` rows changed: a third inserted (new ids), a third updated (new vectors), the rest
    deleted; seeded anew each run (the same change twice would restore the same content)."""
    from pgvector.psycopg import register_vector

    rng = np.random.default_rng(seed)
    k = n // 3
    with db.connect(results=False, autocommit=True) as c:
        register_vector(c)
        ids = [r[0] for r in c.execute(f"SELECT id FROM {name} TABLESAMPLE SYSTEM (5)").fetchall()]
        pick = [str(x) for x in rng.choice(ids, n - k, replace=False)]
        with c.cursor() as cur:
            vecs = rng.normal(size=(n, dim)).astype(np.float32)
            cur.executemany(
                f"INSERT INTO {name} (id, emb) VALUES (%s, %s)",
                [(f"b{seed}-{i}", vecs[i]) for i in range(k)],
            )
            cur.executemany(
                f"UPDATE {name} SET emb = %s WHERE id = %s",
                [(vecs[k + i], pick[i]) for i in range(k)],
            )
            cur.execute(f"DELETE FROM {name} WHERE id = ANY(%s)", (pick[k:],))
    return n


def forget_series(db, sweep: str) -> None:
    """The series' sweep deleted: its next probe takes the full path (a one-point sweep)."""
    with db.connect() as c:
        c.execute("DELETE FROM pgeval.experiment WHERE name = %s", (sweep,))
        c.execute("DELETE FROM pgeval.sweep WHERE name = %s", (sweep,))
        c.commit()


def floor(db, target, queries, settings: dict, depth: int, k: int, sweep: str) -> float:
    """Seconds of the least a probe that keeps pgeval's rules can do: open one connection, run
    the same statements (prepared, SET LOCAL, each timed), store their lists and timings as a
    run of the series' experiment, and read recall@k and the percentiles from the same SQL
    (pgeval.index_recall against the kept exact run, pgeval.run_latency), in one transaction.
    No lock, no configuration, data or plan check, no probe row. The run is deleted, untimed."""
    import psycopg

    from evaluator.core.vector_types import register_vector
    from evaluator.stages import gucs, vector_sql

    with db.connect() as c:
        exp, point_run = c.execute(
            "SELECT s.experiment_id, sp.run_id FROM pgeval.sweep s JOIN pgeval.sweep_point sp "
            "USING (sweep_id) WHERE s.name = %s",
            (sweep,),
        ).fetchone()
    uri = db.uri()
    t0 = time.perf_counter()
    with psycopg.connect(uri) as c:
        register_vector(c)
        stmt, params, _ = vector_sql.per_query(target, depth, exact=False)
        text = stmt.as_string(c)
        gucs.load_libraries(c)
        c.execute("SET TRANSACTION READ ONLY")
        gucs.apply_local(c, settings)
        cur, lists, timings = c.cursor(), [], []
        for qid, v in queries:
            t = time.perf_counter()
            cur.execute(text, dict(params, q=v), prepare=True)
            rows = cur.fetchall()
            timings.append((qid, (time.perf_counter() - t) * 1000.0, None, len(rows)))
            kept = [r for r in rows if r[0] != qid][:k]  # (the sample's own chunk dropped)
            lists.append((qid, [r[0] for r in kept], [float(r[1]) for r in kept]))
        c.rollback()
        run = c.execute(
            "INSERT INTO pgeval.run (name, testset_id, experiment_id, stage, repetition, params, "
            "order_rule, depth, status) SELECT name || '.floor', testset_id, experiment_id, stage, "
            "repetition, params, order_rule, depth, 'complete' FROM pgeval.run WHERE run_id = %s "
            "RETURNING run_id",
            (point_run,),
        ).fetchone()[0]
        with c.cursor().copy(
            "COPY pgeval.result_list (run_id, query_id, grades, scores, chunk_ids) FROM STDIN "
            "(FORMAT BINARY)"
        ) as cp:
            cp.set_types(["int8", "text", "int2[]", "float8[]", "text[]"])
            for qid, ids, scores in lists:
                cp.write_row((run, qid, [0] * len(ids), scores, ids))
        with c.cursor().copy(
            "COPY pgeval.query_timing (run_id, query_id, latency_ms, server_ms, rows_returned) "
            "FROM STDIN (FORMAT BINARY)"
        ) as cp:
            cp.set_types(["int8", "text", "float8", "float8", "int4"])
            for row in timings:
                cp.write_row((run, *row))
        c.execute(
            "SELECT index_recall FROM pgeval.index_recall(%s, %s, 1) WHERE run_id = %s",
            (exp, k, run),
        ).fetchone()
        c.execute(
            "SELECT * FROM pgeval.run_latency(%s, %s, 'retrieval')", (run, [0.5, 0.95, 0.99])
        ).fetchall()
        c.commit()
    wall = time.perf_counter() - t0
    with db.connect() as c:
        c.execute("DELETE FROM pgeval.run WHERE run_id = %s", (run,))
        c.commit()
    return wall


def forget_epoch(db, sweep: str) -> None:
    """The epoch the series' point run was measured under forgotten: its next probe takes the
    lean path (fresh fingerprints, the kept sweep), which records it again."""
    with db.connect() as c:
        c.execute(
            "UPDATE pgeval.run r SET params = r.params - 'epoch' FROM pgeval.sweep_point sp "
            "JOIN pgeval.sweep s USING (sweep_id) WHERE s.name = %s AND r.run_id = sp.run_id",
            (sweep,),
        )
        c.commit()


def lists(db, k: int) -> dict:
    """The stored exact top-k ids per query of the bench target's ground truth."""
    out: dict = {}
    with db.connect() as c:
        for q, chunk in c.execute(
            "SELECT r.query_id, r.chunk_id FROM pgeval.ground_truth_result r JOIN "
            "pgeval.ground_truth g USING (gt_id) WHERE g.target = %s AND r.rank <= %s "
            "ORDER BY r.query_id, r.rank",
            (TARGET, k),
        ).fetchall():
            out.setdefault(q, []).append(chunk)
    return out


def track(db, on: bool) -> None:
    """The bench table's change log as asked (the table is cached between runs)."""
    from evaluator.table import change_log
    from evaluator.targets.targets import load

    with db.connect() as c:
        target = load(c, TARGET)
    with db.connect(results=False) as kb:
        tracked = change_log.state(kb, resolve_table(kb, target)) is not None
        kb.rollback()
        if on:
            change_log.install(kb, target)
        elif tracked:
            change_log.remove(kb, target)


def main() -> None:
    args = arguments()
    db, stop = server(args)
    try:
        from evaluator.providers.embedders import storage
        from evaluator.testset.query_source import QuerySource
        from evaluator.tuning.watch import WatchConfig, run_probe

        name, built = table(db, args.docs, args.dim)
        track(db, args.track)
        src = QuerySource("sample", count=args.queries, seed=0)
        cfg = WatchConfig(
            target=TARGET,
            stage="hnsw",
            queries=src,
            settings={"hnsw.ef_search": args.ef},
            k=args.k,
            remedy=False,
        )
        first = run_probe(db, cfg)  # the ground truth of this sample, stored when missing
        run_probe(db, cfg)  # (with the change log: its count's entry filled)
        with db.connect() as c:
            from evaluator.targets.targets import load

            target = load(c, TARGET)
            tid = c.execute(
                "SELECT testset_id FROM pgeval.testset WHERE name = %s", (first.testset,)
            ).fetchone()[0]
            stored = storage.testset_queries(c, tid, with_embedding=True)
            vectors = [q.embedding for q in stored]
        how = f"built in {built:.0f} s" if built else "cached"
        print(
            f"{args.docs} rows x {args.dim} dims ({how}), {len(vectors)} sampled queries, "
            f"hnsw.ef_search={args.ef}, LIMIT {args.k} + 1; change log: "
            f"{'tracked' if args.track else 'no (version scan)'}"
        )
        plans = [({"hnsw.ef_search": args.ef, "enable_seqscan": "off"}, False)]
        bare(db, target, vectors[:5], args.k + 1, plans)  # warm
        ratios, probes, bares, leans, fulls, floors = [], [], [], [], [], []
        steady = "steady" if args.track else "point"  # (no epoch without the change log)
        for _ in range(args.rounds):  # alternated: the machine is shared
            b, _ = bare(db, target, vectors, args.k + 1, plans)
            t0 = time.perf_counter()
            res = run_probe(db, cfg)  # the steady state
            p = time.perf_counter() - t0
            assert res.ground_truth and res.ground_truth["status"] == "reused"
            assert res.path == steady, res.path
            ratios.append(p / b)
            probes.append(p)
            bares.append(b)
            f = floor(
                db, target, [(q.query_id, q.embedding) for q in stored], plans[0][0],
                args.k + 1, args.k, res.probe["sweep"],
            )  # fmt: skip
            floors.append(f / b)
            if args.track:
                forget_epoch(db, res.probe["sweep"])  # (untimed) the next probe: the lean path
                t0 = time.perf_counter()
                lean = run_probe(db, cfg)
                leans.append((time.perf_counter() - t0) / b)
                assert lean.path == "point" and lean.probe["recall"] == res.probe["recall"]
            forget_series(db, res.probe["sweep"])  # (untimed) the next probe: the full path
            t0 = time.perf_counter()
            full = run_probe(db, cfg)
            fulls.append((time.perf_counter() - t0) / b)
            assert full.path == "sweep" and full.probe["recall"] == res.probe["recall"]
            run_probe(db, cfg)  # (untimed: with the change log, the lean path records the epoch)

        def listed(values: list) -> str:
            return (
                ", ".join(f"{r:.2f}" for r in values) + f" (median {statistics.median(values):.2f})"
            )

        print(
            f"(a) probe (ground truth reused, {steady} path): median "
            f"{statistics.median(probes):.3f} s; bare loop of its statements: median "
            f"{statistics.median(bares):.3f} s; ratio per round {listed(ratios)}; target <= 1.2"
        )
        print(
            "    the floor (one connection, the same statements, their lists and timings "
            f"stored, recall and percentiles by the same SQL; nothing else), same rounds: "
            f"{listed(floors)}"
        )
        if leans:
            print(f"    the lean path (fresh fingerprints), same rounds: {listed(leans)}")
        print(
            f"    the full path (a one-point sweep), same rounds: {listed(fulls)}; load average "
            + ", ".join(f"{x:.2f}" for x in os.getloadavg())
        )
        print(
            f"    recall@{args.k} {res.probe['recall']:.4f}, p95 {res.probe['p95_ms']:.3f} ms, "
            f"timed statements {res.probe['timed_ms']:.1f} ms in all"
        )

        # (b) 1 % of the rows changed: the probe refreshes its ground truth incrementally
        n = max(3, args.docs // 100)
        changed = change(db, name, args.docs, args.dim, n, seed=time.time_ns() % 2**32)
        refreshed = run_probe(db, cfg)
        gt = refreshed.ground_truth or {}
        incremental = lists(db, args.k)
        with db.connect() as c:
            c.execute("DELETE FROM pgeval.ground_truth WHERE target = %s", (TARGET,))
            c.commit()
        full = run_probe(db, cfg)
        fg = full.ground_truth or {}
        same = lists(db, args.k) == incremental
        print(
            f"(b) after {changed} rows (1 %) changed ({n // 3} inserted, {n // 3} updated, "
            f"{n - 2 * (n // 3)} deleted): ground truth {gt.get('refresh')} "
            f"({gt.get('changed_rows')} rows changed, {gt.get('queries_recomputed')} queries in "
            f"full) in {gt.get('compute_ms', 0) / 1000:.3f} s (probe "
            f"{refreshed.wall_ms / 1000:.3f} s); full recomputation of the same queries: "
            f"{fg.get('compute_ms', 0) / 1000:.3f} s (probe {full.wall_ms / 1000:.3f} s); ratio "
            f"{gt.get('compute_ms', 0) / fg['compute_ms']:.2f}; the same top-{args.k} ids per "
            f"query: {same}"
        )
    finally:
        stop()


if __name__ == "__main__":
    main()
