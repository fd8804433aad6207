"""Benchmark: "is the data unchanged?" with the change log against the version scan.

On a fresh table of --rows x --dim random vectors (the embedded server unless --dsn), measured in
the same run: the data checksum's read on the unchanged table (`evaluator.table.data_checksum`,
the cache filled first) by the version scan (a pass over every row version), then with the
table's change log (`pgeval target track`: the log's count, no read of the table). Prints each
read, the medians and their ratio.

Usage: python bench/data_version.py [--rows 200000] [--dim 384] [--reads 5] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TABLE = "bench_data_version"


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--reads", type=int, default=5)
    p.add_argument("--dsn", default=None)
    return p.parse_args()


def main() -> None:
    import _server

    from evaluator.table import change_log
    from evaluator.table import data_checksum as dc
    from evaluator.targets.targets import Target

    args = arguments()
    db, _, stop = _server.start(args.dsn, "pgeval-bench-version-")
    target = Target(name="bench-version", table=TABLE, id_column="id", vector_column="e")
    try:
        with db.connect(results=False, autocommit=True) as c:
            t0 = time.perf_counter()
            c.execute(f"DROP TABLE IF EXISTS {TABLE}")
            c.execute(f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, e vector({args.dim}))")
            c.execute(
                f"INSERT INTO {TABLE} SELECT g, (SELECT array_agg(random()::real) FROM "
                f"generate_series(1, {args.dim}) WHERE g > 0)::vector({args.dim}) "
                "FROM generate_series(1, %s) g",
                (args.rows,),
            )
            c.execute(f"VACUUM ANALYZE {TABLE}")
            size = c.execute(f"SELECT pg_size_pretty(pg_table_size('{TABLE}'))").fetchone()[0]
        print(
            f"{args.rows} rows x {args.dim} dims ({size}), built in {time.perf_counter() - t0:.0f} s"
        )

        def reads(n: int) -> list[float]:
            out = []
            with db.connect(results=False) as kb:
                for _ in range(n):
                    t = time.perf_counter()
                    dc.measure(kb, target, cache=dc.ChecksumCache(database=db))
                    kb.rollback()
                    out.append((time.perf_counter() - t) * 1000.0)
            return out

        reads(1)  # the checksum computed and cached
        scan = reads(args.reads)
        with db.connect(results=False) as kb:
            change_log.install(kb, target)
        reads(1)  # the log's count cached with it
        logged = reads(args.reads)
        a, b = statistics.median(scan), statistics.median(logged)
        print("version scan, ms: " + ", ".join(f"{x:.1f}" for x in scan))
        print("change log, ms:   " + ", ".join(f"{x:.1f}" for x in logged))
        print(f"median {a:.1f} ms against {b:.1f} ms: the change log reads it {a / b:.0f}x faster")
        with db.connect(results=False, autocommit=True) as c:
            c.execute(f"DROP TABLE {TABLE}")
    finally:
        stop()


if __name__ == "__main__":
    main()
