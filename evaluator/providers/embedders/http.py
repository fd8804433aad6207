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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.errors import InputError, param
from ...core.masking import mask
from ..http_json import JsonClient, key_from_env, openai_base_url
from . import check_matrix, texts

if TYPE_CHECKING:
    from collections.abc import Callable

DEFAULT_BATCH = 10
RETRIES = 5
BACKOFF_S = 0.5


class OpenAIEmbedder:
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        dimensions: int | None = None,
        api_key_env: str | None = None,
        batch_size: int | None = None,
        timeout: float | None = None,
        retries: int = RETRIES,
        backoff_s: float = BACKOFF_S,
    ):
        self.model = model
        self.base_url = openai_base_url(base_url, "base URL")
        self.dimensions = dimensions
        self.api_key_env = "OPENAI_API_KEY" if api_key_env is None else api_key_env
        self.batch_size = batch_size or DEFAULT_BATCH
        self.timeout = timeout or 60.0
        self.retries, self.backoff_s = retries, backoff_s
        self.label = f"openai:{model}" + (f"@{dimensions}" if dimensions else "")
        self._client: JsonClient | None = None

    @property
    def url(self) -> str:
        return f"{self.base_url}/embeddings"

    @property
    def shown_url(self) -> str:
        """The URL as messages show it (a password or key in it masked)."""
        return mask(self.url)

    def _api_key(self) -> str | None:
        return key_from_env(self.api_key_env)

    def _request(self, texts: list[str]) -> list[list[float]]:
        body: dict[str, object] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        assert self._client is not None, "embed() opens the client"
        payload = self._client.post(body)
        try:
            return self._vectors(payload, len(texts))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(
                f"{self.shown_url} answered something that is not an embeddings "
                f"response: {self._client.scrub(str(exc))}",
                field=param("base_url"),
            ) from None

    def _vectors(self, payload: Any, n: int) -> list[list[float]]:
        items = payload["data"]
        if len(items) != n:
            raise ValueError(f"{len(items)} embeddings for {n} inputs")
        items = sorted(items, key=lambda d: d.get("index", 0))
        return [d["embedding"] for d in items]

    def embed(self, queries: Sequence, on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        all_texts = texts(queries)
        self._client = JsonClient(
            self.url,
            key=self._api_key(),
            timeout=self.timeout,
            retries=self.retries,
            backoff_s=self.backoff_s,
            field=param("embedder"),
            retry_field=param("base_url"),
        )
        rows: list[list[float]] = []
        for i in range(0, len(queries), self.batch_size):
            batch = all_texts[i : i + self.batch_size]
            rows.extend(self._request(batch))
            if on_batch:
                on_batch(len(batch))
        m = check_matrix(rows if rows else np.zeros((0, 1)), len(queries), param("embedder"))
        if self.dimensions and m.shape[1] != self.dimensions:
            raise InputError(
                f"{self.shown_url} returned {m.shape[1]}-dimensional embeddings, "
                f"{self.dimensions} requested",
                field=param("dimensions"),
            )
        return m
