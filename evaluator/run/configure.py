"""A pipeline's configuration from its options: stages, ``--set`` settings, ``--opt`` stage
options, the embedder's and the reranker's options. One function for the command line and the
Python API, so both configure a pipeline the same way (and hash it the same way)."""

from __future__ import annotations

from typing import Any

from ..stages import gucs, registry
from .pipeline import PipelineConfig, parse_options


def settings_items(settings: dict | None) -> list[str]:
    """``{"hnsw.ef_search": 40}`` or ``["hnsw.ef_search=40"]`` -> ``["hnsw.ef_search=40"]``: a
    mapping goes through the one ``--set`` parser (:func:`evaluator.stages.gucs.parse`) too."""
    if settings is None:
        return []
    if isinstance(settings, dict):
        return [f"{k}={v}" for k, v in settings.items()]
    if isinstance(settings, str):
        return [settings]
    return list(settings)


def option_items(options: Any) -> list[str]:
    """``{"merge": {"k": 60}}`` or ``["merge:k=60"]`` -> ``["merge:k=60"]``."""
    if options is None:
        return []
    if isinstance(options, dict):
        return [f"{stage}:{k}={v}" for stage, kv in options.items() for k, v in kv.items()]
    if isinstance(options, str):
        return [options]
    return list(options)


def pipeline_config(
    *,
    testset: str | None,
    stages: str,
    target: str | None = None,
    settings: dict | None = None,
    options: Any = None,
    depth: int = 100,
    repeat: int = 3,
    embedder: str | None = None,
    base_url: str | None = None,
    dimensions: int | None = None,
    api_key_env: str | None = None,
    reranker: str | None = None,
    name: str | None = None,
    batch: bool = False,
    server_timing: bool = False,
    isolate_index: bool = False,
    statement_timeout: str | None = "5min",
    checksum: bool = True,
    queries: Any = None,
) -> PipelineConfig:
    """The :class:`PipelineConfig` of `pgeval run pipeline`'s options (same names, same
    defaults); ``reranker`` is the default ``reranker`` option of every rerank stage;
    ``queries`` a query-vector source (:mod:`evaluator.testset.query_source`) in place of a
    test set."""
    parsed = registry.parse_stages(stages)
    opts = parse_options(option_items(options), [n for n, _ in parsed])
    if reranker:
        for sname, kind in parsed:
            if kind == "rerank":
                opts.setdefault(sname, {}).setdefault("reranker", reranker)
    emb_opts = {
        k: v
        for k, v in (
            ("base_url", base_url),
            ("dimensions", dimensions),
            ("api_key_env", api_key_env),
        )
        if v is not None
    }
    return PipelineConfig(
        testset=testset or "",
        queries=queries,
        stages=stages,
        target=target,
        settings=gucs.parse(settings_items(settings)),
        options=opts,
        depth=depth,
        repeat=repeat,
        embedder=embedder,
        embedder_options=emb_opts,
        name=name,
        batch=batch,
        server_timing=server_timing,
        isolate_index=isolate_index,
        statement_timeout=statement_timeout,
        checksum=checksum,
    )
