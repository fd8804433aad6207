"""The rerank stage and the rerankers, against a tiny local HTTP peer started by the test (Cohere/
Jina, TEI and DashScope request shapes, retries, errors, an OpenAI-compatible embeddings endpoint
for the bi-encoder), exact full-precision re-scoring on the real server, and a cross-encoder built
by the test when torch is available."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import make_testset
from helpers_peer import Peer, overlap, serving
from helpers_stage import (
    make_experiment,
    prepare_and_run,
    stage_ctx,
    stage_run,
    stored,
    text_target,
)

from evaluator.core.errors import InputError
from evaluator.providers import rerankers
from evaluator.stages.rerank import RerankStage

DOCS = {
    "d1": "supersonic flow over a flat plate",
    "d2": "heat transfer in laminar boundary layers",
    "d3": "boundary layer transition at supersonic speeds",
    "d4": "buckling of thin cylindrical shells",
    "d5": "laminar boundary layer heat transfer on a flat plate",
    "d6": "",
}
QUERIES = {"q1": "laminar boundary layer heat transfer", "q2": "supersonic flat plate"}
VEC = {
    "d1": [1, 0, 0],
    "d2": [0, 1, 0],
    "d3": [0.6, 0.8, 0],
    "d4": [0, 0, 1],
    "d5": [0.7, 0.7, 0.1],
    "d6": [0.1, 0.1, 0.9],
}
QVEC = {"q1": [0.1, 1.0, 0.0], "q2": [1.0, 0.2, 0.1]}


@pytest.fixture(scope="module")
def peer():
    Peer.vocab = sorted({w for t in [*DOCS.values(), *QUERIES.values()] for w in t.split()})
    with serving() as url:
        yield url


@pytest.fixture
def kb(clean, conn):
    conn.execute("DROP TABLE IF EXISTS rr_docs")
    conn.execute(
        "CREATE TABLE rr_docs (doc_id text PRIMARY KEY, body text, emb vector(3), "
        "emb_half halfvec(3))"
    )
    for d, text in DOCS.items():
        v = "[" + ",".join(map(str, VEC[d])) + "]"
        conn.execute("INSERT INTO rr_docs VALUES (%s, %s, %s, %s)", (d, text or None, v, v))
    make_testset(
        conn, "rr", {"q1": {"d2": 2, "d5": 3}, "q2": {"d1": 1}}, texts=QUERIES, embeddings=QVEC
    )
    make_experiment(conn, "rx", "rr", ["bm25", "rerank"])
    first = stage_run(
        conn,
        "rx",
        "bm25",
        {"q1": ["d1", "d2", "d3", "d4", "d5", "d6"], "q2": ["d4", "d3", "d2", "d1"]},
        testset="rr",
        depth=6,
    )
    Peer.log.clear()
    return {"bm25": first}


def rerank(database, conn, previous, options, *, depth=6, name="rerank"):
    ctx = stage_ctx(
        database,
        conn,
        testset="rr",
        experiment="rx",
        stage="rerank",
        depth=depth,
        target=text_target("rr", "rr_docs"),
        options=options,
        previous=previous,
        embeddings=True,
    )
    run_id = prepare_and_run(RerankStage(), ctx, f"rx.{name}.1")
    row = conn.execute(
        "SELECT params, depth, status FROM pgeval.run WHERE run_id = %s", (run_id,)
    ).fetchone()
    return run_id, row, ctx.warnings


def expected(qid: str, candidates: list[str]) -> list[str]:
    docs = [c for c in candidates if DOCS[c]]
    return sorted(docs, key=lambda c: (-overlap(QUERIES[qid], DOCS[c]), c))


def test_http_cohere_style(database, conn, kb, peer, monkeypatch):
    monkeypatch.setenv("RERANK_API_KEY", "sk-secret-1234")
    run_id, (params, depth, status), warnings = rerank(
        database, conn, kb, {"reranker": f"http:{peer}/rerank", "top_n": "5", "model": "rr-1"}
    )
    assert status == "complete" and depth == 5
    assert params["input"] == "bm25" and params["top_n"] == 5 and params["score"] == "similarity"
    assert params["reranker"] == f"http:{peer}/rerank#rr-1"
    got = stored(conn, run_id)
    # q1: the top 5 of bm25 (d6 is not among them), re-ordered by the peer's score
    assert [c for c, _ in got["q1"]] == expected("q1", ["d1", "d2", "d3", "d4", "d5"])
    assert [c for c, _ in got["q2"]] == expected("q2", ["d4", "d3", "d2", "d1"])
    assert got["q1"][0][1] == pytest.approx(overlap(QUERIES["q1"], DOCS[got["q1"][0][0]]))
    path, headers, body = Peer.log[0]
    assert body["model"] == "rr-1" and body["query"] in QUERIES.values()
    assert headers["Authorization"] == "Bearer sk-secret-1234"
    assert "sk-secret" not in json.dumps(params) and not warnings
    timings = conn.execute(
        "SELECT query_id, rows_returned FROM pgeval.query_timing WHERE run_id = %s ORDER BY 1",
        (run_id,),
    ).fetchall()
    assert timings == [("q1", 5), ("q2", 4)]


@pytest.mark.parametrize("style", ["tei", "dashscope"])
def test_tei_and_dashscope_shapes(database, conn, kb, peer, style):
    run_id, (params, _, _), _ = rerank(
        database, conn, kb, {"reranker": f"{style}:{peer}/{style}", "model": "gte"}
    )
    got = stored(conn, run_id)
    assert [c for c, _ in got["q1"]] == expected("q1", list(DOCS))
    body = Peer.log[0][2]
    assert (
        ("texts" in body)
        if style == "tei"
        else (body["input"]["documents"] and body["model"] == "gte")
    )
    # d6 has no text: it is not sent, and the run says so
    assert params["unscored"] == 1


def test_threshold_drops_low_scores(database, conn, kb, peer):
    run_id, (params, _, _), _ = rerank(
        database, conn, kb, {"reranker": f"http:{peer}/rerank", "threshold": "1.5"}
    )
    got = stored(conn, run_id)
    assert all(s >= 1.5 for rows in got.values() for _, s in rows)
    assert params["threshold"] == 1.5 and params["dropped_by_threshold"] > 0
    assert [c for c, _ in got["q1"]] == [
        c for c in expected("q1", list(DOCS)) if overlap(QUERIES["q1"], DOCS[c]) >= 1.5
    ]


def test_retries_then_success_and_a_clear_4xx(database, conn, kb, peer):
    Peer.flaky["left"] = 2
    reranker = rerankers.parse(f"http:{peer}/flaky")
    assert reranker.score("heat", ["heat flow", "buckling"])[0] == pytest.approx(
        overlap("heat", "heat flow")
    )
    assert reranker.requests == 3
    with pytest.raises(InputError, match="HTTP 401: invalid api key.*api_key_env"):
        rerank(database, conn, kb, {"reranker": f"http:{peer}/denied"})
    status = conn.execute("SELECT status FROM pgeval.run WHERE name = 'rx.rerank.1'").fetchone()
    assert status == ("failed",)


def test_biencoder_with_an_openai_compatible_embedder(database, conn, kb, peer):
    run_id, (params, _, _), _ = rerank(
        database,
        conn,
        kb,
        {"reranker": "biencoder:openai:bow", "base_url": peer, "api_key_env": ""},
    )
    assert params["reranker"] == "biencoder:openai:bow"
    vocab = sorted({w for t in [*DOCS.values(), *QUERIES.values()] for w in t.split()})

    def vec(t):
        v = np.array([t.split().count(w) for w in vocab], dtype=float)
        return v / (np.linalg.norm(v) or 1)

    got = stored(conn, run_id)
    for qid in QUERIES:
        cands = [
            c
            for c in ("d1", "d2", "d3", "d4", "d5", "d6")
            if c in {"q1": DOCS, "q2": ["d4", "d3", "d2", "d1"]}[qid] and DOCS[c]
        ]
        want = sorted(cands, key=lambda c: (-float(vec(QUERIES[qid]) @ vec(DOCS[c])), c))
        assert [c for c, _ in got[qid]] == want


def test_exact_full_precision_rescoring(database, conn, kb):
    hnsw = stage_run(
        conn,
        "rx",
        "hnsw",
        {"q1": [("d1", 0.9), ("d5", 0.2), ("d2", 0.3)], "q2": [("d3", 0.5), ("d1", 0.1)]},
        testset="rr",
        depth=6,
    )
    for column in (None, "emb_half"):
        opts = {"reranker": "exact", "input": "hnsw", **({"column": column} if column else {})}
        run_id, (params, _, _), _ = rerank(
            database, conn, {**kb, "hnsw": hnsw}, opts, name=f"exact{column or ''}"
        )
        assert params["reranker"] == "exact" and params["input"] == "hnsw"
        assert params["column"] == (column or "emb")
        got = stored(conn, run_id)
        for qid, cands in (("q1", ["d1", "d5", "d2"]), ("q2", ["d3", "d1"])):
            q = np.array(QVEC[qid])
            dist = {
                c: 1 - np.dot(q, VEC[c]) / np.linalg.norm(q) / np.linalg.norm(VEC[c]) for c in cands
            }
            assert [c for c, _ in got[qid]] == sorted(cands, key=lambda c: (dist[c], c))
            tol = 1e-6 if column is None else 1e-3  # halfvec precision
            assert [s for _, s in got[qid]] == pytest.approx(
                [-dist[c] for c, _ in got[qid]], abs=tol
            )


def test_cross_encoder_built_by_the_test(database, conn, kb, tmp_path):
    import prerequisites

    why = prerequisites.torch_missing()
    if why:
        prerequisites.skip("torch", why)
    import sentence_transformers as st
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = sorted({w for t in [*DOCS.values(), *QUERIES.values()] for w in t.split()})
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    import torch

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=5 + len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(tmp_path / "ce")
    BertTokenizer(str(vocab)).save_pretrained(tmp_path / "ce")
    model = st.CrossEncoder(str(tmp_path / "ce"))
    run_id, (params, _, _), _ = rerank(
        database, conn, kb, {"reranker": f"cross-encoder:{tmp_path / 'ce'}"}
    )
    got = stored(conn, run_id)
    cands = [c for c in DOCS if DOCS[c]]
    scores = model.predict([(QUERIES["q1"], DOCS[c]) for c in cands])
    want = sorted(zip(cands, map(float, scores), strict=True), key=lambda x: (-x[1], x[0]))
    assert [c for c, _ in got["q1"]] == [c for c, _ in want]
    assert [s for _, s in got["q1"]] == pytest.approx([s for _, s in want], abs=1e-5)


def test_user_errors(database, conn, kb, peer):
    for opts, msg in (
        ({}, "needs a reranker"),
        ({"reranker": "magic:x"}, "unknown reranker 'magic:x'"),
        (
            {"reranker": f"http:{peer}/rerank", "top_n": "7"},
            "above `depth` 6",
        ),  # the library names parameters
        ({"reranker": f"http:{peer}/rerank", "input": "merge"}, "not an earlier stage"),
        ({"reranker": "http:ftp://x"}, "must start with http"),
        ({"reranker": "exact", "column": "body"}, "not a vector or halfvec"),
        (
            {"reranker": f"http:{peer}/rerank", "api_key_env": "PGEVAL_NO_SUCH_KEY"},
            "PGEVAL_NO_SUCH_KEY is not set",
        ),
    ):
        with pytest.raises(InputError, match=msg):
            rerank(database, conn, kb, opts)
    assert conn.execute("SELECT count(*) FROM pgeval.run WHERE stage = 'rerank'").fetchone()[0] == 0
