"""A tiny local HTTP peer for the rerank tests: Cohere/Jina ``/rerank``, TEI ``/tei``, DashScope
``/dashscope``, ``/flaky`` (503 with Retry-After: 0 while ``Peer.flaky["left"] > 0``), ``/denied``
(401) and an OpenAI-compatible ``/embeddings`` (bag of words over ``Peer.vocab``). The relevance of
a document is :func:`overlap` (shared words, a little less for longer documents)."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def overlap(query: str, doc: str) -> float:
    """The peer's relevance: shared words, a little less for longer documents."""
    q, d = set(query.lower().split()), doc.lower().split()
    return len(q & set(d)) - 0.01 * len(d)


class Peer(BaseHTTPRequestHandler):
    log: list = []
    flaky = {"left": 0}
    vocab: list = []

    def log_message(self, *args):
        pass

    def _send(self, code: int, doc, headers=None):
        raw = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Peer.log.append((self.path, dict(self.headers), body))
        if self.path == "/denied":
            return self._send(401, {"error": {"message": "invalid api key"}})
        if self.path == "/flaky" and Peer.flaky["left"] > 0:
            Peer.flaky["left"] -= 1
            return self._send(503, {"error": "busy"}, {"Retry-After": "0"})
        if self.path == "/embeddings":
            data = [
                {"index": i, "embedding": [float(t.split().count(w)) for w in Peer.vocab]}
                for i, t in enumerate(body["input"])
            ]
            return self._send(200, {"data": data, "model": body["model"]})
        if self.path == "/tei":
            scores = [
                {"index": i, "score": overlap(body["query"], t)}
                for i, t in enumerate(body["texts"])
            ]
            return self._send(200, sorted(scores, key=lambda x: -x["score"]))
        if self.path == "/dashscope":
            docs, query = body["input"]["documents"], body["input"]["query"]
            res = [{"index": i, "relevance_score": overlap(query, t)} for i, t in enumerate(docs)]
            return self._send(200, {"output": {"results": res}, "usage": {"total_tokens": 1}})
        res = sorted(
            (
                {"index": i, "relevance_score": overlap(body["query"], t)}
                for i, t in enumerate(body["documents"])
            ),
            key=lambda x: -x["relevance_score"],
        )
        return self._send(200, {"results": res[: body.get("top_n") or len(res)]})


@contextmanager
def serving():
    """Start the peer on a free local port; yield its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Peer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
