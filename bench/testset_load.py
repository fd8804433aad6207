"""Benchmark: loading a test set against just parsing the same file with the usual peers,
measured in the same run.

Generates N queries x J judgements (default 100,000 x 10 = 1,000,000 judgements) as JSONL and as
TREC qrels + queries TSV in a temporary folder. For each format it runs, each in its own process:
  - `pgeval testset load` end to end (process start, streaming COPY into a staging table, every
    check, insert into pgeval.query/qrel, ideal DCG, commit): wall time, judgements/s, peak RSS
  - the same at N/10, to show that memory does not grow with the file (constant-memory streaming)
  - the peer, parse only (no checks, nothing stored): `json.loads` of every JSONL line into a
    {query: {chunk: grade}} dict / `pytrec_eval.parse_qrel`: time (measured inside the process,
    start-up excluded) and peak RSS
and prints the ratios pgeval load / peer parse.

Usage: python bench/testset_load.py [--queries 100000] [--judged 10] [--dsn DSN]
Uses a temporary embedded server unless --dsn is given (then it writes test sets named
bench-*, and deletes them at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _server  # noqa: E402

warnings.filterwarnings("ignore")

PEER_JSON = """
import json, sys, time
t = time.perf_counter()
qrels = {}
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        r = json.loads(line)
        qrels[r["id"]] = r["relevant"]
print(time.perf_counter() - t, sum(len(v) for v in qrels.values()))
"""
PEER_TREC = """
import sys, time
import pytrec_eval
t = time.perf_counter()
with open(sys.argv[1], encoding="utf-8") as f:
    qrels = pytrec_eval.parse_qrel(f)
print(time.perf_counter() - t, sum(len(v) for v in qrels.values()))
"""


def generate(folder: Path, nq: int, nj: int, seed: int = 7) -> tuple[Path, Path, Path]:
    rng = random.Random(seed)
    jsonl, qrels, tsv = (folder / f"cases-{nq}{ext}" for ext in (".jsonl", ".qrels", ".tsv"))
    with (
        open(jsonl, "w", encoding="utf-8") as fj,
        open(qrels, "w", encoding="utf-8") as fq,
        open(tsv, "w", encoding="utf-8") as ft,
    ):
        for q in range(nq):
            qid = f"q{q}"
            chunks = rng.sample(range(1_000_000), nj)
            grades = [rng.choice((0, 1, 1, 2, 3)) for _ in chunks]
            grades[0] = max(grades[0], 1)
            text = f"query {q} 退款多久到账 how long does a refund take"
            fj.write(
                json.dumps(
                    {
                        "id": qid,
                        "query": text,
                        "relevant": {f"c{c}": g for c, g in zip(chunks, grades)},
                        "type": ["fuzzy"],
                    },
                    ensure_ascii=False,
                )
            )
            fj.write("\n")
            fq.writelines(f"{qid} 0 c{c} {g}\n" for c, g in zip(chunks, grades))
            ft.write(f"{qid}\t{text}\n")
    return jsonl, qrels, tsv


MEASURE = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": proc.returncode, "wall": wall, "out": proc.stdout, "err": proc.stderr,
                  "rss": rss / 2**20 if sys.platform == "darwin" else rss / 1024}))
"""


def measure(argv: list[str]) -> tuple[float, float, str]:
    """Run argv in a wrapper process; return (wall seconds, peak RSS of argv in MiB, stdout)."""
    res = json.loads(
        subprocess.run(
            [sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True
        ).stdout
    )
    if res["rc"] != 0:
        sys.exit(f"{' '.join(argv[:6])} ... failed ({res['rc']}): {res['err'].strip()}")
    return res["wall"], res["rss"], res["out"]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--judged", type=int, default=10)
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()

    db, tmp, stop = _server.start(args.dsn, "pgeval-tsbench-")
    dsn = db.results_uri()
    nq, nj = args.queries, args.judged
    small_nq = max(nq // 10, 1)
    big, small = generate(tmp, nq, nj), generate(tmp, small_nq, nj)
    total = nq * nj
    print(
        f"{nq:,} queries x {nj} judgements = {total:,} judgements "
        f"(JSONL {big[0].stat().st_size / 2**20:.0f} MiB, qrels "
        f"{big[1].stat().st_size / 2**20:.0f} MiB); pgeval runs as `pgeval testset load`, "
        "each tool in its own process"
    )
    with db.connect(autocommit=True) as conn:
        conn.execute("DELETE FROM pgeval.testset WHERE name LIKE 'bench-%'")
    cases = [
        ("JSONL", 0, [], PEER_JSON, "json.loads into a dict"),
        ("TREC", 1, ["--queries"], PEER_TREC, "pytrec_eval.parse_qrel"),
    ]
    for label, idx, extra, peer, peer_name in cases:

        def argv(files):
            return [*extra, str(files[2])] if extra else []  # noqa: B023 (called within the iteration)

        load_argv = [
            sys.executable,
            "-m",
            "evaluator",
            "--dsn",
            dsn,
            "testset",
            "load",
            "--output",
            "json",
        ]
        wall, rss_big, out = measure(
            [*load_argv, str(big[idx]), "--name", f"bench-{label}", *argv(big)]
        )
        assert json.loads(out)["n_judgements"] == total
        _, rss_small, _ = measure(
            [*load_argv, str(small[idx]), "--name", f"bench-{label}-small", *argv(small)]
        )
        _, rss_peer, out = measure([sys.executable, "-c", peer, str(big[idx])])
        t_peer, n_peer = float(out.split()[0]), int(out.split()[1])
        assert n_peer == total, n_peer
        print(
            f"\n{label}: pgeval testset load   {wall:7.2f} s {total / wall:>11,.0f} judgements/s"
            f"  peak RSS {rss_big:5.0f} MiB ({rss_small:.0f} MiB at {small_nq:,} queries)"
        )
        print(
            f"{label}: {peer_name:<22} {t_peer:7.2f} s {total / t_peer:>11,.0f} judgements/s"
            f"  peak RSS {rss_peer:5.0f} MiB  (parse only: no checks, nothing stored)"
        )
        print(
            f"{label}: ratio pgeval load / peer parse: time {wall / t_peer:.1f}x, "
            f"peak RSS {rss_big / rss_peer:.2f}x"
        )
        with db.connect(autocommit=True) as conn:
            conn.execute("DELETE FROM pgeval.testset WHERE name LIKE 'bench-%'")
    stop()


if __name__ == "__main__":
    main()
