"""Rerankers: a score for each (query, candidate text) pair, higher is better.

Specs (``--opt rerank:reranker=SPEC``):

- ``http:URL`` (aliases ``cohere:URL``, ``jina:URL``) — the Cohere/Jina rerank request
  ``{"model", "query", "documents": [...], "top_n", "return_documents": false}``, as served by
  Cohere, Jina, vLLM, Xinference, LiteLLM and DashScope's compatible mode.
- ``tei:URL`` — Hugging Face text-embeddings-inference ``/rerank``:
  ``{"query", "texts": [...], "raw_scores": false, "truncate": true}``.
- ``dashscope:URL`` — DashScope's native text-rerank API
  ``{"model", "input": {"query", "documents"}, "parameters": {"top_n", "return_documents"}}``.
- ``cross-encoder:MODEL`` (alias ``local:MODEL``) — a sentence-transformers ``CrossEncoder`` on
  this machine (a name or a local directory).
- ``biencoder:EMBEDDER`` — re-score by cosine similarity of query and chunk embeddings from an
  embedder spec of :mod:`evaluator.providers.embedders` (``biencoder:openai:text-embedding-v4``,
  ``biencoder:local:MODEL``).

Every HTTP answer is read the same way: a list of ``{"index", "relevance_score" | "score"}``,
bare (TEI) or under ``results`` (Cohere, Jina), ``output.results`` (DashScope) or ``data``.
HTTP: retries with exponential backoff (honouring ``Retry-After``) on 429, 5xx and network
errors; any other 4xx stops at once with the server's message. The API key is read from the
environment variable ``api_key_env`` (default ``RERANK_API_KEY``, sent only when set) and never
appears in a message.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ..core.errors import InputError, param
from ..core.masking import mask
from .http_json import JsonClient, check_url

RETRIES = 4
BACKOFF_S = 0.5
DEFAULT_KEY_ENV = "RERANK_API_KEY"
FIELD = param("options")


class Reranker(Protocol):
    label: str

    def score(self, query: str, documents: Sequence[str]) -> list[float | None]:
        """One score per document (None: the reranker did not score it)."""


class HttpReranker:
    """Cohere/Jina (``http``), TEI (``tei``) or DashScope-native (``dashscope``) rerank API."""

    def __init__(
        self,
        url: str,
        style: str = "http",
        *,
        model: str | None = None,
        api_key_env: str | None = None,
        timeout: float | None = None,
        batch_size: int | None = None,
        retries: int = RETRIES,
        backoff_s: float = BACKOFF_S,
    ):
        check_url(url, "reranker URL", FIELD)
        self.url, self.style, self.model = url, style, model
        self.timeout = timeout or 60.0
        self.batch_size = batch_size or 0
        self.retries, self.backoff_s = retries, backoff_s
        self.label = f"{style}:{mask(url)}" + (f"#{model}" if model else "")  # stored, reported
        key_env = api_key_env if api_key_env is not None else DEFAULT_KEY_ENV
        key = os.environ.get(key_env) if key_env else None
        if api_key_env and not key:
            raise InputError(
                f"environment variable {api_key_env} is not set (it must hold the rerank API key)",
                field=FIELD,
            )
        self._client = JsonClient(
            url, key=key, timeout=self.timeout, retries=retries, backoff_s=backoff_s, field=FIELD
        )

    def _body(self, query: str, docs: list[str]) -> dict:
        if self.style == "tei":
            return {"query": query, "texts": docs, "raw_scores": False, "truncate": True}
        if self.style == "dashscope":
            return {
                "model": self.model,
                "input": {"query": query, "documents": docs},
                "parameters": {"top_n": len(docs), "return_documents": False},
            }
        body = {"query": query, "documents": docs, "top_n": len(docs), "return_documents": False}
        if self.model:
            body["model"] = self.model
        return body

    def _post(self, body: dict) -> object:
        return self._client.post(
            body,
            hint_4xx=lambda code: (
                " (set the API key's variable with --opt rerank:api_key_env=NAME)"
                if code in (401, 403)
                else ""
            ),
        )

    @property
    def requests(self) -> int:
        """Requests sent, retries included (for reports and tests)."""
        return self._client.requests

    def score(self, query: str, documents: Sequence[str]) -> list[float | None]:
        docs = list(documents)
        out: list[float | None] = [None] * len(docs)
        step = self.batch_size or max(1, len(docs))
        for start in range(0, len(docs), step):
            chunk = docs[start : start + step]
            answer = self._post(self._body(query, chunk))
            for i, s in parse_scores(answer, len(chunk), mask(self.url)):
                out[start + i] = s
        return out


def parse_scores(payload: object, n: int, source: str = "reranker") -> list[tuple[int, float]]:
    """[(index, score)] from any of the supported response shapes."""
    items = payload
    if isinstance(payload, dict):
        items = (
            payload.get("results")
            or (payload.get("output") or {}).get("results")
            or payload.get("data")
        )
    if not isinstance(items, list):
        raise InputError(
            f"{source} answered without a list of results "
            f"(keys: {', '.join(payload) if isinstance(payload, dict) else '-'})",
            field=FIELD,
        )
    out = []
    for item in items:
        try:
            idx = int(item["index"])
            value = item["relevance_score"] if "relevance_score" in item else item["score"]
            value = float(value)
        except (KeyError, TypeError, ValueError):
            raise InputError(
                f"{source} answered a result without index and score: {str(item)[:120]}",
                field=FIELD,
            ) from None
        if not 0 <= idx < n:
            raise InputError(f"{source} answered index {idx} for {n} documents", field=FIELD)
        out.append((idx, value))
    return out


class CrossEncoderReranker:
    """sentence-transformers ``CrossEncoder`` (optional: ``pip install sentence-transformers``)."""

    def __init__(self, model: str, batch_size: int | None = None):
        self.model_name, self.batch_size = model, batch_size or 32
        self.label = f"cross-encoder:{model}"
        self._model: Any = None  # the loaded CrossEncoder (untyped package)

    def _load(self) -> Any:
        from .embedders.local import load_model

        return load_model(
            "CrossEncoder",
            self.model_name,
            what="cross-encoder",
            field=FIELD,
            missing="cross-encoder rerankers need sentence-transformers: pip "
            "install sentence-transformers (or use an http: reranker)",
        )

    def score(self, query: str, documents: Sequence[str]) -> list[float | None]:
        if self._model is None:
            self._model = self._load()
        if not documents:
            return []
        scores = self._model.predict(
            [(query, d) for d in documents], batch_size=self.batch_size, show_progress_bar=False
        )
        scores = np.asarray(scores, dtype=np.float64).reshape(len(documents), -1)
        return [float(s) for s in scores[:, -1]]  # one label: the score; several: the last


class BiEncoderReranker:
    """Cosine similarity of the query's and each candidate's embedding (any embedder spec)."""

    def __init__(self, embedder_spec: str, **embedder_options: Any) -> None:
        from .embedders import parse

        self.embedder = parse(embedder_spec, **embedder_options)
        self.label = f"biencoder:{self.embedder.label}"

    def score(self, query: str, documents: Sequence[str]) -> list[float | None]:
        from ..testset.query import Query

        texts = [query, *documents]
        items = [Query(query_id=f"t{i}", position=i, text=t or " ") for i, t in enumerate(texts)]
        m = np.asarray(self.embedder.embed(items), dtype=np.float64)
        norms = np.linalg.norm(m, axis=1)
        norms[norms == 0] = 1.0
        m = m / norms[:, None]
        return [float(x) for x in m[1:] @ m[0]]


def parse(
    spec: str | None,
    *,
    model: str | None = None,
    api_key_env: str | None = None,
    timeout: float | None = None,
    batch_size: int | None = None,
    embedder_options: dict | None = None,
) -> Reranker:
    """A reranker for ``spec`` (see the module docstring); InputError when unknown."""
    spec = (spec or "").strip()
    kind, sep, arg = spec.partition(":")
    if kind in ("http", "https") and sep and arg.startswith("//"):
        kind, arg = "http", spec  # a bare URL
    if kind in ("http", "cohere", "jina", "tei", "dashscope") and sep and arg:
        style = {"cohere": "http", "jina": "http"}.get(kind, kind)
        return HttpReranker(
            arg, style, model=model, api_key_env=api_key_env, timeout=timeout, batch_size=batch_size
        )
    if kind in ("cross-encoder", "local") and sep and arg:
        return CrossEncoderReranker(arg, batch_size=batch_size)
    if kind == "biencoder" and sep and arg:
        return BiEncoderReranker(arg, **(embedder_options or {}))
    raise InputError(
        f"unknown reranker '{mask(spec)}' (http:URL, tei:URL, dashscope:URL, "
        "cross-encoder:MODEL, biencoder:EMBEDDER, or exact)",
        field=FIELD,
    )
