"""Benchmark: what the change log (`pgeval target track`) costs the application's writes.

On a fresh table of --dim-dimension vectors (the embedded server unless --dsn), measured in the
same run, tracked and untracked alternated, each first in every other round (the machine is shared: absolute times move):

(a) --statements single-row INSERT statements, each its own transaction (autocommit): the worst
    case, one log row appended per row written;
(b) one INSERT ... SELECT of --rows rows: one log row for the whole statement;
(c) --statements single-row UPDATEs inside one transaction.

Each line prints tracked / untracked, the median over --rounds.

Usage: python bench/change_log_overhead.py [--dim 384] [--statements 2000] [--rows 20000]
       [--rounds 5] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TABLE = "bench_change_log"


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--statements", type=int, default=2000)
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dsn", default=None)
    return p.parse_args()


def workloads(c, args, tag: str) -> dict[str, float]:
    """Seconds of each workload on the table as it is (tracked or not)."""
    vec = "[" + ",".join(["0.5"] * args.dim) + "]"
    out = {}
    t = time.perf_counter()
    for i in range(args.statements):
        c.execute(f"INSERT INTO {TABLE} (id, e) VALUES (%s, %s)", (f"{tag}-{i}", vec))
    out["a"] = time.perf_counter() - t
    t = time.perf_counter()
    c.execute(
        f"INSERT INTO {TABLE} (id, e) SELECT %s || g, %s FROM generate_series(1, %s) g",
        (f"{tag}-bulk-", vec, args.rows),
    )
    out["b"] = time.perf_counter() - t
    t = time.perf_counter()
    with c.transaction():
        for i in range(args.statements):
            c.execute(f"UPDATE {TABLE} SET e = %s WHERE id = %s", (vec, f"{tag}-{i}"))
    out["c"] = time.perf_counter() - t
    c.execute(f"TRUNCATE {TABLE}")
    return out


def main() -> None:
    import _server

    from evaluator.table import change_log
    from evaluator.targets.targets import Target

    args = arguments()
    db, _, stop = _server.start(args.dsn, "pgeval-bench-log-")
    try:
        target = Target(name="bench-log", table=TABLE, id_column="id", vector_column="e")
        with db.connect(results=False, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS {TABLE}")
            c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({args.dim}))")
            ratios: dict[str, list[float]] = {"a": [], "b": [], "c": []}
            workloads(c, args, "warm")
            for r in range(args.rounds):  # which goes first alternates
                if r % 2:
                    plain = workloads(c, args, f"p{r}")
                with db.connect(results=False) as kb:
                    change_log.install(kb, target)
                tracked = workloads(c, args, f"t{r}")
                with db.connect(results=False) as kb:
                    change_log.remove(kb, target)
                if not r % 2:
                    plain = workloads(c, args, f"p{r}")
                for k in ratios:
                    ratios[k].append(tracked[k] / plain[k])
            c.execute(f"DROP TABLE {TABLE}")
        names = {
            "a": f"(a) {args.statements} single-row INSERTs, autocommit",
            "b": f"(b) one INSERT ... SELECT of {args.rows} rows",
            "c": f"(c) {args.statements} single-row UPDATEs in one transaction",
        }
        print(f"{args.dim}-d vectors, {args.rounds} rounds, tracked / untracked (median):")
        for k, name in names.items():
            each = ", ".join(f"{x:.2f}" for x in ratios[k])
            print(f"{name}: {statistics.median(ratios[k]):.2f} ({each})")
    finally:
        stop()


if __name__ == "__main__":
    main()
