"""The demo's real collection: Cranfield 1400 (1,400 aeronautics abstracts, 225 queries, graded
judgements) with all-MiniLM-L6-v2 embeddings of documents and queries (384-d, L2-normalised),
shipped gzipped in ``data/cranfield`` (source and terms: docs/datasets.md).

Chunk ids are the document numbers ("1".."1400"), the chunk text is the abstract (the title where
it is empty), exactly what was embedded. Query ids are "1".."225" by position in cran.qry.
Judgements keep Cleverdon's codes; the test set is loaded with the explicit grade map
:data:`~evaluator.testset.datasets.cranfield.GRADE_MAP_SPEC` (1→3, 2→2, 3→1, 4→0, -1→0), so 3
queries judged only of minimum interest are marked not answerable (222 valid)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import numpy as np

from ..testset.datasets import cranfield
from .corpus import Corpus

GRADE_MAP_SPEC = cranfield.GRADE_MAP_SPEC
DATA = Path(__file__).resolve().parent / "data" / "cranfield"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _vectors(name: str) -> np.ndarray:
    raw = gzip.decompress((DATA / "minilm" / f"{name}.npy.gz").read_bytes())
    return np.load(io.BytesIO(raw), allow_pickle=False)


def load(folder: Path = DATA) -> Corpus:
    """The collection as the demo's :class:`Corpus`; query records carry raw Cleverdon codes
    (load them with ``--grade-map`` :data:`cranfield.GRADE_MAP_SPEC`)."""
    docs = cranfield.documents(folder)
    qs = cranfield.queries(folder)
    doc_vecs, query_vecs = _vectors("documents"), _vectors("queries")
    if doc_vecs.shape[0] != len(docs) or query_vecs.shape[0] != len(qs):
        raise ValueError(
            f"{folder}: {len(docs)} documents and {len(qs)} queries, but "
            f"{doc_vecs.shape[0]} and {query_vecs.shape[0]} embeddings"
        )
    judged: dict[str, dict[str, str]] = {}
    for qid, doc, code in cranfield.qrels(folder):
        judged.setdefault(qid, {})[doc] = code
    queries = []
    for (qid, text), vec in zip(qs, query_vecs):
        record: dict[str, Any] = {
            "id": qid,
            "query": text,
            "relevant": judged.get(qid, {}),
            "embedding": [float(x) for x in vec],
        }
        if not any(cranfield.GRADE_MAP[c] for c in record["relevant"].values()):
            record["answerable"] = False  # judged only of minimum interest: nothing to find
        queries.append(record)
    chunks = [(doc, body) for doc, _title, body in docs]
    return Corpus(chunks=chunks, vectors=doc_vecs.astype(np.float32), queries=queries)
