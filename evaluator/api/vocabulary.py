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
    from ..kinds.registry import advise_kinds, ann_kinds, find_settings, vector_kinds
    from ..kinds.registry import listing as kinds_listing
    from ..measure.measures import parse as parse_measure
    from ..measure.measures import ranked as ranked_measures
    from ..measure.measures import stage_measures
    from ..measure.metrics import measures_for
    from ..measure.operating_points import reaches
    from ..measure.recall_distribution import text as recall_text
    from ..measure.stage_method import label as stage_label
    from ..measure.stage_report import chain_text
    from ..reporting.common import LEVELS_NOTE
    from ..reporting.gate import DEFAULT_RULES
    from ..run.configure import PIPELINE_DEFAULTS
    from ..table.fingerprint import short_hash
    from ..table.warmup_target import WARMUP_DEFAULTS
    from ..targets.groups import DEFAULT_MAX_GROUPS
    from ..testset.query_source import SAMPLED_BIAS, bounded
    from ..testset.query_source import in_words as queries_in_words
    from ..testset.query_source import label as queries_label
    from ..tuning.advise.config import ADVISE_DEFAULTS
    from ..tuning.advise.report import flow_lines as advise_flow_lines
    from ..tuning.advise.report import rows as advise_rows
    from ..tuning.advise.shapes import line as advise_shapes_line
    from ..tuning.sweep.configure import SWEEP_DEFAULTS
    from ..tuning.sweep.grid import BUILD_OPTIONS
    from ..tuning.sweep.shapes import short as short_statement
    from ..tuning.sweep.text import (
        consistency_line,
        find_line,
        grouped_consistency_line,
        held_out_line,
        plot_title,
        recommendation_line,
        server_label,
    )
    from ..tuning.watch.advice import when as probe_time
    from ..tuning.watch.config import WATCH_DEFAULTS
    from ..tuning.watch.exposition import text as openmetrics_text
    from ..tuning.watch.groups import weighted as shapes_weighted

# name -> (module under evaluator, its name there); the imports above say the same for mypy
_SOURCES = {
    "ADVISE_DEFAULTS": ("tuning.advise.config", "ADVISE_DEFAULTS"),
    "BUILD_OPTIONS": ("tuning.sweep.grid", "BUILD_OPTIONS"),
    "CAPTURE_HOW": ("captured.store", "HOW"),
    "advise_kinds": ("kinds.registry", "advise_kinds"),
    "find_settings": ("kinds.registry", "find_settings"),
    "vector_kinds": ("kinds.registry", "vector_kinds"),
    "kinds_listing": ("kinds.registry", "listing"),
    "DEFAULT_MAX_GROUPS": ("targets.groups", "DEFAULT_MAX_GROUPS"),
    "DEFAULT_RULES": ("reporting.gate", "DEFAULT_RULES"),
    "LEVELS_NOTE": ("reporting.common", "LEVELS_NOTE"),
    "advise_rows": ("tuning.advise.report", "rows"),
    "advise_flow_lines": ("tuning.advise.report", "flow_lines"),
    "advise_shapes_line": ("tuning.advise.shapes", "line"),
    "PIPELINE_DEFAULTS": ("run.configure", "PIPELINE_DEFAULTS"),
    "SAMPLED_BIAS": ("testset.query_source", "SAMPLED_BIAS"),
    "bounded": ("testset.query_source", "bounded"),
    "queries_label": ("testset.query_source", "label"),
    "queries_in_words": ("testset.query_source", "in_words"),
    "SWEEP_DEFAULTS": ("tuning.sweep.configure", "SWEEP_DEFAULTS"),
    "WARMUP_DEFAULTS": ("table.warmup_target", "WARMUP_DEFAULTS"),
    "WATCH_DEFAULTS": ("tuning.watch.config", "WATCH_DEFAULTS"),
    "ann_kinds": ("kinds.registry", "ann_kinds"),
    "chain_text": ("measure.stage_report", "chain_text"),
    "recall_text": ("measure.recall_distribution", "text"),
    "find_line": ("tuning.sweep.text", "find_line"),
    "consistency_line": ("tuning.sweep.text", "consistency_line"),
    "grouped_consistency_line": ("tuning.sweep.text", "grouped_consistency_line"),
    "held_out_line": ("tuning.sweep.text", "held_out_line"),
    "measures_for": ("measure.metrics", "measures_for"),
    "plot_title": ("tuning.sweep.text", "plot_title"),
    "probe_time": ("tuning.watch.advice", "when"),
    "openmetrics_text": ("tuning.watch.exposition", "text"),
    "shapes_weighted": ("tuning.watch.groups", "weighted"),
    "short_statement": ("tuning.sweep.shapes", "short"),
    "parse_measure": ("measure.measures", "parse"),
    "ranked_measures": ("measure.measures", "ranked"),
    "reaches": ("measure.operating_points", "reaches"),
    "recommendation_line": ("tuning.sweep.text", "recommendation_line"),
    "server_label": ("tuning.sweep.text", "server_label"),
    "short_hash": ("table.fingerprint", "short_hash"),
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
