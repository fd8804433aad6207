"""Builders for experiments made directly in SQL (no pipeline): an experiment row and its stage
runs named ``{experiment}.{stage}.{repetition}`` with depth, params and repetition set."""

from __future__ import annotations

import json

from helpers import make_run

DISTANCE = {"score": "distance", "metric": "cosine"}
SIMILARITY = {"score": "similarity"}


def make_experiment(conn, name: str, testset: str, stages: list[str] | None = None) -> int:
    config = {"stages": stages} if stages is not None else {}
    return conn.execute(
        "INSERT INTO pgeval.experiment (name, testset_id, config, status) "
        "SELECT %s, testset_id, %s, 'complete' FROM pgeval.testset WHERE name = %s "
        "RETURNING experiment_id",
        (name, json.dumps(config), testset),
    ).fetchone()[0]


def stage_run(
    conn,
    experiment: str,
    stage: str,
    ranked: dict,
    *,
    testset: str,
    repetition: int = 1,
    depth: int | None = None,
    params: dict | None = None,
    latency_ms: dict | None = None,
) -> int:
    """A run of ``experiment`` (created with :func:`make_experiment`). ``ranked`` as in
    helpers.make_run: {query_id: [chunk_id, ...]} or {query_id: [(chunk_id, score), ...]}."""
    exp_id = conn.execute(
        "SELECT experiment_id FROM pgeval.experiment WHERE name = %s", (experiment,)
    ).fetchone()[0]
    if params is None:
        params = DISTANCE if stage in ("exact", "hnsw", "ivfflat", "diskann") else SIMILARITY
    rid = make_run(
        conn,
        f"{experiment}.{stage}.{repetition}",
        testset,
        ranked,
        stage=stage,
        experiment_id=exp_id,
        latency_ms=latency_ms,
    )
    conn.execute(
        "UPDATE pgeval.run SET repetition = %s, depth = %s, params = %s WHERE run_id = %s",
        (repetition, depth, json.dumps(params), rid),
    )
    return rid


def dist(chunks: list[str], start: float = 0.1, step: float = 0.1) -> list[tuple[str, float]]:
    """[(chunk, distance)] with increasing distances, for vector stages."""
    return [(c, round(start + i * step, 6)) for i, c in enumerate(chunks)]


# ---- a text knowledge base for the keyword, merge and rerank stages ----------------------------
import random  # noqa: E402
from pathlib import Path  # noqa: E402

CRANFIELD = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "cranfield"
TEXT_TABLE, ZH_TABLE = "bm_docs", "bm_zh"
ZH_DOCS = [
    ("z1", "北京大学是中国著名的高等学府"),
    ("z2", "上海的天气今天很好"),
    ("z3", "清华大学位于北京海淀区"),
    ("z4", "机器学习和深度学习是人工智能的分支"),
    ("z5", "向量数据库用于语义检索"),
    ("z6", "全文检索使用倒排索引"),
]
_WORDS = (
    "wing flow boundary layer pressure shock heat transfer supersonic laminar turbulent "
    "nozzle jet plate cylinder buckling panel flutter vortex drag lift mach"
).split()


def text_docs() -> list[tuple[str, str]]:
    """(doc_id, text): the Cranfield documents when ../shared has them, else 80 seeded sentences
    over a small aerodynamics vocabulary."""
    if (CRANFIELD / "cran.all.1400").is_file():
        from evaluator.testset.datasets.cranfield import documents

        return [(d, f"{title} {body}".strip()) for d, title, body in documents(CRANFIELD)]
    rng = random.Random(7)
    return [
        (str(i), " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14))))
        for i in range(1, 81)
    ]


def build_text_kb(conn) -> list[tuple[str, str]]:
    """bm_docs (doc_id, body with a bm25 index, note = body without one, lang: every 7th 'fr')
    and bm_zh (body, body_seg = bigram-segmented with a bm25 'simple' index). Idempotent."""
    from evaluator.providers.segmenters import segment

    docs = text_docs()
    if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TEXT_TABLE,)).fetchone()[0]:
        conn.execute(
            f"CREATE TABLE {TEXT_TABLE} (doc_id text, body text, note text, lang text, "
            "emb vector(3))"
        )
        with conn.cursor().copy(f"COPY {TEXT_TABLE} (doc_id, body, note, lang) FROM STDIN") as cp:
            for i, (d, text) in enumerate(docs):
                cp.write_row((d, text, text, "fr" if i % 7 == 6 else "en"))
        conn.execute(
            f"CREATE INDEX bm_docs_bm25 ON {TEXT_TABLE} USING bm25 (body) "
            "WITH (text_config = 'english')"
        )
        conn.execute(f"ANALYZE {TEXT_TABLE}")
    if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (ZH_TABLE,)).fetchone()[0]:
        conn.execute(
            f"CREATE TABLE {ZH_TABLE} (doc_id text, body text, body_seg text, emb vector(3))"
        )
        for d, text in ZH_DOCS:
            conn.execute(
                f"INSERT INTO {ZH_TABLE} VALUES (%s, %s, %s, NULL)",
                (d, text, segment(text, "bigram")),
            )
        conn.execute(
            f"CREATE INDEX bm_zh_bm25 ON {ZH_TABLE} USING bm25 (body_seg) "
            "WITH (text_config = 'simple')"
        )
    return docs


def text_target(name: str = "docs", table: str = TEXT_TABLE, **kw):
    from evaluator.targets.targets import Target

    kw.setdefault("text_column", "body")
    return Target(name=name, table=table, id_column="doc_id", vector_column="emb", **kw)


def stage_ctx(
    database,
    conn,
    *,
    testset: str,
    experiment: str | None = None,
    target=None,
    stage: str,
    depth: int = 10,
    options: dict | None = None,
    settings: dict | None = None,
    batch: bool = False,
    repetition: int = 1,
    previous: dict | None = None,
    embeddings: bool = False,
):
    """A StageContext on fresh connections (kb: read-only transactions; results), as the pipeline
    builds it. Close with ``close_ctx``."""
    from evaluator.providers.embedders.storage import testset_queries
    from evaluator.stages.base import StageContext

    tid = conn.execute(
        "SELECT testset_id FROM pgeval.testset WHERE name = %s", (testset,)
    ).fetchone()[0]
    exp_id = None
    if experiment is not None:
        row = conn.execute(
            "SELECT experiment_id FROM pgeval.experiment WHERE name = %s", (experiment,)
        ).fetchone()
        exp_id = row[0] if row else make_experiment(conn, experiment, testset)
    results = database.connect()
    kb = database.connect(results=False)
    return StageContext(
        kb=kb,
        results=results,
        target=target,
        testset=testset,
        testset_id=tid,
        experiment=experiment,
        experiment_id=exp_id,
        repetition=repetition,
        stage=stage,
        depth=depth,
        settings=dict(settings or {}),
        options=dict(options or {}),
        queries=testset_queries(results, tid, with_embedding=embeddings),
        batch=batch,
        previous=dict(previous or {}),
    )


def close_ctx(ctx) -> None:
    for c in (ctx.kb, ctx.results):
        c.rollback()
        c.close()


def prepare_and_run(stage, ctx, run_name: str) -> int:
    """``stage.prepare`` then ``stage.run`` as the pipeline calls them; the context is closed
    afterwards (also when either raises). Returns the run id."""
    try:
        stage.prepare(ctx)
        return stage.run(ctx, run_name)
    finally:
        close_ctx(ctx)


def stored(conn, run_id: int) -> dict[str, list[tuple[str, float]]]:
    """{query_id: [(chunk_id, score), ...]} in rank order."""
    out: dict[str, list] = {}
    for q, c, s in conn.execute(
        "SELECT query_id, chunk_id, score FROM pgeval.result "
        "WHERE run_id = %s ORDER BY query_id, rank",
        (run_id,),
    ):
        out.setdefault(q, []).append((c, s))
    return out
