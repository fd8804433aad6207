"""Benchmark: pgeval's SQL metrics against pytrec_eval and ranx, measured in the same run.

10,000 queries x 100 ranked chunks, ~10 judgements per query with grades 0-3. Prints:
  (a) pgeval SQL computing the default metric set and MAP beside it (map, map@10) for a run
      already stored (pgeval.summary + pgeval.run_counts) vs (b) pytrec_eval evaluate and
      (c) ranx evaluate, each computing the same measures  -> ratios
      (target: pgeval / pytrec_eval <= 0.25)
  end to end: `pgeval metrics RUN` as a new process vs pytrec_eval parsing + evaluating the
      same files (target ratio <= 0.5)
  import of the 1,000,000-row run with `pgeval run import` (target >= 500k rows/s)

Usage: python bench/metrics_vs_peers.py [--queries 10000] [--depth 100] [--repeat 3]
Uses a temporary embedded server (or --dsn).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _server  # noqa: E402

warnings.filterwarnings("ignore")


MAP = ["map", "map@10"]  # beside the default measures, in every tool


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--judged", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()

    from evaluator.run.runs import import_run

    db, tmp, stop = _server.start(args.dsn, "pgeval-bench-")
    rng = random.Random(7)
    nq, depth = args.queries, args.depth
    qrels, run = {}, {}
    qrel_lines, run_lines = [], []
    for q in range(nq):
        qid = f"q{q}"
        pool = [f"d{rng.randrange(100_000)}" for _ in range(depth * 2)]
        pool = list(dict.fromkeys(pool))
        ranked = pool[:depth]
        judged = (
            rng.sample(ranked[:40], k=min(args.judged // 2, 40))
            + pool[depth : depth + args.judged // 2]
        )
        qrels[qid] = {d: rng.randint(0, 3) for d in judged}
        qrels[qid][judged[0]] = max(1, qrels[qid][judged[0]])
        run[qid] = {d: float(depth - i) for i, d in enumerate(ranked)}
        qrel_lines += [f"{qid} 0 {d} {g}\n" for d, g in qrels[qid].items()]
        run_lines += [f"{qid} Q0 {d} {i + 1} {depth - i} bench\n" for i, d in enumerate(ranked)]
    qrel_file, run_file = tmp / "bench.qrels", tmp / "bench.run"
    qrel_file.write_text("".join(qrel_lines))
    run_file.write_text("".join(run_lines))
    print(f"data: {nq} queries, {len(run_lines)} ranked rows, {len(qrel_lines)} judgements")

    with db.connect(autocommit=True) as conn:
        conn.execute("DELETE FROM pgeval.testset WHERE name = 'bench'")
        tid = conn.execute(
            "INSERT INTO pgeval.testset (name, content_hash, source_format) "
            "VALUES ('bench', 'bench', 'trec') RETURNING testset_id"
        ).fetchone()[0]
        with conn.cursor().copy(
            "COPY pgeval.query (testset_id, query_id, position) FROM STDIN"
        ) as cp:
            for i, q in enumerate(qrels):
                cp.write_row((tid, q, i + 1))
        with conn.cursor().copy(
            "COPY pgeval.qrel (testset_id, query_id, chunk_id, grade) FROM STDIN"
        ) as cp:
            for q, g in qrels.items():
                for d, v in g.items():
                    cp.write_row((tid, q, d, v))
        conn.execute("SELECT pgeval.refresh_ideal(%s)", (tid,))
        conn.execute("VACUUM ANALYZE pgeval.qrel")
        conn.execute("VACUUM ANALYZE pgeval.query")

        t = time.perf_counter()
        import_run(conn, run_file, "bench", "bench-run", "trec", replace=True)
        t_import = time.perf_counter() - t
        conn.execute("VACUUM ANALYZE pgeval.result_list")
        rid = conn.execute("SELECT run_id FROM pgeval.run WHERE name = 'bench-run'").fetchone()[0]

        def sql_metrics():
            conn.execute(
                "SELECT * FROM pgeval.summary(%s, pgeval.default_measures() || %s::text[])",
                (rid, MAP),
            ).fetchall()
            conn.execute("SELECT * FROM pgeval.run_counts(%s)", (rid,)).fetchall()

        sql_metrics()
        t_sql, _ = best(sql_metrics, args.repeat)

    import pytrec_eval

    measures = {
        "recall_3",
        "recall_5",
        "recall_10",
        "ndcg_cut_5",
        "ndcg_cut_10",
        "recip_rank",
        "P_3",
        "P_5",
        "P_10",
        "map",
        "map_cut_10",
    }
    relabelled = {q: {d: 2**g - 1 for d, g in v.items()} for q, v in qrels.items()}

    def trec_eval():
        pytrec_eval.RelevanceEvaluator(relabelled, measures).evaluate(run)

    t_trec, _ = best(trec_eval, args.repeat)

    def trec_parse_eval():
        q, r = {}, {}
        with open(qrel_file) as fh:
            for line in fh:
                a, _, d, g = line.split()
                q.setdefault(a, {})[d] = 2 ** int(g) - 1
        with open(run_file) as fh:
            for line in fh:
                a, _, d, _, s, _ = line.split()
                r.setdefault(a, {})[d] = float(s)
        pytrec_eval.RelevanceEvaluator(q, measures).evaluate(r)

    t_trec_full, _ = best(trec_parse_eval, args.repeat)

    t_ranx = None
    try:
        from ranx import Qrels, Run, evaluate

        rq, rr = Qrels(relabelled), Run(run)
        ranx_metrics = [
            "recall@3",
            "recall@5",
            "recall@10",
            "ndcg@5",
            "ndcg@10",
            "mrr@20",
            "precision@3",
            "precision@5",
            "precision@10",
            "map",
            "map@10",
        ]
        evaluate(rq, rr, ranx_metrics)  # numba warm-up (JIT compile) outside the timing

        def ranx_eval():
            evaluate(rq, rr, ranx_metrics)

        t_ranx, _ = best(ranx_eval, args.repeat)
    except ImportError:
        pass

    env = dict(os.environ)
    cmd = [
        sys.executable,
        "-m",
        "evaluator",
        "--dsn",
        db.results_uri(),
        "metrics",
        "bench-run",
        "--measures",
        ",".join(MAP),
        "--format",
        "json",
    ]
    subprocess.run(cmd, env=env, check=True, capture_output=True)

    def cli():
        subprocess.run(cmd, env=env, check=True, capture_output=True)

    t_cli, _ = best(cli, args.repeat)

    rows = len(run_lines)
    print(f"(a) pgeval SQL metrics (stored run):   {t_sql:8.3f} s")
    print(
        f"(b) pytrec_eval evaluate:              {t_trec:8.3f} s   ratio a/b = {t_sql / t_trec:.3f} (target <= 0.25)"
    )
    if t_ranx is not None:
        print(
            f"(c) ranx evaluate (after JIT warm-up): {t_ranx:8.3f} s   ratio a/c = {t_sql / t_ranx:.3f}"
        )
    print(f"end to end `pgeval metrics RUN`:       {t_cli:8.3f} s")
    print(
        f"pytrec_eval parse + evaluate:          {t_trec_full:8.3f} s   ratio = {t_cli / t_trec_full:.3f} (target <= 0.5)"
    )
    print(
        f"run import: {rows} rows in {t_import:.3f} s = {rows / t_import:,.0f} rows/s (target >= 500,000)"
    )
    stop()


if __name__ == "__main__":
    main()
