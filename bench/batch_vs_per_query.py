"""Benchmark: `--batch` (one set-based statement, LATERAL over the queries) against per-query mode
(one prepared statement and one round trip per query) on the same stage, same queries.

Prints wall times of `run_pipeline` for the exact and hnsw stages in both modes and the speed-up
(per-query / batch), and checks that both modes stored the same ranked lists (exact and hnsw
are deterministic; DiskANN rescans inside one statement may differ, so it is not measured here).

Usage: python bench/batch_vs_per_query.py [--docs 20000] [--queries 1000] [--depth 100]
"""

from __future__ import annotations

import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _vector_kb as vkb  # noqa: E402

_names = itertools.count(1)


def pipeline(db, stage, depth, ef, batch):
    from evaluator.run.pipeline import PipelineConfig, run_pipeline

    name = f"bench-{stage}-{'b' if batch else 'q'}{next(_names)}"
    run_pipeline(
        db,
        PipelineConfig(
            testset="bench",
            target="bench",
            stages=stage,
            depth=depth,
            repeat=1,
            settings={"hnsw.ef_search": str(ef)},
            name=name,
            batch=batch,
            checksum=False,
        ),
    )
    return f"{name}.{stage}.1"


def same_lists(db, a, b) -> bool:
    with db.connect() as c:
        return c.execute(
            "SELECT count(*) = 0 FROM (SELECT query_id, rank, chunk_id FROM pgeval.result JOIN "
            "pgeval.run USING (run_id) WHERE name = %s EXCEPT SELECT query_id, rank, chunk_id "
            "FROM pgeval.result JOIN pgeval.run USING (run_id) WHERE name = %s) d",
            (a, b),
        ).fetchone()[0]


def main() -> None:
    args = vkb.arguments(__doc__.splitlines()[0])
    db, cleanup, desc = vkb.setup(args)
    try:
        print(desc)
        for stage in ("exact", "hnsw"):
            names = {}

            def timed(batch):
                names[batch] = pipeline(db, stage, args.depth, args.ef_search, batch)  # noqa: B023 (called within the iteration)

            timed(False)  # warm-up
            per_query = vkb.best_of(lambda: timed(False), args.repeat)
            batch = vkb.best_of(lambda: timed(True), args.repeat)
            same = same_lists(db, names[False], names[True])
            print(
                f"{stage:6s} per-query {per_query:8.3f} s   batch {batch:8.3f} s   "
                f"speed-up {per_query / batch:5.2f}x   same ranked lists: {same}"
            )
    finally:
        cleanup()


if __name__ == "__main__":
    main()
