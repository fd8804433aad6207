"""Embedders that compute nothing: the test set's own vectors, or a matrix in a .npy file."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...core.errors import InputError, param
from . import check_matrix


class Precomputed:
    """The ``embedding`` field the test set was loaded with (pgeval.query.embedding)."""

    label = "precomputed"

    def embed(self, queries: Sequence) -> np.ndarray:
        dims = set()
        for q in queries:
            if q.embedding is None:
                raise InputError(
                    f"query '{q.query_id}' has no embedding in the test set (load "
                    "the test set with an 'embedding' field or choose another "
                    f"{param('embedder')})",
                    field=param("embedder"),
                )
            dims.add(len(q.embedding))
        if len(dims) > 1:
            raise InputError(
                f"the test set's embeddings have several dimensions: {sorted(dims)}",
                field=param("embedder"),
            )
        return check_matrix([q.embedding for q in queries], len(queries), param("embedder"))


class NumpyFile:
    """Row i of a .npy matrix is the embedding of query i in test-set order."""

    def __init__(self, path: str):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"no such file: {self.path}", field=param("embedder"))
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:12]
        self.label = f"numpy:{self.path.name}#{digest}"

    def embed(self, queries: Sequence) -> np.ndarray:
        try:
            matrix = np.load(self.path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InputError(f"cannot read a numpy matrix: {exc}", file=str(self.path)) from None
        if matrix.ndim == 2 and matrix.shape[0] != len(queries):
            raise InputError(
                f"{matrix.shape[0]} rows for {len(queries)} queries of the test set "
                "(row i must be query i in test-set order)",
                file=str(self.path),
            )
        return check_matrix(matrix, len(queries), str(self.path))
