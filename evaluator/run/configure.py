"""A pipeline's configuration from its options: stages, ``--set`` settings, ``--opt`` stage
options, the embedder's and the reranker's options. One function for the command line and the
Python API, so both configure a pipeline the same way (and hash it the same way)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import InputError, param
from ..kinds import registry
from ..stages import gucs
from ..stages.gucs import settings_items  # noqa: F401  (the pipeline's and the API's spelling)


@dataclass
class PipelineConfig:
    testset: str
    stages: str  # "exact,hnsw,bm25,merge,rerank" (NAME=KIND allowed)
    target: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    options: dict[str, dict[str, str]] = field(default_factory=dict)  # stage -> key -> value
    depth: int = 100
    repeat: int = 3
    embedder: str | None = None  # spec; default "precomputed"
    embedder_options: dict = field(default_factory=dict)  # base_url, dimensions, api_key_env, ..
    name: str | None = None
    batch: bool = False
    server_timing: bool = False
    isolate_index: bool = False
    statement_timeout: str | None = (
        gucs.DEFAULT_STATEMENT_TIMEOUT
    )  # per statement on the knowledge base (None: server's)
    checksum: bool = True  # content checksum in the fingerprint (one table scan)
    queries: object = None  # testset.query_source.QuerySource (instead of testset)
    # one group of the target (column, value): searched as the application searches it,
    # ``WHERE column = value`` (run/groups.py runs one pipeline per group)
    group: tuple[str, str] | None = None


def parse_options(items: Any, stage_names: list[str]) -> dict[str, dict[str, str]]:
    """('merge:k=60', 'rerank:top_n=50') -> {'merge': {'k': '60'}, 'rerank': {'top_n': '50'}}."""
    out: dict[str, dict[str, str]] = {}
    for item in items or ():
        head, sep, value = str(item).partition("=")
        stage, colon, key = head.partition(":")
        if not sep or not colon or not stage.strip() or not key.strip():
            raise InputError(
                f"'{item}' is not STAGE:KEY=VALUE (e.g. merge:k=60)", field=param("options")
            )
        stage, key = stage.strip(), key.strip()
        if stage not in stage_names:
            raise InputError(
                f"option '{item}' names stage '{stage}', which is not in {param('stages')} "
                f"({', '.join(stage_names)})",
                field=param("options"),
            )
        out.setdefault(stage, {})[key] = value.strip()
    return out


def option_items(options: Any) -> list[str]:
    """``{"merge": {"k": 60}}`` or ``["merge:k=60"]`` -> ``["merge:k=60"]``."""
    if options is None:
        return []
    if isinstance(options, dict):
        return [f"{stage}:{k}={v}" for stage, kv in options.items() for k, v in kv.items()]
    if isinstance(options, str):
        return [options]
    return list(options)


# what `run pipeline` does without options: its one set of defaults (the CLI's option defaults, the
# API's, and the PipelineConfig a caller builds are these)
PIPELINE_DEFAULTS = PipelineConfig(testset="", stages="")
_EMBEDDER_OPTIONS = ("base_url", "dimensions", "api_key_env")


def pipeline_config(
    *,
    testset: str | None,
    stages: str,
    settings: Any = None,
    options: Any = None,
    reranker: str | None = None,
    queries: Any = None,
    **fields: Any,
) -> PipelineConfig:
    """The :class:`PipelineConfig` of `pgeval run pipeline`'s options (same names; what is not
    given takes :data:`PIPELINE_DEFAULTS`): ``settings`` and ``options`` as a mapping or the
    CLI's strings; ``base_url``, ``dimensions``, ``api_key_env`` are the embedder's options;
    ``reranker`` is the default ``reranker`` option of every rerank stage; ``queries`` a
    query-vector source (:mod:`evaluator.testset.query_source`) in place of a test set."""
    parsed = registry.parse_stages(stages)
    opts = parse_options(option_items(options), [n for n, _ in parsed])
    for sname, kind in parsed:  # a key no stage reads would be ignored, yet stored and compared
        registry.get(kind).refuse_options(sname, opts.get(sname, {}))
    if reranker:
        for sname, kind in parsed:
            if kind == "rerank":
                opts.setdefault(sname, {}).setdefault("reranker", reranker)
    emb_opts = {k: fields.pop(k) for k in _EMBEDDER_OPTIONS if fields.get(k) is not None}
    for k in _EMBEDDER_OPTIONS:
        fields.pop(k, None)
    return replace(
        PIPELINE_DEFAULTS,
        testset=testset or "",
        queries=queries,
        stages=stages,
        settings=gucs.parse(settings_items(settings)),
        options=opts,
        embedder_options=emb_opts,
        **fields,
    )
