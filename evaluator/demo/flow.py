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
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.errors import PgevalError, param

if TYPE_CHECKING:
    from collections.abc import Callable

    from psycopg import Connection

    from ..core.db import Database
    from .corpus import Corpus

SCHEMA = "pgeval_demo"
# `target add`'s options for the demo's table (tests/tune_kb.py adds the same target)
TARGET_ARGS = (
    "--schema", SCHEMA, "--table", "chunks", "--id-column", "chunk_id",
    "--vector-column", "embedding", "--text-column", "content", "--distance", "cosine",
)  # fmt: skip
MARK = "created by pgeval demo"  # COMMENT ON SCHEMA: the demo may drop it


def _drop_own_schema(kb: Connection) -> None:
    """Drop schema pgeval_demo when the demo created it; refuse when someone else did."""
    row = kb.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
        (SCHEMA,),
    ).fetchone()
    if row is None:
        return
    if row[0] != MARK:
        raise PgevalError(
            f"schema {SCHEMA} exists and was not created by `pgeval demo`: the "
            "demo will not touch it (rename it, or run the demo in another "
            f"database with {param('dsn')})"
        )
    kb.execute(f"DROP SCHEMA {SCHEMA} CASCADE")


def claim_name(try_create: Callable[[str], object], base: str = "demo") -> str:
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


INDEXES = {
    # small graph settings, so that ef_search=10 shows what an index loses on 1,400 rows
    "hnsw": "CREATE INDEX chunks_hnsw ON {s}.chunks USING hnsw (embedding vector_cosine_ops) "
    "WITH (m = 16, ef_construction = 64)",
    "bm25": "CREATE INDEX chunks_bm25 ON {s}.chunks USING bm25 (content) "
    "WITH (text_config = 'english')",
    "diskann": "CREATE INDEX chunks_diskann ON {s}.chunks USING diskann "
    "(embedding vector_cosine_ops)",
}


def build_kb(
    database: Database, corpus: Corpus, *, diskann: bool, echo: Callable[[str], None] | None = None
) -> list[str]:
    """(Re)create pgeval_demo.chunks with its indexes; return the index kinds built. ``echo``
    (when given) gets each statement before it runs."""
    from pgvector.psycopg import register_vector

    echo = echo or (lambda sql: None)
    built = ["hnsw"]
    with database.connect(results=False, autocommit=True) as kb:
        _drop_own_schema(kb)
        kb.execute(f"CREATE SCHEMA {SCHEMA}")
        kb.execute(f"COMMENT ON SCHEMA {SCHEMA} IS '{MARK}'")
        register_vector(kb)
        dim = corpus.vectors.shape[1]
        create = (
            f"CREATE TABLE {SCHEMA}.chunks (chunk_id text PRIMARY KEY, content text NOT "
            f"NULL, embedding vector({dim}) NOT NULL)"
        )
        echo(create)
        kb.execute(create)
        echo(
            f"COPY {SCHEMA}.chunks (chunk_id, content, embedding) FROM STDIN  "
            f"-- {len(corpus.chunks)} rows"
        )
        with kb.cursor().copy(
            f"COPY {SCHEMA}.chunks (chunk_id, content, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as cp:
            cp.set_types(["text", "text", "vector"])
            for (cid, text), vec in zip(corpus.chunks, corpus.vectors):
                cp.write_row((cid, text, vec))

        def index(kind: str) -> None:
            sql = INDEXES[kind].format(s=SCHEMA)
            echo(sql)
            kb.execute(sql)

        index("hnsw")
        has = {r[0] for r in kb.execute("SELECT extname FROM pg_extension")}
        if "pg_textsearch" in has:
            index("bm25")
            built.append("bm25")
        else:
            built.append("bm25 (full-text fallback)")
        if diskann and "vectorscale" in has:
            index("diskann")
            built.append("diskann")
        kb.execute(f"ANALYZE {SCHEMA}.chunks")
    return built


class Steps:
    """Prints each step's title and command, runs it, and prints its time."""

    def __init__(self, global_args: list[str]):
        self.global_args = global_args
        self.started = time.perf_counter()

    def title(self, text: str) -> None:
        from ..cli.output import text_width, wrapped

        lines = wrapped(text, None if (w := text_width()) is None else w - 2, indent=0)
        click.secho(
            "\n" + "\n".join(f"# {line}" for line in lines.splitlines()), fg="cyan", bold=True
        )

    def timed(self, since: float) -> None:
        click.secho(f"({time.perf_counter() - since:.1f} s)", dim=True)

    def run(self, title: str, *args: str) -> None:
        from ..cli import main
        from ..cli.output import echo_command

        self.title(title)
        echo_command("$ pgeval " + " ".join(shlex.quote(a) for a in args), bold=True)
        t0 = time.perf_counter()
        code = main([*self.global_args, *args])
        if code != 0:
            raise PgevalError(f"demo step failed: pgeval {' '.join(args)} (exit {code})")
        self.timed(t0)


def tour(
    database: Database,
    global_args: list[str],
    workdir: Path,
    *,
    corpus_name: str = "cranfield",
    queries: int | None = None,
    repeat: int = 1,
    diskann: bool = True,
    keep: bool = False,
    out: Path | None = None,
) -> None:
    """The tour on the Cranfield collection (``corpus_name='cranfield'``, the first ``queries``
    queries or all) or on the generated corpus (``'generated'``, ``queries`` of them). With
    ``out``, a short sweep with its plot and an HTML report are written there."""
    steps = Steps(global_args)
    workdir.mkdir(parents=True, exist_ok=True)
    steps.run("create schema pgeval (tables + SQL metric functions)", "init")
    t0 = time.perf_counter()
    if corpus_name == "cranfield":
        from . import cranfield

        corpus = cranfield.load()
        if queries:
            corpus.queries = corpus.queries[:queries]
        what = (
            f"the Cranfield collection (aeronautics abstracts, graded judgements) with "
            f"{cranfield.MODEL} embeddings"
        )
        load_args = ["--grade-map", cranfield.GRADE_MAP_SPEC]
    else:
        from .corpus import generate

        corpus = generate(n_queries=queries or 80)
        what = "a generated knowledge base (feature-hashing embeddings)"
        load_args = []
    steps.title(
        f"{what}: {len(corpus.chunks)} chunks into {SCHEMA}.chunks, "
        f"{corpus.vectors.shape[1]}-d vectors, then the indexes"
    )
    built = build_kb(database, corpus, diskann=diskann, echo=_echo_sql)
    steps.timed(t0)
    cases = workdir / "demo-cases.jsonl"
    cases.write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in corpus.queries), encoding="utf-8"
    )
    testset = claim_name(lambda n: _load_testset(database, cases, n, load_args))
    created: list[str] = []
    target = None
    try:
        steps.run(
            "load the graded test set", "testset", "load", str(cases), "--name", testset, *load_args
        )
        target = claim_name(lambda n: _add_target(database, n, created))
        steps.run("describe the knowledge-base table", "target", "add", target, *TARGET_ARGS)
        experiment = _experiment_name(database)
        _measure(steps, corpus, testset, target, built, experiment, repeat=repeat, out=out)
    finally:
        if not keep:
            _clean_up(database, target if created else None)
    _next_steps(database, keep)


def _echo_sql(sql: str) -> None:
    """A statement the demo runs, wrapped at words (a continued line indented)."""
    from ..cli.output import text_width, wrapped

    click.secho(wrapped(sql + ";", text_width(), indent=4), bold=True)


def _measure(
    steps: Steps,
    corpus: Corpus,
    testset: str,
    target: str,
    built: list[str],
    experiment: str,
    *,
    repeat: int,
    out: Path | None,
) -> None:
    # two vector indexes on one column: each ANN stage drops the other inside its own
    # transaction and rolls back (fine for a demo; on production use a copy per index)
    isolate = ["--isolate-index"] if "diskann" in built else []
    stages = "exact,hnsw," + ("diskann," if "diskann" in built else "") + "bm25,merge"
    steps.run(
        "run the retrieval pipeline inside the database (HNSW at a low ef_search)",
        *f"run pipeline --testset {testset} --target {target} --stages {stages} "
        f"--set hnsw.ef_search=10 --depth 50 --repeat {repeat} --name {experiment}".split(),
        *isolate,
    )
    steps.run("where are relevant chunks lost?", "stage-report", experiment)
    typed = any(q.get("type") for q in corpus.queries)
    steps.run(
        "the final stage's metrics" + (", by query type" if typed else ""),
        "metrics",
        f"{experiment}.merge.1",
        *(["--by-type"] if typed else []),
    )
    if out is not None:
        _out(steps, testset, target, experiment, out, isolate)
    _advise(steps, testset, target, out)


def _advise(steps: Steps, testset: str, target: str, out: Path | None) -> None:
    """The tour's last step: which index to have (two designs, the test set's queries)."""
    report = [] if out is None else ["--report", str(out / "advise.html")]
    steps.run(
        "which index should this table have? (its HNSW index measured in place, the other "
        "design built on a scratch copy, the cheapest setting reaching the target found; what "
        "to keep or build, and the settings)",
        *f"advise --testset {testset} --target {target} --designs hnsw,ivfflat "
        "--target-recall 0.95".split(),
        *report,
    )


def _out(
    steps: Steps, testset: str, target: str, experiment: str, out: Path, isolate: list[str]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    from ..reporting import plots

    plot = ["--plot", str(out / "sweep-hnsw.png")] if plots.available() else []
    steps.run(
        "what does a larger ef_search buy? (a short sweep, recall against exact search)",
        *f"sweep --testset {testset} --target {target} --stage hnsw "
        f"--param hnsw.ef_search=10,20,40,80 --repeat 3 --fresh --name {experiment}-sweep".split(),
        *plot,
        *isolate,
    )
    steps.run(
        "a report for people (one HTML file)",
        *f"report {experiment} --format html --out".split(),
        str(out / "report.html"),
        *([] if plot else ["--no-plots"]),
    )


def _clean_up(database: Database, target: str | None) -> None:
    """Drop the demo's schema and the target this run added (it would name a dropped table)."""
    with database.connect(results=False, autocommit=True) as kb:
        _drop_own_schema(kb)
    if target:
        from ..targets import targets

        with database.connect(autocommit=True) as conn:
            targets.remove(conn, target)
    from ..cli.output import echo_line

    click.echo()
    echo_line(
        f"(dropped schema {SCHEMA}"
        + (f" and target {target}" if target else "")
        + "; runs stay in schema pgeval — `pgeval run list`)"
    )


def _next_steps(database: Database, keep: bool) -> None:
    from ..cli.output import echo_command, echo_line

    click.secho("\n# what next", fg="cyan", bold=True)
    echo_line(
        "Which index your own table should have (queries sampled from its rows, no test set "
        "needed):"
    )
    echo_command(
        "  pgeval target add kb --table chunks --id-column id --vector-column embedding "
        "--text-column content"
    )
    echo_command(
        "  pgeval advise --target kb --sample-queries 300 --target-recall 0.95 --report advise.html"
    )
    echo_line(
        "What your retrieval loses, stage by stage (a test set of queries with judged chunk "
        "ids, see docs/ for its formats):"
    )
    echo_command("  pgeval testset load my-cases.jsonl --name kb-v1")
    echo_command(
        "  pgeval run pipeline --testset kb-v1 --target kb --stages exact,hnsw,bm25,merge "
        "--name first"
    )
    echo_command("  pgeval stage-report first")
    if keep:
        echo_line(f"The demo's table stays in {SCHEMA}.chunks (--keep).")
    if database.embedded:
        echo_line(
            "The embedded PostgreSQL server is still running (it keeps your runs): "
            "stop it with `pgeval db stop`."
        )


def _experiment_name(database: Database) -> str:
    """``demo-<date>-<time>``, or with ``-2``, ``-3``, ... when a demo started in the same second
    already took it (the experiment's name is its key)."""
    from ..core.errors import Conflict

    def free(name: str) -> None:
        with database.connect() as conn:
            taken = conn.execute(
                "SELECT 1 FROM pgeval.experiment WHERE name = %s", (name,)
            ).fetchone()
            conn.rollback()
        if taken:
            raise Conflict(name)

    return claim_name(free, "demo-" + datetime.now().strftime("%Y%m%d-%H%M%S"))


def _load_testset(database: Database, cases: Path, name: str, load_args: list[str]) -> None:
    """Claim ``name`` for the demo's test set: free (the demo's own `testset load` step then
    creates it, and says so), or holding the demo's content already (loading it again changes
    nothing); another test set of that name is a Conflict (the next name is tried)."""
    from ..testset.catalog import find_testset
    from ..testset.store import load

    grade_map = load_args[1] if load_args else None
    with database.connect() as conn:
        if find_testset(conn, name) is None:
            return  # a fresh start: nothing loaded behind the printed command's back
        load(conn, cases, name, grade_map=grade_map)
        conn.commit()


def _add_target(database: Database, name: str, created: list[str]) -> None:
    """Add the demo's target under ``name`` unless another definition has it (Conflict); note in
    ``created`` whether this call added it."""
    from ..targets import catalog
    from ..targets import targets as t

    # the target `target add NAME *TARGET_ARGS` adds
    spec: dict[str, Any] = {
        flag[2:].replace("-", "_"): value
        for flag, value in zip(TARGET_ARGS[::2], TARGET_ARGS[1::2])
    }
    tg = t.Target(name=name, **spec)
    with database.connect(results=False, autocommit=True, read_only=True) as kb:
        catalog.validate(kb, tg)
    with database.connect() as conn:
        existed = conn.execute("SELECT 1 FROM pgeval.target WHERE name = %s", (name,)).fetchone()
        conn.rollback()
        t.save(conn, tg)
        conn.commit()
    if not existed:
        created.append(name)
