"""Benchmark: how long the command line takes to start, against a floor measured in the same run.

Each variant is a new process, timed from its start to its exit:
  - floor: a script that imports click and psycopg, connects to the server and runs one SELECT
    (what any command line over PostgreSQL written with these two libraries pays)
  - `pgeval --help` (no connection: still compared with the floor, the issue's target)
  - `pgeval testset list` on the embedded server the benchmark started (found as a user's is,
    through PGEVAL_DATADIR: the server's postmaster.pid)
  - `pgeval --dsn URI testset list` (the connection string given: no server look-up)

The variants run alternated, round after round (one process of each per turn, --runs turns per
round), so that all see the same machine load; a round's time for a variant is the median of its
turns. Prints each round's ratios to the floor, their median (target <= 1.3) and the best times.
The commands run as ``python -m evaluator`` with this interpreter (what the ``pgeval`` script
runs, plus runpy's few milliseconds), with their bytecode compiled as an installed package has it
(the warm-up turn writes it even where PYTHONDONTWRITEBYTECODE is set).

Usage: python bench/startup.py [--rounds 5] [--runs 10] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _server  # noqa: E402

FLOOR = """
import sys
import click
import psycopg
with psycopg.connect(sys.argv[1]) as conn:
    rows = conn.execute("SELECT name, n_queries FROM pgeval.testset ORDER BY name").fetchall()
click.echo(f"{len(rows)} test sets")
"""

TARGET = 1.3


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    spent = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return spent


def _load_testsets(db, count: int) -> None:
    """``count`` small test sets, so that `testset list` prints a table (not its empty line)."""
    with db.connect(autocommit=True) as conn:
        conn.execute("DELETE FROM pgeval.testset WHERE name LIKE 'bench-startup-%'")
        for i in range(count):
            tid = conn.execute(
                "INSERT INTO pgeval.testset (name, content_hash, source_format) "
                "VALUES (%s, %s, 'jsonl') RETURNING testset_id",
                (f"bench-startup-{i}", f"h{i}"),
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO pgeval.query (testset_id, query_id, position) "
                "SELECT %s, 'q' || g, g FROM generate_series(1, 20) g",
                (tid,),
            )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10, help="turns of each variant per round")
    ap.add_argument("--testsets", type=int, default=3)
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()

    db, _tmp, stop = _server.start(args.dsn, "pgeval-bench-startup-")
    try:
        _load_testsets(db, args.testsets)
        uri = db.results_uri()
        env = dict(os.environ)  # PGEVAL_DATADIR names the bench's server (bench/_server.py)
        # an installed pgeval has its bytecode compiled (pip does it), as click and psycopg have:
        # a process that may not write it compiles every changed module at each start
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        pgeval = [sys.executable, "-m", "evaluator"]
        variants = {
            "floor": [sys.executable, "-c", FLOOR, uri],
            "pgeval --help": [*pgeval, "--help"],
            "pgeval testset list": [*pgeval, "testset", "list"],
            "pgeval --dsn URI testset list": [*pgeval, "--dsn", uri, "testset", "list"],
        }
        if args.dsn:  # no embedded server to find: every command is given the DSN
            del variants["pgeval testset list"]
        for cmd in variants.values():  # warm: the page cache, .pyc files
            _timed(cmd, env)
        rounds: dict[str, list[float]] = {name: [] for name in variants}
        best: dict[str, float] = {name: float("inf") for name in variants}
        for _ in range(args.rounds):
            turns: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(args.runs):
                for name, cmd in variants.items():
                    turns[name].append(_timed(cmd, env))
            for name, spent in turns.items():
                rounds[name].append(statistics.median(spent))
                best[name] = min(best[name], *spent)
        floors = rounds["floor"]
        print(
            f"floor (import click + psycopg, connect, one SELECT): median of rounds "
            f"{statistics.median(floors) * 1000:.0f} ms, best {best['floor'] * 1000:.0f} ms"
        )
        for name in variants:
            if name == "floor":
                continue
            ratios = [v / f for v, f in zip(rounds[name], floors)]
            print(
                f"{name}: median of rounds {statistics.median(rounds[name]) * 1000:.0f} ms, "
                f"best {best[name] * 1000:.0f} ms; / floor within each round: "
                + ", ".join(f"{r:.2f}" for r in ratios)
                + f" (median {statistics.median(ratios):.2f}, target <= {TARGET})"
            )
    finally:
        stop()


if __name__ == "__main__":
    main()
