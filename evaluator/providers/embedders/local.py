"""A local sentence-transformers model (optional extra: ``pip install 'pgeval[local]'``)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.errors import InputError, first_line, param
from . import check_matrix, texts

if TYPE_CHECKING:
    from collections.abc import Callable


def load_model(class_name: str, model: str, *, missing: str, what: str, field: str) -> Any:
    """``sentence_transformers.<class_name>(model)`` (the optional sentence-transformers package:
    local embedders, cross-encoder rerankers). InputError on ``field`` when the package is not
    installed (``missing`` says what to do) or the model cannot be loaded (``what`` names it)."""
    try:
        cls = getattr(importlib.import_module("sentence_transformers"), class_name)
    except (ImportError, AttributeError):
        raise InputError(missing, field=field) from None
    try:
        return cls(model)
    except Exception as exc:  # unknown model, no network for a download, ...
        first = first_line(exc)
        raise InputError(f"cannot load {what} '{model}': {first}", field=field) from None


class LocalEmbedder:
    def __init__(self, model: str, batch_size: int | None = None):
        self.model_name = model
        self.batch_size = batch_size or 32
        self.label = f"local:{model}"
        self._model: Any = None  # the loaded SentenceTransformer (untyped package)

    def _load(self) -> Any:
        return load_model(
            "SentenceTransformer",
            self.model_name,
            what="model",
            field=param("embedder"),
            missing="local embedders need sentence-transformers: pip install "
            "'pgeval[local]' (or use openai:MODEL / numpy:FILE.npy)",
        )

    def embed(self, queries: Sequence, on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        all_texts = texts(queries)
        if self._model is None:
            self._model = self._load()
        out = []
        for i in range(0, len(all_texts), self.batch_size):
            batch = all_texts[i : i + self.batch_size]
            out.append(
                np.asarray(
                    self._model.encode(batch, batch_size=self.batch_size, convert_to_numpy=True),
                    dtype=np.float32,
                )
            )
            if on_batch:
                on_batch(len(batch))
        return check_matrix(
            np.vstack(out) if out else np.zeros((0, 1)), len(queries), param("embedder")
        )
