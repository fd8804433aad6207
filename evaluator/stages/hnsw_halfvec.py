"""``hnsw-halfvec``: pgvector HNSW on ``halfvec`` (half the index size of ``vector``): the
column and the query both cast to ``halfvec(N)``, served by an index on that expression,
``CREATE INDEX ... USING hnsw ((col::halfvec(N)) halfvec_cosine_ops)`` (pgvector's README, "Half-
Precision Indexing"). Everything else is the hnsw stage's: settings, traps, timing; recall is
measured against exact search on the full-precision column."""

from __future__ import annotations

from .hnsw import HnswStage


class HnswHalfvecStage(HnswStage):
    kind = "hnsw-halfvec"
