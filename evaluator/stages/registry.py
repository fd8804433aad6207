"""Stage kind -> runner class. Add a line per kind (modules load lazily).

The pipeline looks names up here; ``pgeval run pipeline --stages exact,hnsw,bm25,merge`` runs them
in that order. A stage name may carry a kind explicitly as ``NAME=KIND`` (``hnsw2=hnsw``) so that
one experiment can hold two stages of one kind.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..core.errors import InputError

STAGES = {
    "exact": "evaluator.stages.exact:ExactStage",
    "hnsw": "evaluator.stages.hnsw:HnswStage",
    "ivfflat": "evaluator.stages.ivfflat:IvfflatStage",
    "diskann": "evaluator.stages.diskann:DiskannStage",
    "import": "evaluator.stages.import_stage:ImportStage",
    "bm25": "evaluator.stages.bm25:Bm25Stage",
    "merge": "evaluator.stages.merge:MergeStage",
    "rerank": "evaluator.stages.rerank:RerankStage",
    "service": "evaluator.stages.service:ServiceStage",
    "weknora-vector": "evaluator.stages.service:WeknoraVectorStage",
    "weknora-keyword": "evaluator.stages.service:WeknoraKeywordStage",
    "weknora-hybrid": "evaluator.stages.service:WeknoraHybridStage",
    "weknora-final": "evaluator.stages.service:WeknoraFinalStage",
}


def kinds() -> list[str]:
    return list(STAGES)


def get(kind: str) -> Any:  # the registered runner class's instance (a Stage)
    """A new instance of the runner for ``kind``; InputError naming --stages when unknown."""
    target = STAGES.get(kind)
    if target is None:
        raise InputError(f"unknown stage '{kind}' (known: {', '.join(STAGES)})", field="--stages")
    module, attr = target.split(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(
            f"stage '{kind}' is not available in this build ({exc})", field="--stages"
        ) from None
    return cls()


def parse_stages(spec: str) -> list[tuple[str, str]]:
    """'exact,hnsw,fast=hnsw' -> [("exact","exact"), ("hnsw","hnsw"), ("fast","hnsw")]."""
    out: list[tuple[str, str]] = []
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, _, kind = item.partition("=")
        name, kind = name.strip(), (kind.strip() or name.strip())
        if kind not in STAGES:
            raise InputError(
                f"unknown stage '{kind}' (known: {', '.join(STAGES)})", field="--stages"
            )
        if not name.replace("_", "").replace("-", "").isalnum():
            raise InputError(
                f"stage name '{name}' must be letters, digits, '-' or '_'", field="--stages"
            )
        if any(n == name for n, _ in out):
            raise InputError(
                f"stage '{name}' is listed twice (name the second one, e.g. {name}2={kind})",
                field="--stages",
            )
        out.append((name, kind))
    if not out:
        raise InputError("no stages given", field="--stages")
    return out
