"""Query embedders. Embeddings are computed once per (test set, embedder) and stored in
``pgeval.query_embedding``; every pipeline run reuses them.

Specs (``--embedder``):

- ``precomputed`` — the test set's own ``embedding`` field (pgeval.query.embedding).
- ``openai:MODEL`` — an OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI, DashScope
  compatible mode, vLLM, TEI, Ollama ...); options ``base_url``, ``dimensions``,
  ``api_key_env`` (name of the environment variable holding the key, default OPENAI_API_KEY),
  ``batch_size``. See :mod:`evaluator.providers.embedders.http`.
- ``local:MODEL`` — a sentence-transformers model on this machine (optional extra
  ``pgeval[local]``), e.g. ``local:sentence-transformers/all-MiniLM-L6-v2``.
- ``numpy:FILE.npy`` (alias ``static:``) — a matrix whose row i is the embedding of query i in
  test-set order (the order of the loaded file), e.g. the Cranfield MiniLM vectors.

The *label* names the embeddings in the database and in every run's configuration
(``openai:MODEL@DIMENSIONS`` when dimensions are requested; ``numpy:NAME#HASH`` with the file's
content hash, so that another file never reuses stale vectors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ...core.errors import InputError, param

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class Embedder(Protocol):
    label: str

    def embed(self, queries: Sequence) -> np.ndarray:
        """Embeddings (n x d, float32) of ``queries`` (:class:`evaluator.stages.base.Query`,
        in test-set order, with ``text`` and any precomputed ``embedding``)."""


def parse(
    spec: str,
    *,
    base_url: str | None = None,
    dimensions: int | None = None,
    api_key_env: str | None = None,
    batch_size: int | None = None,
    timeout: float | None = None,
) -> Embedder:
    """An embedder for ``spec``; InputError naming --embedder when the spec is unknown."""
    spec = (spec or "").strip()
    kind, sep, arg = spec.partition(":")
    if spec == "precomputed":
        from .static import Precomputed

        return Precomputed()
    if kind == "openai" and sep and arg:
        from .http import OpenAIEmbedder

        return OpenAIEmbedder(
            arg,
            base_url=base_url,
            dimensions=dimensions,
            api_key_env=api_key_env,
            batch_size=batch_size,
            timeout=timeout,
        )
    if kind == "local" and sep and arg:
        from .local import LocalEmbedder

        return LocalEmbedder(arg, batch_size=batch_size)
    if kind in ("numpy", "static") and sep and arg:
        from .static import NumpyFile

        return NumpyFile(arg)
    raise InputError(
        f"unknown embedder '{spec}' (precomputed, openai:MODEL, local:MODEL, numpy:FILE.npy)",
        field=param("embedder"),
    )


def texts(queries: Sequence) -> list[str]:
    """The queries' texts to embed; InputError naming --embedder for a query without one."""
    for q in queries:
        if not q.text:
            raise InputError(f"query '{q.query_id}' has no text to embed", field=param("embedder"))
    return [q.text for q in queries]


def check_matrix(matrix: ArrayLike, n: int, source: str) -> np.ndarray:
    """A float32 (n x d) matrix with finite values, else InputError naming ``source``."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise InputError(
            f"expected a 2-d matrix (queries x dimensions), got shape {m.shape}", field=source
        )
    if m.shape[0] != n:
        raise InputError(f"{m.shape[0]} embeddings for {n} queries", field=source)
    bad = np.where(~np.isfinite(m).all(axis=1))[0]
    if len(bad):
        raise InputError(
            f"embedding {int(bad[0])} (row, 0-based) has a NaN or infinite value", field=source
        )
    return m
