"""Probes as Prometheus / OpenMetrics gauges (``pgeval watch --format openmetrics``): every
sample carries ``target``, ``stage`` and ``k`` (and ``group``, the group's value, with
``--group-by``); latency is in seconds, as Prometheus names it. Each family is declared once,
whatever the number of probes (one per group)."""

from __future__ import annotations

from typing import Any

from ...reporting.openmetrics import Family, render

# each family (name: its HELP text), declared once, in the order of the output
FAMILIES = {
    "pgeval_probe_recall": "Recall@k of the stage against exact search on the probe's queries.",
    "pgeval_probe_latency_seconds": "Latency of the timed statement (client round trip), "
    "nearest-rank quantile.",
    "pgeval_probe_rows_returned": "Rows returned per query, mean.",
    "pgeval_probe_queries": "Queries the probe measured.",
    "pgeval_probe_table_rows": "Rows of the target (after its filters).",
    "pgeval_probe_bound_crossed": "1 when the probe crossed the bound (min_recall, max_drop, "
    "max_p95_ms), else 0.",
    "pgeval_probe_ground_truth_reused": "1 when the stored exact ground truth was reused, 0 when "
    "it was computed.",
    "pgeval_probe_duration_seconds": "Wall time of the whole probe.",
    "pgeval_probe_timestamp_seconds": "When the probe ran (Unix time).",
    "pgeval_probe_index_info": "The index measured and its build identity (oid, relfilenode); "
    "always 1.",
    "pgeval_probe_setting": "The value of the work setting measured.",
    "pgeval_probe_error": "1 for a group whose probe failed: no probe of that watch was recorded.",
}


def families(results: Any, failed: Any = ()) -> list[Family]:
    """The probes' families; ``failed``: the labels (target, stage, k, group) of a watch's groups
    that failed (``pgeval_probe_error``: nothing of that watch was recorded)."""
    fams = [Family(name, said) for name, said in FAMILIES.items()]
    by = {f.name: f for f in fams}
    for result in results:
        _samples(by, result)
    for labels in failed:
        by["pgeval_probe_error"].samples.append((dict(labels), 1.0))
    return fams


def _samples(by: dict, result: Any) -> None:
    p = result.probe
    labels = {"target": p["target"], "stage": p["stage"], "k": str(p["k"])}
    for value in (p.get("group_key") or {}).values():
        labels["group"] = str(value)

    def add(name: str, value: Any, **extra: Any) -> None:
        if value is not None:
            by[name].samples.append(({**labels, **extra}, float(value)))

    add("pgeval_probe_recall", p.get("recall"))
    for q, key in (("0.5", "p50_ms"), ("0.95", "p95_ms"), ("0.99", "p99_ms")):
        ms = p.get(key)
        add("pgeval_probe_latency_seconds", None if ms is None else ms / 1000.0, quantile=q)
    add("pgeval_probe_rows_returned", p.get("rows_mean"))
    add("pgeval_probe_queries", p.get("queries"))
    add("pgeval_probe_table_rows", p.get("table_rows"))
    crossed = set(p.get("crossed") or [])
    for bound in p.get("bounds") or {}:
        add("pgeval_probe_bound_crossed", 1 if bound in crossed else 0, bound=bound)
    gt = (result.ground_truth or {}).get("status")
    if gt is not None:
        add("pgeval_probe_ground_truth_reused", 1 if gt == "reused" else 0)
    add("pgeval_probe_duration_seconds", result.wall_ms / 1000.0)
    if p.get("probed_at") is not None:
        add("pgeval_probe_timestamp_seconds", p["probed_at"].timestamp())
    build = p.get("index_build") or {}
    if p.get("index_name"):
        add(
            "pgeval_probe_index_info",
            1,
            index=p["index_name"],
            oid=build.get("oid"),
            filenode=build.get("filenode"),
        )
    try:
        add("pgeval_probe_setting", float(result.value), setting=result.setting)
    except ValueError:  # a setting that is not a number
        pass


def text(results: Any, failed: Any = ()) -> str:
    return render(families(results, failed))
