"""What a front end shows besides results: the defaults of each use case's configuration, the
choices of its options, the fixed texts and the wording of results (one definition each, in the
library; the command line reads them here)."""

from __future__ import annotations

from ..dba.advise.config import ADVISE_DEFAULTS
from ..dba.advise.report import rows as advise_rows
from ..dba.fingerprint import short_hash
from ..dba.sweep.configure import SWEEP_DEFAULTS
from ..dba.sweep.grid import BUILD_OPTIONS
from ..dba.sweep.text import find_line, plot_title, recommendation_line, server_label
from ..dba.warmup_target import WARMUP_DEFAULTS
from ..dba.watch.advice import when as probe_time
from ..dba.watch.exposition import text as openmetrics_text
from ..measure.measures import parse as parse_measure
from ..measure.measures import ranked as ranked_measures
from ..measure.measures import stage_measures
from ..measure.metrics import measures_for
from ..measure.stage_method import label as stage_label
from ..measure.stage_report import chain_text
from ..reporting.common import LEVELS_NOTE
from ..reporting.gate import DEFAULT_RULES
from ..run.configure import PIPELINE_DEFAULTS
from ..stages.registry import advise_kinds, ann_kinds, find_settings, vector_kinds
from ..stages.registry import listing as kinds_listing
from ..target.groups import DEFAULT_MAX_GROUPS
from ..testset.query_source import SAMPLED_BIAS

__all__ = [
    "ADVISE_DEFAULTS",
    "BUILD_OPTIONS",
    "DEFAULT_MAX_GROUPS",
    "DEFAULT_RULES",
    "LEVELS_NOTE",
    "advise_rows",
    "PIPELINE_DEFAULTS",
    "SAMPLED_BIAS",
    "SWEEP_DEFAULTS",
    "WARMUP_DEFAULTS",
    "advise_kinds",
    "ann_kinds",
    "find_settings",
    "kinds_listing",
    "vector_kinds",
    "chain_text",
    "find_line",
    "measures_for",
    "plot_title",
    "probe_time",
    "openmetrics_text",
    "parse_measure",
    "ranked_measures",
    "recommendation_line",
    "server_label",
    "short_hash",
    "stage_measures",
    "stage_label",
]
