"""An OpenAI-compatible embeddings endpoint: ``POST {base_url}/embeddings`` with
``{"model", "input": [texts], "dimensions"?, "encoding_format": "float"}``, answered by
``{"data": [{"index", "embedding"}]}``. Works with OpenAI, DashScope's compatible mode
(text-embedding-v4 takes at most 10 inputs per request: the default batch size), vLLM, TEI,
Ollama and LiteLLM.

Batching, retries with exponential backoff (honouring ``Retry-After``) on 429, 5xx and network
errors; any other 4xx stops at once with the server's message. The API key comes from the
environment variable named by ``api_key_env`` (default ``OPENAI_API_KEY``; an empty name sends
no key, for local servers) and never appears in a message or a log.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Sequence

import numpy as np

from ..errors import InputError
from . import check_matrix

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_BATCH = 10
RETRIES = 5
BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0


class OpenAIEmbedder:
    def __init__(self, model: str, *, base_url: str | None = None, dimensions: int | None = None,
                 api_key_env: str | None = None, batch_size: int | None = None,
                 timeout: float | None = None, retries: int = RETRIES,
                 backoff_s: float = BACKOFF_S):
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.base_url = self.base_url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise InputError(f"base URL '{self.base_url}' must start with http:// or https://",
                             field="--base-url")
        self.dimensions = dimensions
        self.api_key_env = "OPENAI_API_KEY" if api_key_env is None else api_key_env
        self.batch_size = batch_size or DEFAULT_BATCH
        self.timeout = timeout or 60.0
        self.retries, self.backoff_s = retries, backoff_s
        self.label = f"openai:{model}" + (f"@{dimensions}" if dimensions else "")
        self.requests = 0      # requests sent, retries included (for reports and tests)
        self._key: str | None = None

    @property
    def url(self) -> str:
        return f"{self.base_url}/embeddings"

    def _api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise InputError(f"environment variable {self.api_key_env} is not set (it must hold "
                             "the API key; name another with --api-key-env, or pass "
                             "--api-key-env '' for a server without keys)", field="--api-key-env")
        return key

    def _scrub(self, text: str) -> str:
        if self._key and len(self._key) >= 4:
            text = text.replace(self._key, "***")
        return text

    def _request(self, texts: list[str]) -> list[list[float]]:
        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        data = json.dumps(body).encode("utf-8")
        last = ""
        for attempt in range(self.retries + 1):
            self.requests += 1
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            wait = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    payload = json.loads(resp.read().decode("utf-8"))
                return self._vectors(payload, len(texts))
            except urllib.error.HTTPError as exc:
                detail = self._scrub(_error_message(exc))
                if exc.code == 429 or exc.code >= 500:
                    last = f"HTTP {exc.code}: {detail}"
                    wait = _retry_after(exc.headers.get("Retry-After"))
                else:
                    raise InputError(f"{self.url} answered HTTP {exc.code}: {detail}",
                                     field="--embedder") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = self._scrub(f"{reason}")
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{self.url} answered something that is not an embeddings "
                                 f"response: {self._scrub(str(exc))}", field="--base-url") from None
            if attempt < self.retries:
                time.sleep(min(MAX_BACKOFF_S, wait if wait is not None
                               else self.backoff_s * (2 ** attempt)))
        raise InputError(f"{self.url} failed after {self.retries + 1} attempts: {last}",
                         field="--base-url")

    def _vectors(self, payload: dict, n: int) -> list[list[float]]:
        items = payload["data"]
        if len(items) != n:
            raise ValueError(f"{len(items)} embeddings for {n} inputs")
        items = sorted(items, key=lambda d: d.get("index", 0))
        return [d["embedding"] for d in items]

    def embed(self, queries: Sequence, on_batch=None) -> np.ndarray:
        for q in queries:
            if not q.text:
                raise InputError(f"query '{q.query_id}' has no text to embed", field="--embedder")
        self._key = self._api_key()
        rows: list[list[float]] = []
        for i in range(0, len(queries), self.batch_size):
            batch = [q.text for q in queries[i:i + self.batch_size]]
            rows.extend(self._request(batch))
            if on_batch:
                on_batch(len(batch))
        m = check_matrix(rows if rows else np.zeros((0, 1)), len(queries), "--embedder")
        if self.dimensions and m.shape[1] != self.dimensions:
            raise InputError(f"{self.url} returned {m.shape[1]}-dimensional embeddings, "
                             f"{self.dimensions} requested", field="--dimensions")
        return m


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read().decode("utf-8", "replace")
    except Exception:
        raw = ""
    try:
        doc = json.loads(raw)
        err = doc.get("error", doc) if isinstance(doc, dict) else doc
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return " ".join(str(msg).split())[:300]
    except ValueError:
        pass
    return " ".join(raw.split())[:300] or (exc.reason or "")


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
