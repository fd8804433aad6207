"""End to end on real vectors and text: `pgeval run pipeline --stages
exact,hnsw,bm25,merge,rerank` (Cranfield MiniLM vectors and abstracts when ../shared has them,
else seeded data; the reranker a local HTTP peer), then `pgeval stage-report`: every stage side by
side, and a loss attribution whose counts add up to the relevant chunks missing from the final
top K and whose points sum with the final Recall@K to 1."""

from __future__ import annotations

import json
import random

import pytest
from dba_data import corpus, qrels, vec_text
from helpers import make_testset
from helpers_peer import serving
from helpers_stage import CRANFIELD, text_docs

N_DOCS, N_QUERIES, TABLE = 400, 60, "sp_docs"


@pytest.fixture(scope="module")
def peer():
    with serving() as url:
        yield url


@pytest.fixture
def setup(clean, conn, pgeval):
    docs, queries, source = corpus(N_DOCS, N_QUERIES)
    if source == "cranfield":
        from evaluator.testset.datasets.cranfield import queries as cran_queries

        texts = dict(text_docs())
        qtexts = dict(cran_queries(CRANFIELD))
    else:
        rng = random.Random(3)
        words = "wing flow layer shock heat plate jet drag lift mach vortex panel".split()
        texts = {
            str(i): " ".join(rng.choice(words) for _ in range(10)) for i in range(1, N_DOCS + 1)
        }
        qtexts = {
            str(j): " ".join(rng.choice(words) for _ in range(4)) for j in range(1, N_QUERIES + 1)
        }
    if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()[0]:
        conn.execute(
            f"CREATE TABLE {TABLE} (id text PRIMARY KEY, embedding "
            f"vector({docs.shape[1]}), body text)"
        )
        with conn.cursor().copy(f"COPY {TABLE} (id, embedding, body) FROM STDIN") as cp:
            for i, v in enumerate(docs, 1):
                cp.write_row((str(i), vec_text(v), texts[str(i)]))
        conn.execute(
            f"CREATE INDEX sp_docs_hnsw ON {TABLE} USING hnsw (embedding "
            "vector_cosine_ops) WITH (m = 4, ef_construction = 16)"
        )
        conn.execute(
            f"CREATE INDEX sp_docs_bm25 ON {TABLE} USING bm25 (body) WITH (text_config = 'english')"
        )
        conn.execute(f"ANALYZE {TABLE}")
    judged = qrels(N_QUERIES, source, docs, queries)
    make_testset(
        conn,
        "sp",
        judged,
        texts={q: qtexts[q] for q in judged},
        embeddings={str(j + 1): v for j, v in enumerate(queries)},
    )
    code, _, err = pgeval(
        "target",
        "add",
        "sp",
        "--table",
        TABLE,
        "--id-column",
        "id",
        "--vector-column",
        "embedding",
        "--text-column",
        "body",
    )
    assert code == 0, err
    return clean


def missing_from_final(conn, run_name: str, k: int) -> int:
    return conn.execute(
        """SELECT count(*) FROM pgeval.qrel j JOIN pgeval.run r ON r.testset_id = j.testset_id
            WHERE r.name = %s AND j.grade >= 1
              AND NOT EXISTS (SELECT 1 FROM pgeval.result x WHERE x.run_id = r.run_id
                                 AND x.query_id = j.query_id AND x.chunk_id = j.chunk_id
                                 AND x.rank <= %s)""",
        (run_name, k),
    ).fetchone()[0]


def test_pipeline_then_stage_report(setup, conn, pgeval, peer):
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "sp",
        "--target",
        "sp",
        "--stages",
        "exact,hnsw,bm25,merge,rerank",
        "--set",
        "hnsw.ef_search=40",
        "--depth",
        "40",
        "--repeat",
        "2",
        "--reranker",
        f"http:{peer}/rerank",
        "--opt",
        "rerank:top_n=20",
        "--name",
        "spx",
        "--format",
        "json",
    )
    assert code == 0, err
    code, out, err = pgeval("stage-report", "spx", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert [s["stage"] for s in rep["stages"]] == ["exact", "hnsw", "bm25", "merge", "rerank"]
    by = {s["stage"]: s for s in rep["stages"]}
    assert 0 < by["hnsw"]["index_recall@10"]["mean"] <= 1
    assert by["exact"]["metrics"]["recall@10"]["mean"] > 0
    assert by["rerank"]["rows"]["depth"] == 20 and by["merge"]["latency_ms"] is None
    assert by["bm25"]["latency_ms"]["p50"] > 0 and by["rerank"]["latency_ms"]["p99"] > 0
    assert [(c["stage"], c["link"], c["cut"]) for c in rep["chain"]] == [
        ("rerank", "final", 10),
        ("rerank", "rerank", 10),
        ("merge", "merge", 20),
        ("hnsw", "path", 40),
        ("bm25", "path", 40),
        ("exact", "exact", 40),
    ]
    loss = {r["category"]: r for r in rep["loss_attribution"]}
    assert list(loss) == ["index", "reach", "fusion", "rerank", "kept"]
    assert sum(r["recall_points"] for r in loss.values()) == pytest.approx(1.0)
    assert loss["kept"]["recall_points"] == pytest.approx(
        by["rerank"]["metrics"]["recall@10"]["mean"]
    )
    # repetition 1 on its own: the counts add up to the chunks missing from the final top 10
    code, out, err = pgeval("stage-report", "spx", "--repetition", "1", "--format", "json")
    one = {r["category"]: r["chunks"] for r in json.loads(out)["loss_attribution"]}
    lost = sum(n for c, n in one.items() if c != "kept")
    assert lost == missing_from_final(conn, "spx.rerank.1", 10) > 0
    assert one["kept"] + lost == json.loads(out)["loss_attribution"][0]["relevant"]
    code, out, err = pgeval("stage-report", "spx")
    assert code == 0, err
    assert "loss attribution" in out and "worst queries" in out
    # every stage run, the set-based merge included, carries the configuration fingerprint
    fps = conn.execute(
        "SELECT r.stage, r.fingerprint->>'stage', r.config_hash FROM pgeval.run r "
        "JOIN pgeval.experiment e USING (experiment_id) WHERE e.name = 'spx'"
    ).fetchall()
    assert {s for s, _, _ in fps} == {"exact", "hnsw", "bm25", "merge", "rerank"}
    assert all(fp_stage == stage and h for stage, fp_stage, h in fps)
