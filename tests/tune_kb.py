"""The Cranfield demo collection shipped with pgeval (evaluator/demo/data) as a pipeline
experiment for the tune tests and bench: the demo's table (HNSW and BM25 indexes), its test set
and target, and `run pipeline --stages exact,hnsw,bm25,merge,rerank` with the demo's settings
(hnsw.ef_search=10, depth 50) and the exact reranker (no HTTP peer needed)."""

from __future__ import annotations

import json
from pathlib import Path

from evaluator.demo.flow import TARGET_ARGS

STAGES = "exact,hnsw,bm25,merge,rerank"


def cli(*args: str) -> tuple[int, str, str]:
    """The CLI in-process: (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    from evaluator.cli import main

    runner = CliRunner()
    with runner.isolation() as streams:
        code = main(list(args))
    return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()


def ok(*args: str) -> str:
    code, out, err = cli(*args)
    assert code == 0, (args, err)
    return out


def pipeline(name: str, *opts: str, stages: str = STAGES) -> str:
    """`run pipeline` on the collection (its own experiment ``name``)."""
    return ok(
        "run", "pipeline", "--testset", "cran", "--target", "cran", "--stages", stages,
        "--set", "hnsw.ef_search=10", "--depth", "50", "--repeat", "1", "--opt", "rerank:reranker=exact",
        "--opt", "rerank:top_n=30", "--name", name, *opts,
    )  # fmt: skip


def build(database, workdir: Path, experiment: str = "cran-exp") -> str:
    """Load the collection, its test set and target; run the experiment; return its name."""
    from evaluator.demo import cranfield, flow

    with database.connect(autocommit=True) as c:
        c.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
    corpus = cranfield.load()
    flow.build_kb(database, corpus, diskann=False)
    cases = workdir / "cran.jsonl"
    cases.write_text("".join(json.dumps(q) + "\n" for q in corpus.queries), encoding="utf-8")
    ok("testset", "load", str(cases), "--name", "cran", "--grade-map", cranfield.GRADE_MAP_SPEC)
    ok("target", "add", "cran", *TARGET_ARGS)
    pipeline(experiment)
    return experiment
