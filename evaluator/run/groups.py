"""A pipeline per group of a target (``pgeval run pipeline --group-by COLUMN``): each chosen
group searched as the application scopes it (``WHERE column = value``), rows of it as queries
(``--sample-queries N`` spread over the groups, or ``--group-queries M`` each), exact ground
truth within the group, one experiment per group named ``NAME/column=value``. Per group and
ANN stage: index recall@K against exact search, short lists and p95, read from SQL
(``pgeval.index_recall_summary``, ``pgeval.stage_latency``); the groups worst first (by their lowest
recall over the ANN stages). The sweep's counterpart is :mod:`evaluator.tuning.sweep.groups`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..core.db import Database
from ..core.errors import InputError, PlanError, param
from ..core.warnings_once import once
from ..targets.groups import DEFAULT_MAX_GROUPS, Group, plan
from .pipeline import PipelineConfig, default_name, run_pipeline


@dataclass
class GroupPipelineResult:
    column: str
    k: int
    groups_total: int
    chosen: str  # which groups were measured, in words
    null_rows: int = 0
    skipped: list[dict] = field(default_factory=list)  # {"group", "rows", "why"}
    failed: dict[str, str] = field(default_factory=dict)  # group -> why it was not measured
    groups: list[dict] = field(default_factory=list)  # worst first
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "group_by": self.column,
            "k": self.k,
            "groups_total": self.groups_total,
            "chosen": self.chosen,
            "null_rows": self.null_rows,
            "skipped": self.skipped,
            "failed": [{"group": g, "why": w} for g, w in self.failed.items()],
            "groups": self.groups,
            "warnings": self.warnings,
        }


def run_pipeline_groups(
    database: Database,
    cfg: PipelineConfig,
    column: str,
    *,
    k: int = 10,
    max_groups: int = DEFAULT_MAX_GROUPS,
    group_queries: int | None = None,
    on_group: Any = None,
    on_warning: Any = None,
    **callbacks: Any,
) -> GroupPipelineResult:
    """Run ``cfg`` once per chosen group of ``column`` (see the module's docstring;
    ``group_queries``: sampled queries per group); ``on_group(index, count, group)`` before
    each; ``callbacks`` go to :func:`run_pipeline`."""
    if not cfg.target:
        raise InputError(f"{param('group_by')} needs {param('target')}", field=param("target"))
    groups = plan(database, cfg.target, column, max_groups, cfg.queries, "measure", group_queries)
    out = GroupPipelineResult(
        column, k, groups.total, groups.chosen, null_rows=groups.nulls, skipped=groups.skipped
    )

    warn = once(out.warnings, on_warning)

    if groups.null_warning:
        warn(groups.null_warning)
    measured = groups.measured
    base = cfg.name or default_name(cfg.testset or "queries", cfg.target)
    for i, g in enumerate(measured, 1):
        if on_group:
            on_group(i, len(measured), g)
        gcfg = replace(
            cfg,
            group=(column, g.value),
            queries=groups.queries_of(cfg.queries, g),
            name=f"{base}/{column}={g.value}",
        )
        try:
            res = run_pipeline(database, gcfg, on_warning=warn, **callbacks)
        except PlanError as exc:  # the planner serves this group otherwise: say so, go on
            out.failed[g.value] = str(exc)
            continue
        out.groups.append(_group_row(database, res.experiment_id, res.experiment, g, k))
    out.groups.sort(key=_worst_first)
    return out


def _group_row(database: Database, experiment_id: int, name: str, g: Group, k: int) -> dict:
    """One group's row: its size, and per ANN stage recall@K, short lists and p95 (SQL)."""
    stages: dict[str, dict] = {}
    with database.connect() as conn:
        for label, recall, queries, short in conn.execute(
            "SELECT label, index_recall, queries, short_queries "
            "FROM pgeval.index_recall_summary(%s, %s)",
            (experiment_id, k),
        ).fetchall():
            stages[label] = {"recall": recall, "queries": queries, "short": short}
        for label, latency in conn.execute(
            "SELECT label, latency_ms FROM pgeval.stage_latency(%s, NULL, '{0.95}')",
            (experiment_id,),
        ).fetchall():
            if label in stages:
                stages[label]["p95_ms"] = latency[0] if latency else None
    recalls = [s["recall"] for s in stages.values() if s["recall"] is not None]
    return {
        "group": g.value,
        "rows": g.rows,
        "experiment": name,
        "queries": max((s["queries"] or 0 for s in stages.values()), default=0),
        "worst_recall": min(recalls) if recalls else None,
        "stages": stages,
    }


def _worst_first(row: dict) -> tuple:
    worst = row["worst_recall"]
    return (worst if worst is not None else -1.0, row["group"])
