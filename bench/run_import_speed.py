"""Benchmark: `run import` of a TREC run file against its floor, measured in the same run.

Generates N queries x D results (default 10,000 x 100 = 1,000,000 rows) as a TREC run over a test
set of N queries (J judgements each) and measures, on the same server:
  - floor: Python parsing the file (pgeval's own TREC parser, the very function `run import`
    calls, every check) and binary COPY of every row (query, chunk, score, line) into an
    unindexed table (no ranking, no duplicate check, nothing else)
  - plain floor: the peer as the issue measured it, a plain Python parse (str.split per line,
    float() of the score, no checks) and the same binary COPY
  - `import_run` (parse, duplicate check, ranking, judged grades, one ranked list per query by
    binary COPY, commit)
  - the metrics of that run (what `pgeval metrics` computes)
  - `run list` and `run delete` of that run (time independent of the stored results: counts are
    kept on pgeval.run)
and prints the ratios import / floor and import / plain floor (target <= 1.0), round by round with
their median, and the process's peak RSS.

Usage: python bench/run_import_speed.py [--queries 10000] [--depth 100] [--judged 10] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _server  # noqa: E402


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

    from evaluator.measure.metrics import evaluate
    from evaluator.run.runs import delete_run, import_run, list_runs
    from evaluator.run.trec_lines import trec_segments

    db, tmp, stop = _server.start(args.dsn, "pgeval-bench-import-")
    try:
        rng = random.Random(7)
        run_file = tmp / "bench.run"
        with open(run_file, "w") as f:
            for q in range(args.queries):
                for i, d in enumerate(rng.sample(range(100_000), args.depth)):
                    f.write(f"q{q} Q0 d{d} {i + 1} {args.depth - i + rng.random():.6f} bench\n")
        print(f"data: {args.queries} queries x {args.depth} = {args.queries * args.depth} rows")
        with db.connect(autocommit=True) as conn:
            conn.execute("DELETE FROM pgeval.testset WHERE name = 'bench-import'")
            tid = conn.execute(
                "INSERT INTO pgeval.testset (name, content_hash, source_format) "
                "VALUES ('bench-import', 'b', 'trec') RETURNING testset_id"
            ).fetchone()[0]
            with conn.cursor().copy(
                "COPY pgeval.query (testset_id, query_id, position) FROM STDIN"
            ) as cp:
                for q in range(args.queries):
                    cp.write_row((tid, f"q{q}", q + 1))
            with conn.cursor().copy(
                "COPY pgeval.qrel (testset_id, query_id, chunk_id, grade) FROM STDIN"
            ) as cp:
                for q in range(args.queries):
                    for d in rng.sample(range(100_000), args.judged):
                        cp.write_row((tid, f"q{q}", f"d{d}", rng.randint(0, 3)))
            conn.execute("SELECT pgeval.refresh_ideal(%s)", (tid,))
            conn.execute("VACUUM ANALYZE pgeval.qrel")

        @contextmanager
        def copy_floor(spent: list[float]):
            """A binary COPY into a table as pgeval's own (logged: its rows are written to the
            WAL), unindexed; the seconds from its start to the commit go to ``spent``. The
            floors' loops stay inline: a generator between them and COPY would slow the peer."""
            with db.connect() as conn:
                conn.execute("DROP TABLE IF EXISTS bench_floor")
                conn.execute(
                    'CREATE TABLE bench_floor (query_id text COLLATE "C", '
                    'chunk_id text COLLATE "C", score float8, line int)'
                )
                conn.commit()
                t = time.perf_counter()
                with conn.cursor().copy("COPY bench_floor FROM STDIN (FORMAT BINARY)") as cp:
                    cp.set_types(["text", "text", "float8", "int4"])
                    yield cp
                conn.commit()
                spent.append(time.perf_counter() - t)

        def floor() -> float:
            """pgeval's own TREC parser, every check, and the COPY."""
            spent: list[float] = []
            with copy_floor(spent) as cp:
                for segment in trec_segments(run_file):
                    for row in zip(*segment):
                        cp.write_row(row)
            return spent[0]

        def floor_plain() -> float:
            """The peer as the issue measured it: a plain Python parse (str.split per line,
            float() of the score, no checks) and the same binary COPY."""
            spent: list[float] = []
            with copy_floor(spent) as cp, open(run_file, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    q, _, doc, _, score, _ = line.split()
                    cp.write_row((q, doc, float(score), n))
            return spent[0]

        def pgeval_import() -> float:
            with db.connect() as conn:  # a run of its own name: the previous one is deleted
                conn.execute("DELETE FROM pgeval.run WHERE name = 'bench-import-run'")
                conn.commit()  # untimed, as the floor's DROP TABLE; and as DROP TABLE frees the
                conn.autocommit = True  # floor's rows, VACUUM frees the deleted run's (else
                conn.execute("VACUUM pgeval.result_list")  # autovacuum does it during a round)
                conn.autocommit = False
                t = time.perf_counter()
                import_run(conn, run_file, "bench-import", "bench-import-run", "trec")
                conn.commit()
                return time.perf_counter() - t

        floors, plains, imports = [], [], []
        for _ in range(args.repeat):  # interleaved: all see the same machine load
            floors.append(floor())
            plains.append(floor_plain())
            imports.append(pgeval_import())
        f, p, i = min(floors), min(plains), min(imports)
        for label, peers in (("floor", floors), ("plain floor", plains)):
            ratios = [b / a for a, b in zip(peers, imports)]
            print(
                f"import / {label} within each round: "
                + ", ".join(f"{r:.2f}" for r in ratios)
                + f" (median {statistics.median(ratios):.2f})"
            )
        rows = args.queries * args.depth
        print(f"floor (parse + binary COPY, unindexed): {f:.2f} s ({rows / f:,.0f} rows/s)")
        print(f"pgeval run import:                      {i:.2f} s ({rows / i:,.0f} rows/s)")
        print(f"plain floor (str.split parse + binary COPY): {p:.2f} s ({rows / p:,.0f} rows/s)")
        print(f"ratio import / floor: {i / f:.2f} (target <= 1.0)")
        print(f"ratio import / plain floor: {i / p:.2f} (the issue's peer: target <= 1.0)")
        with db.connect() as conn:
            t = time.perf_counter()
            report = evaluate(conn, "bench-import-run")  # what `pgeval metrics` computes
            t_metrics = time.perf_counter() - t
            print(
                f"metrics of the imported run: {t_metrics:.2f} s "
                f"({len(report.summary)} measures, nDCG@10 {report.summary.get('ndcg@10')})"
            )
            t = time.perf_counter()
            listed = list_runs(conn)
            t_list = time.perf_counter() - t
            assert [r["queries"] for r in listed if r["run"] == "bench-import-run"] == [
                args.queries
            ]
            t = time.perf_counter()
            delete_run(conn, "bench-import-run")
            conn.commit()
            t_delete = time.perf_counter() - t
        print(f"run list: {t_list * 1000:.1f} ms; run delete: {t_delete * 1000:.1f} ms")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of this process: {peak:.0f} MiB")
    finally:
        stop()


if __name__ == "__main__":
    main()
