"""One query of a test set as the stages rank for it (text and embedding loaded for the run): what
:mod:`evaluator.providers.embedders.storage` reads and a rerank provider scores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


@dataclass
class Query:
    """One query of the test set, in test-set order (``position``)."""

    query_id: str
    position: int
    text: str | None = None
    embedding: np.ndarray | None = None  # float32 vector, from pgeval.query_embedding
