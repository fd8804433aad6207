"""``exact``: brute-force kNN over the target (index scans disabled with
``SET LOCAL enable_indexscan = off``, so neither HNSW, IVFFlat nor DiskANN can serve it; the
plan is checked). Its distances are the ceiling every ANN stage is measured against."""

from __future__ import annotations

from .vector_common import VectorStage


class ExactStage(VectorStage):
    kind = "exact"
    method = None
    guc_prefixes = ()
    defaults = {"enable_indexscan": "off"}
