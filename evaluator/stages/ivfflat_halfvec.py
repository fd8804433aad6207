"""``ivfflat-halfvec``: pgvector IVFFlat on ``halfvec`` (half the index size of ``vector``): the
column and the query both cast to ``halfvec(N)``, served by an index on that expression,
``CREATE INDEX ... USING ivfflat ((col::halfvec(N)) halfvec_cosine_ops)`` (pgvector's README,
"Half-Precision Indexing"). Everything else is the ivfflat stage's: settings, timing; recall is
measured against exact search on the full-precision column."""

from __future__ import annotations

from .ivfflat import IvfflatStage


class IvfflatHalfvecStage(IvfflatStage):
    kind = "ivfflat-halfvec"
