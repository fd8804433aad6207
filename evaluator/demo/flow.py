"""The scripted tour behind `pgeval demo`: it builds a small knowledge base in schema
``pgeval_demo`` (chunks, 128-d feature-hashing embeddings, HNSW and BM25 indexes), writes a
graded test set, then runs the same `pgeval` commands a user would type, printing each one.

The demo touches only what it created: the schema carries a comment saying the demo made it (a
``pgeval_demo`` schema without it is refused, never dropped); the test set and the target are
named ``demo`` when that name is free or already holds exactly the demo's content, else
``demo-2``, ``demo-3``, ... (nothing is loaded or added with ``--replace``). Without ``--keep``
the schema and the target this run added are removed at the end, the runs stay."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from ..core.errors import PgevalError

SCHEMA = "pgeval_demo"
MARK = "created by pgeval demo"        # COMMENT ON SCHEMA: the demo may drop it


def _drop_own_schema(kb) -> None:
    """Drop schema pgeval_demo when the demo created it; refuse when someone else did."""
    row = kb.execute("SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace "
                     "WHERE nspname = %s", (SCHEMA,)).fetchone()
    if row is None:
        return
    if row[0] != MARK:
        raise PgevalError(f"schema {SCHEMA} exists and was not created by `pgeval demo`: the "
                          "demo will not touch it (rename it, or run the demo in another "
                          "database with --dsn)")
    kb.execute(f"DROP SCHEMA {SCHEMA} CASCADE")


def claim_name(try_create, base: str = "demo") -> str:
    """The first of ``base``, ``base-2``, ... that ``try_create(name)`` accepts: free, or holding
    exactly the demo's content (a Conflict means someone else's object: the next name)."""
    from ..core.errors import Conflict

    for i in range(1, 1000):
        name = base if i == 1 else f"{base}-{i}"
        try:
            try_create(name)
            return name
        except Conflict:
            continue
    raise PgevalError(f"no free name for the demo's objects ({base} to {base}-999 are taken)")


def build_kb(database, corpus, *, diskann: bool) -> list[str]:
    """(Re)create pgeval_demo.chunks with its indexes; return the index kinds built."""
    from pgvector.psycopg import register_vector

    built = ["hnsw"]
    with database.connect(results=False, autocommit=True) as kb:
        _drop_own_schema(kb)
        kb.execute(f"CREATE SCHEMA {SCHEMA}")
        kb.execute(f"COMMENT ON SCHEMA {SCHEMA} IS '{MARK}'")
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
    testset = claim_name(lambda n: _load_testset(database, cases, n))
    step("load the graded test set", "testset", "load", str(cases), "--name", testset)
    target_args = ["--schema", SCHEMA, "--table", "chunks", "--id-column", "chunk_id",
                   "--vector-column", "embedding", "--text-column", "content", "--distance",
                   "cosine"]
    created = []
    target = claim_name(lambda n: _add_target(database, n, created))
    step("describe the knowledge-base table", "target", "add", target, *target_args)
    stages = "exact,hnsw," + ("diskann," if "diskann" in built else "") + "bm25,merge"
    experiment = "demo-" + __import__("datetime").datetime.now().strftime("%Y%m%d-%H%M%S")
    step("run the retrieval pipeline inside the database", "run", "pipeline", "--testset", testset,
         "--target", target, "--stages", stages, "--set", "hnsw.ef_search=40", "--depth", "50",
         "--repeat", str(repeat), "--name", experiment,
         # two vector indexes on one column: each ANN stage drops the other inside its own
         # transaction and rolls back (fine for a demo; on production use a copy per index)
         *(["--isolate-index"] if "diskann" in built else []))
    step("where are relevant chunks lost?", "stage-report", experiment)
    step("the final stage's metrics, by query type", "metrics", f"{experiment}.merge.1",
         "--by-type")
    if not keep:
        with database.connect(results=False, autocommit=True) as kb:
            _drop_own_schema(kb)
        if created:       # a target left behind would name the table just dropped
            from ..target import targets

            with database.connect(autocommit=True) as conn:
                targets.remove(conn, target)
        click.echo(f"\n(dropped schema {SCHEMA}" + (f" and target {target}" if created else "")
                   + "; runs stay in schema pgeval — `pgeval run list`)")


def _load_testset(database, cases: Path, name: str) -> None:
    """Load the demo's test set under ``name`` unless another test set has that name (Conflict)."""
    from ..testset.store import load

    with database.connect() as conn:
        load(conn, cases, name)
        conn.commit()


def _add_target(database, name: str, created: list) -> None:
    """Add the demo's target under ``name`` unless another definition has it (Conflict); note in
    ``created`` whether this call added it."""
    from ..target import catalog, targets as t

    tg = t.Target(name=name, schema=SCHEMA, table="chunks", id_column="chunk_id",
                  vector_column="embedding", text_column="content", distance="cosine")
    with database.connect(results=False, autocommit=True, read_only=True) as kb:
        catalog.validate(kb, tg)
    with database.connect() as conn:
        existed = conn.execute("SELECT 1 FROM pgeval.target WHERE name = %s", (name,)).fetchone()
        conn.rollback()
        t.save(conn, tg)
        conn.commit()
    if not existed:
        created.append(name)
