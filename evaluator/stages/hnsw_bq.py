"""``hnsw-bq``: pgvector HNSW over binary-quantized vectors, re-ranked by the full vector, as
pgvector's README ("Binary Quantization") runs it::

    SELECT id, dist FROM (SELECT id, e <=> $1 AS dist FROM t
                          ORDER BY binary_quantize(e)::bit(N) <~> binary_quantize($1)
                          LIMIT bq.candidates) s
     ORDER BY dist LIMIT k

served by ``CREATE INDEX ... USING hnsw ((binary_quantize(e)::bit(N)) bit_hamming_ops)`` (a
32x smaller index). ``bq.candidates`` (default ``vector_sql.BQ_CANDIDATES_PER_ROW`` x the LIMIT) is a
setting of pgeval's own, swept like a server setting (``--param bq.candidates=20,40,80``); the
whole two-level statement is timed, as the application runs it."""

from __future__ import annotations

from .hnsw import HnswStage


class HnswBqStage(HnswStage):
    kind = "hnsw-bq"
