"""``ivfflat``: pgvector IVFFlat index scan. Settings: ivfflat.probes, ivfflat.iterative_scan,
ivfflat.max_probes. With few probes and iterative scan off a query can return fewer than
``--depth`` rows (recorded per query)."""

from __future__ import annotations

from .vector_common import VectorStage


class IvfflatStage(VectorStage):
    kind = "ivfflat"
