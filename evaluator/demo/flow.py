"""The scripted tour behind `pgeval demo`: it builds a small knowledge base in schema
``pgeval_demo`` (chunks, 128-d feature-hashing embeddings, HNSW and BM25 indexes), writes a
graded test set, then runs the same `pgeval` commands a user would type, printing each one."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from ..errors import PgevalError

SCHEMA = "pgeval_demo"


def build_kb(database, corpus, *, diskann: bool) -> list[str]:
    """(Re)create pgeval_demo.chunks with its indexes; return the index kinds built."""
    from pgvector.psycopg import register_vector

    built = ["hnsw"]
    with database.connect(results=False, autocommit=True) as kb:
        kb.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        kb.execute(f"CREATE SCHEMA {SCHEMA}")
        register_vector(kb)
        dim = corpus.vectors.shape[1]
        kb.execute(f"CREATE TABLE {SCHEMA}.chunks (chunk_id text PRIMARY KEY, content text NOT NULL, "
                   f"embedding vector({dim}) NOT NULL)")
        with kb.cursor().copy(f"COPY {SCHEMA}.chunks (chunk_id, content, embedding) FROM STDIN "
                              "WITH (FORMAT BINARY)") as cp:
            cp.set_types(["text", "text", "vector"])
            for (cid, text), vec in zip(corpus.chunks, corpus.vectors):
                cp.write_row((cid, text, vec))
        kb.execute(f"CREATE INDEX chunks_hnsw ON {SCHEMA}.chunks USING hnsw "
                   "(embedding vector_cosine_ops) WITH (m = 8, ef_construction = 32)")
        has = {r[0] for r in kb.execute("SELECT extname FROM pg_extension")}
        if "pg_textsearch" in has:
            kb.execute(f"CREATE INDEX chunks_bm25 ON {SCHEMA}.chunks USING bm25 (content) "
                       "WITH (text_config = 'english')")
            built.append("bm25")
        else:
            built.append("bm25 (full-text fallback)")
        if diskann and "vectorscale" in has:
            kb.execute(f"CREATE INDEX chunks_diskann ON {SCHEMA}.chunks USING diskann "
                       "(embedding vector_cosine_ops)")
            built.append("diskann")
        kb.execute(f"ANALYZE {SCHEMA}.chunks")
    return built


def tour(database, global_args: list[str], workdir: Path, *, queries: int, repeat: int,
         diskann: bool, keep: bool) -> None:
    from ..cli import main
    from .corpus import generate

    def step(title: str, *args: str) -> None:
        click.secho(f"\n# {title}", fg="cyan", bold=True)
        click.secho("$ pgeval " + " ".join(shlex.quote(a) for a in args), bold=True)
        code = main([*global_args, *args])
        if code != 0:
            raise PgevalError(f"demo step failed: pgeval {' '.join(args)} (exit {code})")

    workdir.mkdir(parents=True, exist_ok=True)
    step("create schema pgeval (tables + SQL metric functions)", "init")
    corpus = generate(n_queries=queries)
    click.secho(f"\n# a generated knowledge base: {len(corpus.chunks)} chunks in "
                f"{SCHEMA}.chunks, {corpus.vectors.shape[1]}-d embeddings", fg="cyan", bold=True)
    built = build_kb(database, corpus, diskann=diskann)
    click.echo(f"indexes: {', '.join(built)}")
    cases = workdir / "demo-cases.jsonl"
    cases.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in corpus.queries),
                     encoding="utf-8")
    click.echo(f"test set written to {cases}")
    step("load the graded test set", "testset", "load", str(cases), "--name", "demo", "--replace")
    step("describe the knowledge-base table", "target", "add", "demo", "--schema", SCHEMA,
         "--table", "chunks", "--id-column", "chunk_id", "--vector-column", "embedding",
         "--text-column", "content", "--distance", "cosine", "--replace")
    stages = "exact,hnsw," + ("diskann," if "diskann" in built else "") + "bm25,merge"
    experiment = "demo-" + __import__("datetime").datetime.now().strftime("%Y%m%d-%H%M%S")
    step("run the retrieval pipeline inside the database", "run", "pipeline", "--testset", "demo",
         "--target", "demo", "--stages", stages, "--set", "hnsw.ef_search=40", "--depth", "50",
         "--repeat", str(repeat), "--name", experiment,
         # two vector indexes on one column: each ANN stage drops the other inside its own
         # transaction and rolls back (fine for a demo; on production use a copy per index)
         *(["--isolate-index"] if "diskann" in built else []))
    step("where are relevant chunks lost?", "stage-report", experiment)
    step("the final stage's metrics, by query type", "metrics", f"{experiment}.merge.1",
         "--by-type")
    if not keep:
        with database.connect(results=False, autocommit=True) as kb:
            kb.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        click.echo(f"\n(dropped schema {SCHEMA}; runs stay in schema pgeval — `pgeval run list`)")
