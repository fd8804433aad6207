"""What the Markdown and HTML renderers share: number formatting, the facts at the top of a
report, the tables they both print (and in which order), and EXPLAIN plans as text."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ..measure.measures import HEADLINE_FAMILIES
from ..measure.recall_distribution import text as recall_tail_text

SWEEP_COLUMNS = ["label", "recall", "recall tail", "latency_p95_ms", "qps", "pareto", "current"]


def fmt(value: object, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.1f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def title(report: dict) -> str:
    run = report.get("run") or {}
    exp = report.get("experiment")
    if exp:
        return f"pgeval report: experiment {exp['name']} (final stage {run.get('name')})"
    return f"pgeval report: {run.get('name', report.get('source', '?'))}"


def facts(report: dict) -> list[tuple[str, str]]:
    run = report.get("run") or {}
    k = report.get("k") or {}
    out = [
        ("generated at", fmt(report.get("generated_at"))),
        ("test set", f"{run.get('testset')} ({str(run.get('testset_hash') or '')[:12]})"),
        ("stage", fmt(run.get("stage_label") or run.get("stage"))),
        ("status", fmt(run.get("status"))),
        ("config hash", fmt(report.get("config_hash"))),
        ("cut-offs", "; ".join(f"{n} {', '.join(map(str, v))}" for n, v in k.items())),
        ("relevant", f"grade ≥ {report.get('rel', 1)}"),
        ("order rule", fmt(report.get("order_rule"))),
        ("timing boundary", fmt(report.get("timing_boundary"))),
        ("domain discount", fmt(report.get("domain_discount"))),
    ]
    if run.get("params"):
        out.append(("parameters", params_text(run["params"])))
    return out


def params_text(params: dict) -> str:
    """A run's parameters in words: ``inputs: hnsw, diskann, bm25 · k: 60 · weights: bm25=1,
    hnsw=1``, keys in order, numbers as the report prints them."""

    def one(value: object) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k}={one(v)}" for k, v in sorted(value.items()))
        if isinstance(value, (list, tuple)):
            return ", ".join(one(v) for v in value)
        if isinstance(value, float):
            return f"{value:g}" if abs(value) >= 1e-4 or value == 0 else fmt(value)
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False)

    return " · ".join(f"{k}: {one(v)}" for k, v in sorted(params.items()))


def typed(report: dict) -> bool:
    """Whether the queries carry types worth a breakdown: more than one group, or one that is
    not the untyped rest."""
    rows = report.get("by_type") or []
    names = {r.get("type") for r in rows}
    return len(rows) > 1 or bool(names - {None, "", "(untyped)"})


FLAGGED_SHOWN = 20  # the worst flagged queries shown with their plans; the rest folded away


def flagged_rows(report: dict) -> list[dict]:
    """One row per flagged query (a query flagged for low recall and for poor ranking is one
    row naming both), worst first: its lowest flagged value, then query id; with its plan."""
    by_query: dict[str, dict] = {}
    for f in report.get("flagged") or []:
        row = by_query.setdefault(
            f["query_id"], {"query_id": f["query_id"], "flags": [], "worst": None, "plan": None}
        )
        row["flags"].append(f"{f.get('flag')} ({f.get('measure')} {fmt(f.get('value'))})")
        value = f.get("value")
        if value is not None and (row["worst"] is None or value < row["worst"]):
            row["worst"] = value
        if f.get("plan") is not None:
            row["plan"] = f["plan"]
    rows = sorted(
        by_query.values(),
        key=lambda r: (r["worst"] if r["worst"] is not None else 2.0, r["query_id"]),
    )
    for r in rows:
        r["flag"] = "; ".join(r.pop("flags"))
        r["plan_summary"] = plan_summary(r["plan"])
    return rows


def plan_summary(plan: dict[str, Any] | None) -> str:
    """The plan in one line: its scan nodes (``Index Scan using kb_hnsw``), or that none was
    recorded."""
    if plan is None:
        return "not captured (pgeval plans RUN)"
    scans = [
        line.strip().removeprefix("-> ").split("  (")[0]
        for line in plan_text(plan).splitlines()
        if "Scan" in line
    ]
    return "; ".join(scans) or plan_text(plan).splitlines()[0]


def counts_row(report: dict) -> dict:
    c = report.get("counts") or {}
    return {
        "queries": c.get("queries"),
        "valid": c.get("valid"),
        "excluded (no relevant)": c.get("excluded"),
        "unanswerable": c.get("unanswerable"),
        "no result": c.get("no_result"),
    }


# whose acceptance levels pgeval shows (only when asked: `--levels`): they are the metric
# contract's, for a knowledge base in a general domain, not levels of any test collection
LEVELS_NOTE = (
    "acceptance levels (--levels): docs/METRICS.md's for a knowledge base in a general domain "
    "(thresholds excellent / good / pass), not levels set for this test set"
)


def summary_note(levels: bool) -> str:
    return "Means over valid queries" + (f"; {LEVELS_NOTE}." if levels else ".")


def summary_rows(report: dict, levels: bool = True) -> list[dict]:
    """Metric, value, and with ``levels`` the acceptance level and the thresholds that level
    was read against."""
    if not levels:
        return [
            {"metric": m, "value": v}
            for m, v in (report.get("summary") or {}).items()
            if "latency" not in m
        ]
    summary = report.get("summary") or {}
    level_of = report.get("acceptance") or {}
    thresholds = report.get("thresholds") or {}
    rows = []
    for metric, value in summary.items():
        if "latency" in metric:
            continue
        t = thresholds.get(metric)
        rows.append(
            {
                "metric": metric,
                "value": value,
                "level": level_of.get(metric),
                "thresholds": (
                    f"{t['excellent']:.2f} / {t['good']:.2f} / {t['pass']:.2f}" if t else ""
                ),
            }
        )
    return rows


def latency_rows(report: dict) -> list[dict]:
    rows = []
    for source, values in (report.get("latency") or {}).items():
        if values and values.get("n"):
            rows.append(
                {
                    "source": source,
                    "n": values["n"],
                    **{k: v for k, v in values.items() if k != "n"},
                }
            )
    return rows


def headline_metrics(report: dict) -> list[str]:
    k = report.get("k") or {}
    out = []
    for name in HEADLINE_FAMILIES:
        for value in sorted(k.get(name) or []):
            out.append(f"{name}@{value}")
    return out


def stage_rows(report: dict) -> list[dict]:
    """An experiment's stages side by side (from the stage report): means and p95 latency."""
    sr = report.get("stage_report") or {}
    head = [m for m in headline_metrics(report) if not m.startswith("precision")]
    index = f"index_recall@{sr.get('k')}"
    rows = []
    for s in sr.get("stages") or []:
        values = s.get("metrics") or {}
        lat = s.get("latency_ms") or {}
        tail = recall_tail_text((s.get(index) or {}).get("distribution"))
        rows.append(
            {
                "stage": s.get("label") or s.get("stage"),
                "kind": s.get("kind"),
                "role": s.get("role"),
                **{m: (values.get(m) or {}).get("mean") for m in head},
                "p95 ms": lat.get("p95"),
                **({f"{index} per query": tail} if tail else {}),
            }
        )
    if any(len(r) > len(rows[0]) for r in rows):  # one column for all, blank where no ANN
        key = f"{index} per query"
        rows = [{**r, key: r.get(key, "")} for r in rows]
    return rows


def loss_rows(report: dict) -> list[dict]:
    """Where recall@K was lost: category, chunks, share, Recall@K points (the waterfall)."""
    sr = report.get("stage_report") or {}
    return [
        {
            "category": r.get("category"),
            "chunks": r.get("chunks"),
            "share": r.get("share"),
            "recall_points": r.get("recall_points"),
            "meaning": r.get("meaning", ""),
        }
        for r in sr.get("loss_attribution") or []
    ]


class Section(NamedTuple):
    key: str  # latency | answers | stages | loss | sweep | by_type
    title: str
    rows: list[dict]
    columns: list[str] | None  # None: the keys of the first row


def sections(report: dict) -> list[Section]:
    """The optional tables between the summary and the flagged queries, in the order both
    renderers print them; only those the report has data for."""
    out = []
    if latency_rows(report):
        out.append(Section("latency", "Latency (nearest rank, ms)", latency_rows(report), None))
    if report.get("answers"):
        out.append(Section("answers", "End-to-end answers", [report["answers"]], None))
    if stage_rows(report):
        out.append(Section("stages", "Stages", stage_rows(report), None))
    if loss_rows(report):
        out.append(
            Section(
                "loss",
                f"Where recall@{report['stage_report']['k']} was lost",
                loss_rows(report),
                None,
            )
        )
    if report.get("sweep"):
        sw = report["sweep"]
        out.append(
            Section(
                "sweep",
                f"Sweep {sw.get('name')}: {sw.get('param')}",
                sw.get("points") or [],
                SWEEP_COLUMNS,
            )
        )
    if report.get("by_type") and typed(report):
        out.append(
            Section(
                "by_type",
                "By query type",
                report["by_type"],
                ["type", "queries", *headline_metrics(report)],
            )
        )
    return out


def case_rows(report: dict, ranked: int = 5) -> list[dict]:
    metrics = headline_metrics(report)
    rows = []
    for c in report.get("cases") or []:
        m = c.get("metrics") or {}
        ids = c.get("ranked") or []
        grades = c.get("grades") or []
        shown = [f"{cid}({g})" if g else cid for cid, g in zip(ids, grades + [0] * len(ids))]
        rows.append(
            {
                "query_id": c["query_id"],
                "valid": c.get("valid"),
                **{x: m.get(x) for x in metrics},
                "latency_ms": c.get("latency_ms"),
                "ranked": " ".join(shown[:ranked]) + (" …" if len(ids) > ranked else ""),
                "text": c.get("text"),
            }
        )
    return rows


def plan_text(plan: dict[str, Any] | None) -> str:
    """An EXPLAIN (FORMAT JSON) plan as an indented tree; other forms as they are."""
    if plan is None:
        return "(no plan recorded)"
    if isinstance(plan, str):
        return plan
    if isinstance(plan, dict) and isinstance(plan.get("text"), str):
        return plan["text"]
    root = plan[0] if isinstance(plan, list) and plan and isinstance(plan[0], dict) else plan
    if not (isinstance(root, dict) and isinstance(root.get("Plan"), dict)):
        return json.dumps(plan, indent=2, ensure_ascii=False)
    lines: list[str] = []

    def walk(node: dict, depth: int) -> None:
        label = node.get("Node Type", "?")
        if node.get("Index Name"):
            label += f" using {node['Index Name']}"
        if node.get("Relation Name"):
            label += f" on {node['Relation Name']}"
        stats = []
        if node.get("Actual Total Time") is not None:
            stats.append(f"actual time={node['Actual Total Time']:.3f} ms")
        if node.get("Actual Rows") is not None:
            stats.append(f"rows={node['Actual Rows']}")
        hits, reads = node.get("Shared Hit Blocks"), node.get("Shared Read Blocks")
        if hits is not None or reads is not None:
            stats.append(f"buffers hit={hits or 0} read={reads or 0}")
        prefix = "  " * depth + ("-> " if depth else "")
        lines.append(prefix + label + (f"  ({', '.join(stats)})" if stats else ""))
        for child in node.get("Plans") or []:
            walk(child, depth + 1)

    walk(root["Plan"], 0)
    if root.get("Execution Time") is not None:
        lines.append(f"Execution Time: {root['Execution Time']:.3f} ms")
    return "\n".join(lines)
