"""`pgeval embed`: precomputed, numpy file and an OpenAI-compatible HTTP endpoint — the latter
served by a real HTTP server started in the test (http.server in a thread), which checks the key,
answers 429 once, and records every request."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from helpers import make_testset

KEY = "sk-test-0123456789abcdef"
DIM = 6


def fake_vector(text: str, dim: int = DIM) -> list[float]:
    h = hashlib.sha256(text.encode()).digest()
    return [(b - 128) / 128.0 for b in h[:dim]]


class EmbeddingServer:
    """A tiny OpenAI-compatible /v1/embeddings endpoint."""

    def __init__(self, *, fail_first: int = 0, status: int = 429, always: int | None = None):
        self.requests: list[dict] = []
        self.fail_first, self.status, self.always = fail_first, status, always
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                if self.path != "/v1/embeddings":
                    return self._send(404, {"error": {"message": "no such route"}})
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self._send(
                        401,
                        {
                            "error": {
                                "message": "Incorrect API key provided: "
                                + str(self.headers.get("Authorization"))
                            }
                        },
                    )
                if outer.always:
                    return self._send(outer.always, {"error": {"message": "overloaded"}})
                if outer.fail_first > 0:
                    outer.fail_first -= 1
                    return self._send(
                        outer.status, {"error": {"message": "rate limited"}}, {"Retry-After": "0"}
                    )
                dim = body.get("dimensions", DIM)
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(t, dim)}
                    for i, t in enumerate(body["input"])
                ]
                self._send(
                    200, {"object": "list", "data": list(reversed(data)), "model": body["model"]}
                )

            def _send(self, code, doc, headers=None):
                raw = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


TEXTS = {f"q{i}": f"what is question number {i}?" for i in range(1, 24)}


@pytest.fixture
def ts(clean, conn):
    make_testset(
        conn,
        "emb",
        {q: {"d1": 1} for q in TEXTS},
        texts=TEXTS,
        embeddings={q: [float(i), 1.0, 0.0] for i, q in enumerate(TEXTS, 1)},
    )
    return clean


def stored(conn, label):
    rows = conn.execute(
        "SELECT e.query_id, e.dim, e.embedding::text FROM pgeval.query_embedding e "
        "JOIN pgeval.query q USING (testset_id, query_id) WHERE e.embedder = %s "
        "ORDER BY q.position",
        (label,),
    ).fetchall()
    return {r[0]: (r[1], np.array(r[2].strip("[]").split(","), dtype=np.float32)) for r in rows}


def test_openai_embedder_batches_retries_and_stores(ts, conn, pgeval, monkeypatch):
    monkeypatch.setenv("PGEVAL_TEST_KEY", KEY)
    with EmbeddingServer(fail_first=1) as srv:
        code, out, err = pgeval(
            "embed",
            "--testset",
            "emb",
            "--embedder",
            "openai:tiny-embed",
            "--base-url",
            srv.url,
            "--api-key-env",
            "PGEVAL_TEST_KEY",
            "--batch-size",
            "5",
        )
        assert code == 0, err
        assert "openai:tiny-embed: 23 query embeddings of dimension 6" in out
        # 23 texts in batches of 5 = 5 requests, plus one retry after the 429
        assert len(srv.requests) == 6
        assert [len(r["body"]["input"]) for r in srv.requests[1:]] == [5, 5, 5, 5, 3]
        assert srv.requests[0]["body"] == srv.requests[1]["body"]
        got = stored(conn, "openai:tiny-embed")
        assert list(got) == list(TEXTS)
        for qid, (dim, vec) in got.items():
            assert dim == DIM and np.allclose(vec, fake_vector(TEXTS[qid]))
        # stored once: a second call sends nothing
        code, out, _ = pgeval(
            "embed",
            "--testset",
            "emb",
            "--embedder",
            "openai:tiny-embed",
            "--base-url",
            srv.url,
            "--api-key-env",
            "PGEVAL_TEST_KEY",
        )
        assert code == 0 and "already stored" in out and len(srv.requests) == 6
        # requested dimensions are sent and become part of the label
        code, out, err = pgeval(
            "embed",
            "--testset",
            "emb",
            "--embedder",
            "openai:tiny-embed",
            "--dimensions",
            "4",
            "--base-url",
            srv.url,
            "--api-key-env",
            "PGEVAL_TEST_KEY",
        )
        assert code == 0, err
        assert srv.requests[-1]["body"]["dimensions"] == 4
        assert {d for d, _ in stored(conn, "openai:tiny-embed@4").values()} == {4}


def test_openai_4xx_is_a_clear_error_without_the_key(ts, conn, pgeval, monkeypatch):
    monkeypatch.setenv("PGEVAL_TEST_KEY", KEY[:-1] + "X")  # wrong key: the server echoes it
    with EmbeddingServer() as srv:
        code, out, err = pgeval(
            "embed",
            "--testset",
            "emb",
            "--embedder",
            "openai:m",
            "--base-url",
            srv.url,
            "--api-key-env",
            "PGEVAL_TEST_KEY",
        )
        assert code == 1 and len(srv.requests) == 1  # no retry on 401
    assert "answered HTTP 401: Incorrect API key provided: Bearer ***" in err
    assert KEY[:-1] not in err + out and "Traceback" not in err
    assert conn.execute("SELECT count(*) FROM pgeval.query_embedding").fetchone()[0] == 0


def test_openai_missing_key_variable(ts, pgeval, monkeypatch):
    monkeypatch.delenv("PGEVAL_NO_SUCH_KEY", raising=False)
    code, _, err = pgeval(
        "embed",
        "--testset",
        "emb",
        "--embedder",
        "openai:m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--api-key-env",
        "PGEVAL_NO_SUCH_KEY",
    )
    assert code == 1 and "environment variable PGEVAL_NO_SUCH_KEY is not set" in err


def test_openai_gives_up_after_retries_on_5xx(ts, monkeypatch):
    from evaluator.core.errors import InputError
    from evaluator.providers.embedders.http import OpenAIEmbedder
    from evaluator.providers.embedders.storage import testset_queries

    monkeypatch.setenv("PGEVAL_TEST_KEY", KEY)
    with EmbeddingServer(always=503) as srv, ts.connect() as conn:
        emb = OpenAIEmbedder(
            "m", base_url=srv.url, api_key_env="PGEVAL_TEST_KEY", retries=2, backoff_s=0.01
        )
        queries = testset_queries(
            conn, conn.execute("SELECT testset_id FROM pgeval.testset").fetchone()[0]
        )
        with pytest.raises(InputError, match="failed after 3 attempts: HTTP 503: overloaded"):
            emb.embed(queries)
        assert len(srv.requests) == 3


def test_precomputed_and_numpy(ts, conn, pgeval, tmp_path):
    code, out, err = pgeval("embed --testset emb --embedder precomputed")
    assert code == 0, err
    assert "23 query embeddings of dimension 3" in out
    got = stored(conn, "precomputed")
    assert np.allclose(got["q7"][1], [7.0, 1.0, 0.0])
    matrix = np.arange(23 * 5, dtype=np.float32).reshape(23, 5)
    np.save(tmp_path / "q.npy", matrix)
    code, out, err = pgeval(
        "embed", "--testset", "emb", "--embedder", f"numpy:{tmp_path / 'q.npy'}"
    )
    assert code == 0, err
    label = conn.execute(
        "SELECT DISTINCT embedder FROM pgeval.query_embedding WHERE embedder LIKE 'numpy:%'"
    ).fetchone()[0]
    assert label.startswith("numpy:q.npy#")
    got = stored(conn, label)
    assert all(np.allclose(got[q][1], matrix[i]) for i, q in enumerate(TEXTS))  # row i = query i
    code, out, _ = pgeval("embed --list --format json")
    assert {r["embedder"] for r in json.loads(out)} == {"precomputed", label}


def test_numpy_wrong_shape_and_missing_precomputed(clean, conn, pgeval, tmp_path):
    make_testset(conn, "emb", {q: {"d1": 1} for q in TEXTS}, texts=TEXTS)
    np.save(tmp_path / "short.npy", np.zeros((5, 3), dtype=np.float32))
    code, _, err = pgeval(
        "embed", "--testset", "emb", "--embedder", f"numpy:{tmp_path / 'short.npy'}"
    )
    assert code == 1 and "short.npy: 5 rows for 23 queries" in err
    code, _, err = pgeval("embed --testset emb --embedder precomputed")
    assert code == 1 and "query 'q1' has no embedding in the test set" in err
    code, _, err = pgeval("embed --testset emb --embedder bogus:thing")
    assert code == 1 and "unknown embedder 'bogus:thing'" in err
    assert conn.execute("SELECT count(*) FROM pgeval.query_embedding").fetchone()[0] == 0


def test_local_embedder_without_sentence_transformers(ts, pgeval, monkeypatch):
    """Where sentence-transformers is missing (its import made to fail where it is installed),
    one line says what to install."""
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    code, _, err = pgeval("embed --testset emb --embedder local:sentence-transformers/x")
    assert code == 1 and "local embedders need sentence-transformers" in err


def test_load_reads_every_vector_in_test_set_order(ts, conn, pgeval):
    """storage.load: the stored vectors (one bytea of them all, or one by one when their
    dimensions differ), each with its query, in test-set order, exactly as stored."""
    from evaluator.providers.embedders import storage

    code, _, err = pgeval("embed --testset emb --embedder precomputed")
    assert code == 0, err
    tid = storage.testset_id(conn, "emb")
    want = stored(conn, "precomputed")
    queries = storage.load(conn, tid, "precomputed")
    assert [q.query_id for q in queries] == list(want)  # test-set order
    assert all(np.array_equal(q.embedding, want[q.query_id][1]) for q in queries)
    assert all(q.embedding.dtype == np.float32 for q in queries)
    conn.execute(  # one vector of another dimension: read one by one, the same values
        "UPDATE pgeval.query_embedding SET embedding = '[1.5,2.5]', dim = 2 "
        "WHERE testset_id = %s AND query_id = 'q3'",
        (tid,),
    )
    conn.commit()
    again = {q.query_id: q.embedding for q in storage.load(conn, tid, "precomputed")}
    assert np.array_equal(again["q3"], np.array([1.5, 2.5], np.float32))
    assert all(np.array_equal(again[q], want[q][1]) for q in want if q != "q3")


def _tiny_sentence_model(path) -> None:
    """A sentence-transformers model built and saved here (no download): a one-layer BERT of
    width 16 over the test set's words, mean pooling."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    try:  # (sentence-transformers 6 moved its modules)
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:
        from sentence_transformers.models import Pooling, Transformer
    from sentence_transformers import SentenceTransformer

    words = sorted({w for t in TEXTS.values() for w in t.split()})
    path.mkdir()
    (path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=5 + len(words), hidden_size=16, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=32,
    )  # fmt: skip
    BertModel(config).save_pretrained(path / "bert")
    BertTokenizer(str(path / "vocab.txt")).save_pretrained(path / "bert")
    bert = Transformer(str(path / "bert"))
    SentenceTransformer(modules=[bert, Pooling(16, "mean")]).save(str(path / "st"))


def test_local_embedder_on_a_model_built_by_the_test(ts, conn, pgeval, tmp_path):
    """`--embedder local:PATH` (sentence-transformers, CPU) stores, per query in test-set
    order, the mean of the BERT's last hidden states over the query's tokens, computed here
    from transformers' own forward pass with numpy (not through sentence-transformers)."""
    import prerequisites

    why = prerequisites.torch_missing()
    if why:
        prerequisites.skip("torch", why)
    import torch
    from transformers import BertModel, BertTokenizer

    _tiny_sentence_model(tmp_path / "m")
    code, out, err = pgeval(
        "embed", "--testset", "emb", "--embedder", f"local:{tmp_path / 'm' / 'st'}"
    )
    assert code == 0, err
    got = stored(conn, f"local:{tmp_path / 'm' / 'st'}")
    assert list(got) == list(TEXTS)
    tok = BertTokenizer.from_pretrained(str(tmp_path / "m" / "bert"))
    model = BertModel.from_pretrained(str(tmp_path / "m" / "bert")).eval()
    for qid, text in TEXTS.items():
        ids = tok(text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**ids).last_hidden_state[0].numpy()
        want = hidden.mean(axis=0)
        dim, vec = got[qid]
        assert dim == 16
        np.testing.assert_allclose(vec, want, atol=1e-5)
