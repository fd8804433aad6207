"""A local sentence-transformers model (optional extra: ``pip install 'pgeval[local]'``)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import InputError
from . import check_matrix


class LocalEmbedder:
    def __init__(self, model: str, batch_size: int | None = None):
        self.model_name = model
        self.batch_size = batch_size or 32
        self.label = f"local:{model}"
        self._model = None

    def _load(self):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise InputError("local embedders need sentence-transformers: pip install "
                             "'pgeval[local]' (or use openai:MODEL / numpy:FILE.npy)",
                             field="--embedder") from None
        try:
            return SentenceTransformer(self.model_name)
        except Exception as exc:  # unknown model, no network for a download, ...
            first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            raise InputError(f"cannot load model '{self.model_name}': {first}",
                             field="--embedder") from None

    def embed(self, queries: Sequence, on_batch=None) -> np.ndarray:
        for q in queries:
            if not q.text:
                raise InputError(f"query '{q.query_id}' has no text to embed", field="--embedder")
        if self._model is None:
            self._model = self._load()
        out = []
        texts = [q.text for q in queries]
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i:i + self.batch_size]
            out.append(np.asarray(self._model.encode(batch, batch_size=self.batch_size,
                                                     convert_to_numpy=True), dtype=np.float32))
            if on_batch:
                on_batch(len(batch))
        return check_matrix(np.vstack(out) if out else np.zeros((0, 1)), len(queries),
                            "--embedder")
