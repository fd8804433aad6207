"""What a front end shows besides results: the defaults of each use case's configuration, the
choices of its options, the fixed texts and the wording of results (one definition each, in the
library; the command line reads them here).

Each name is loaded from its module when it is first read (``__getattr__``): a command's
``--help`` reads only the defaults and choices it shows, and imports no more of the library
than those (``tests/test_startup_imports.py``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..captured.store import HOW as CAPTURE_HOW
    from ..dba.advise.config import ADVISE_DEFAULTS
    from ..dba.advise.report import flow_lines as advise_flow_lines
    from ..dba.advise.report import rows as advise_rows
    from ..dba.advise.shapes import line as advise_shapes_line
    from ..dba.fingerprint import short_hash
    from ..dba.sweep.configure import SWEEP_DEFAULTS
    from ..dba.sweep.grid import BUILD_OPTIONS
    from ..dba.sweep.operating_points import reaches
    from ..dba.sweep.shapes import short as short_statement
    from ..dba.sweep.text import (
        consistency_line,
        find_line,
        grouped_consistency_line,
        held_out_line,
        plot_title,
        recommendation_line,
        server_label,
    )
    from ..dba.warmup_target import WARMUP_DEFAULTS
    from ..dba.watch.advice import when as probe_time
    from ..dba.watch.config import WATCH_DEFAULTS
    from ..dba.watch.exposition import text as openmetrics_text
    from ..dba.watch.groups import weighted as shapes_weighted
    from ..measure.measures import parse as parse_measure
    from ..measure.measures import ranked as ranked_measures
    from ..measure.measures import stage_measures
    from ..measure.metrics import measures_for
    from ..measure.recall_distribution import text as recall_text
    from ..measure.stage_method import label as stage_label
    from ..measure.stage_report import chain_text
    from ..reporting.common import LEVELS_NOTE
    from ..reporting.gate import DEFAULT_RULES
    from ..run.configure import PIPELINE_DEFAULTS
    from ..stages.registry import advise_kinds, ann_kinds, find_settings, vector_kinds
    from ..stages.registry import listing as kinds_listing
    from ..targets.groups import DEFAULT_MAX_GROUPS
    from ..testset.query_source import SAMPLED_BIAS, bounded
    from ..testset.query_source import in_words as queries_in_words
    from ..testset.query_source import label as queries_label

# name -> (module under evaluator, its name there); the imports above say the same for mypy
_SOURCES = {
    "ADVISE_DEFAULTS": ("dba.advise.config", "ADVISE_DEFAULTS"),
    "BUILD_OPTIONS": ("dba.sweep.grid", "BUILD_OPTIONS"),
    "CAPTURE_HOW": ("captured.store", "HOW"),
    "advise_kinds": ("stages.registry", "advise_kinds"),
    "find_settings": ("stages.registry", "find_settings"),
    "vector_kinds": ("stages.registry", "vector_kinds"),
    "kinds_listing": ("stages.registry", "listing"),
    "DEFAULT_MAX_GROUPS": ("targets.groups", "DEFAULT_MAX_GROUPS"),
    "DEFAULT_RULES": ("reporting.gate", "DEFAULT_RULES"),
    "LEVELS_NOTE": ("reporting.common", "LEVELS_NOTE"),
    "advise_rows": ("dba.advise.report", "rows"),
    "advise_flow_lines": ("dba.advise.report", "flow_lines"),
    "advise_shapes_line": ("dba.advise.shapes", "line"),
    "PIPELINE_DEFAULTS": ("run.configure", "PIPELINE_DEFAULTS"),
    "SAMPLED_BIAS": ("testset.query_source", "SAMPLED_BIAS"),
    "bounded": ("testset.query_source", "bounded"),
    "queries_label": ("testset.query_source", "label"),
    "queries_in_words": ("testset.query_source", "in_words"),
    "SWEEP_DEFAULTS": ("dba.sweep.configure", "SWEEP_DEFAULTS"),
    "WARMUP_DEFAULTS": ("dba.warmup_target", "WARMUP_DEFAULTS"),
    "WATCH_DEFAULTS": ("dba.watch.config", "WATCH_DEFAULTS"),
    "ann_kinds": ("stages.registry", "ann_kinds"),
    "chain_text": ("measure.stage_report", "chain_text"),
    "recall_text": ("measure.recall_distribution", "text"),
    "find_line": ("dba.sweep.text", "find_line"),
    "consistency_line": ("dba.sweep.text", "consistency_line"),
    "grouped_consistency_line": ("dba.sweep.text", "grouped_consistency_line"),
    "held_out_line": ("dba.sweep.text", "held_out_line"),
    "measures_for": ("measure.metrics", "measures_for"),
    "plot_title": ("dba.sweep.text", "plot_title"),
    "probe_time": ("dba.watch.advice", "when"),
    "openmetrics_text": ("dba.watch.exposition", "text"),
    "shapes_weighted": ("dba.watch.groups", "weighted"),
    "short_statement": ("dba.sweep.shapes", "short"),
    "parse_measure": ("measure.measures", "parse"),
    "ranked_measures": ("measure.measures", "ranked"),
    "reaches": ("dba.sweep.operating_points", "reaches"),
    "recommendation_line": ("dba.sweep.text", "recommendation_line"),
    "server_label": ("dba.sweep.text", "server_label"),
    "short_hash": ("dba.fingerprint", "short_hash"),
    "stage_measures": ("measure.measures", "stage_measures"),
    "stage_label": ("measure.stage_method", "label"),
}

__all__ = [
    "ADVISE_DEFAULTS",
    "BUILD_OPTIONS",
    "CAPTURE_HOW",
    "DEFAULT_MAX_GROUPS",
    "DEFAULT_RULES",
    "LEVELS_NOTE",
    "advise_rows",
    "advise_flow_lines",
    "advise_shapes_line",
    "PIPELINE_DEFAULTS",
    "SAMPLED_BIAS",
    "bounded",
    "queries_label",
    "queries_in_words",
    "SWEEP_DEFAULTS",
    "WARMUP_DEFAULTS",
    "WATCH_DEFAULTS",
    "advise_kinds",
    "ann_kinds",
    "find_settings",
    "kinds_listing",
    "vector_kinds",
    "chain_text",
    "recall_text",
    "find_line",
    "consistency_line",
    "grouped_consistency_line",
    "held_out_line",
    "measures_for",
    "plot_title",
    "probe_time",
    "openmetrics_text",
    "shapes_weighted",
    "short_statement",
    "parse_measure",
    "ranked_measures",
    "reaches",
    "recommendation_line",
    "server_label",
    "short_hash",
    "stage_measures",
    "stage_label",
]


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = source
    value = getattr(importlib.import_module(f"evaluator.{module}"), attr)
    globals()[name] = value  # read once: the next read is a plain global
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SOURCES})
