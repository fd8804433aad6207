"""A local HTTP server that speaks WeKnora's documented retrieval API (docs/api/knowledge-base.md
hybrid-search, docs/api/chat.md knowledge-search; ``X-API-Key``) and answers from the test
database's own search: real sockets, real JSON, started in a thread by the tests.

- ``POST /api/v1/knowledge-bases/{kb}/hybrid-search`` (``query_text``, ``match_count``,
  ``disable_keywords_match``, ``disable_vector_match``): vector = exact cosine search of the
  query's embedding over the table; keyword = chunks whose body starts with the query text;
  hybrid = reciprocal rank fusion of both. Every vector answer ends with one chunk id the test
  set does not know (``ghost-<query>``).
- ``POST /api/v1/knowledge-search`` (``query``, ``knowledge_base_id(s)``): the final list, the
  hybrid top 5 re-ordered by vector similarity.
- ``POST /generic/search`` (``{"q": {"text": ..., "vec": [...]}, "k": n}``): the vector list as
  ``{"result": {"items": [{"chunk": {"id": ...}, "relevance": ...}]}}``.

The query is found by its text in ``pgeval.query``. ``faults`` maps a query id to a fault:
``timeout`` (answers after ``slow_s``), ``500``, ``429`` (always), ``429-once`` (429 with
``Retry-After: 1`` the first time), ``malformed`` (not JSON), ``nodata`` (no ``data``).
``answers`` records what was sent: (node, query_id) -> [(id, score)]; ``seen`` every request.
``hold``, when set, is called before each answer is made (a test pauses the client there).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from psycopg import sql


class WeKnora:
    def __init__(self, database, table: str, testset: str, key: str, kb: str = "kb-1"):
        self.database, self.table, self.testset, self.key, self.kb = (
            database,
            table,
            testset,
            key,
            kb,
        )
        self.faults: dict[str, str] = {}
        self.answers: dict[tuple[str, str], list] = {}
        self.seen: list[dict] = []
        self.delay_s = 0.0  # added to every answer (kill-and-resume tests)
        self.slow_s = 2.0  # the 'timeout' fault's delay
        self.hold: Callable[[], None] | None = None  # called before each answer (may block)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    # ---- the test database's own search ----------------------------------------------------
    def query(self, text: str) -> tuple[str, np.ndarray]:
        with self.database.connect(autocommit=True) as c:
            row = c.execute(
                "SELECT q.query_id, q.embedding::text FROM pgeval.query q JOIN pgeval.testset t "
                "USING (testset_id) WHERE t.name = %s AND q.query_text = %s",
                (self.testset, text),
            ).fetchone()
        if row is None:
            raise LookupError(text)
        return row[0], np.array(row[1].strip("[]").split(","), dtype=np.float32)

    def vector(self, qid: str, vec: np.ndarray, n: int) -> list[tuple[str, float]]:
        lit = "[" + ",".join(f"{x:.7g}" for x in vec) + "]"
        with self.database.connect(autocommit=True) as c:
            rows = c.execute(
                sql.SQL(
                    "SELECT id, 1 - (embedding <=> %s::vector) FROM {} ORDER BY "
                    "embedding <=> %s::vector, id LIMIT %s"
                ).format(sql.Identifier(self.table)),
                (lit, lit, n),
            ).fetchall()
        return [(r[0], round(float(r[1]), 6)) for r in rows] + [(f"ghost-{qid}", 0.01)]

    def keyword(self, text: str, n: int) -> list[tuple[str, float]]:
        with self.database.connect(autocommit=True) as c:
            rows = c.execute(
                sql.SQL(
                    "SELECT id FROM {} WHERE body LIKE %s || '%%' ORDER BY "
                    "length(body), id LIMIT %s"
                ).format(sql.Identifier(self.table)),
                (text, n),
            ).fetchall()
        return [(r[0], round(1.0 / (i + 1), 6)) for i, r in enumerate(rows)]

    def hybrid(self, qid, vec, text, n) -> list[tuple[str, float]]:
        fused: dict[str, float] = {}
        for lst in (self.vector(qid, vec, n), self.keyword(text, n)):
            for rank, (c, _) in enumerate(lst, 1):
                fused[c] = fused.get(c, 0.0) + 1.0 / (60 + rank)
        return [(c, round(s, 6)) for c, s in sorted(fused.items(), key=lambda x: (-x[1], x[0]))][:n]

    # ---- HTTP ---------------------------------------------------------------------------------
    def _handler(self):
        app = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, payload, headers: dict | None = None):
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with app.lock:
                    app.seen.append(
                        {
                            "path": self.path,
                            "body": body,
                            "at": time.monotonic(),
                            "key": self.headers.get("X-API-Key"),
                            "auth": self.headers.get("Authorization"),
                        }
                    )
                generic = self.path == "/generic/search"
                key = (
                    (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                    if generic
                    else self.headers.get("X-API-Key")
                )
                if key != app.key:
                    return self._send(
                        401,
                        {
                            "success": False,
                            "error": {"code": 401, "message": "unauthorized: invalid api key"},
                        },
                    )
                text = (
                    (body.get("q") or {}).get("text")
                    if generic
                    else (body.get("query_text") or body.get("query"))
                )
                try:
                    qid, vec = app.query(text)
                except LookupError:
                    return self._send(
                        400, {"success": False, "error": {"message": f"unknown query {text!r}"}}
                    )
                fault = app.faults.get(qid)
                if fault == "timeout":  # too late: the client has given up
                    time.sleep(app.slow_s)
                    try:
                        return self._send(200, {"data": [], "success": True})
                    except OSError:
                        return None
                if fault == "500":
                    return self._send(500, {"success": False, "error": {"message": "boom"}})
                elif fault == "429" or (
                    fault == "429-once"
                    and sum(
                        1
                        for s in app.seen
                        if (s["body"].get("query_text") or s["body"].get("query")) == text
                    )
                    == 1
                ):
                    return self._send(
                        429,
                        {"success": False, "error": {"message": "slow down"}},
                        {"Retry-After": "1"},
                    )
                elif fault == "malformed":
                    return self._send(200, b'{"data": [{"id": "c1", "score": 0.5}')
                elif fault == "nodata":
                    return self._send(200, {"success": True})
                if app.hold is not None:
                    app.hold()
                if app.delay_s:
                    time.sleep(app.delay_s)
                if generic:
                    assert body["q"]["vec"] is not None and len(body["q"]["vec"]) == len(vec)
                    got = app.vector(
                        qid, np.array(body["q"]["vec"], dtype=np.float32), int(body["k"])
                    )
                    with app.lock:
                        app.answers[("generic", qid)] = got
                    return self._send(
                        200,
                        {
                            "result": {
                                "items": [{"chunk": {"id": c}, "relevance": s} for c, s in got]
                            }
                        },
                    )
                n = int(body.get("match_count") or 10)
                if self.path == "/api/v1/knowledge-search":
                    kbs = body.get("knowledge_base_ids") or [body.get("knowledge_base_id")]
                    if app.kb not in kbs:
                        return self._send(
                            404,
                            {"success": False, "error": {"message": "knowledge base not found"}},
                        )
                    top = app.hybrid(qid, vec, text, 10)[:5]
                    sims = dict(app.vector(qid, vec, 400))
                    got = sorted(
                        ((c, sims.get(c, 0.0)) for c, _ in top), key=lambda x: (-x[1], x[0])
                    )
                    node = "final"
                elif self.path == f"/api/v1/knowledge-bases/{app.kb}/hybrid-search":
                    no_kw, no_vec = (
                        body.get("disable_keywords_match"),
                        body.get("disable_vector_match"),
                    )
                    if no_kw and not no_vec:
                        got, node = app.vector(qid, vec, n), "vector"
                    elif no_vec and not no_kw:
                        got, node = app.keyword(text, n), "keyword"
                    else:
                        got, node = app.hybrid(qid, vec, text, n), "hybrid"
                else:
                    return self._send(404, {"success": False, "error": {"message": "not found"}})
                with app.lock:
                    app.answers[(node, qid)] = got
                return self._send(
                    200,
                    {
                        "data": [
                            {
                                "id": c,
                                "content": "...",
                                "knowledge_id": "k1",
                                "chunk_index": i,
                                "seq": i + 1,
                                "score": s,
                                "chunk_type": "text",
                            }
                            for i, (c, s) in enumerate(got)
                        ],
                        "success": True,
                    },
                )

        return Handler
