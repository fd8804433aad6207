"""``diskann``: pgvectorscale StreamingDiskANN index scan. Settings:
diskann.query_search_list_size, diskann.query_rescore.

Trap: DiskANN returns rows in relaxed order (by the quantised distance beyond the rescored
prefix). The stage re-sorts the candidates by exact distance before ranking (see
:mod:`evaluator.stages.vector_sql`)."""

from __future__ import annotations

from .vector_common import VectorStage


class DiskannStage(VectorStage):
    kind = "diskann"
