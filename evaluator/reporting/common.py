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
    ]
    if report.get("domain_discount"):  # 0 (the default) says nothing: left out
        out.append(
            (
                "domain discount",
                f"{report['domain_discount']:g}: the acceptance thresholds lowered by that "
                "share for a specialised domain (docs/METRICS.md)",
            )
        )
    shown = {k: v for k, v in (run.get("params") or {}).items() if k not in INTERNAL_PARAMS}
    if shown:
        out.append(("parameters", params_text(shown)))
    return out


# a run's parameters that are pgeval's bookkeeping, not its configuration: the ids of its input
# runs, the time and row count of its statement, its role and kind (the stage line says them),
# the statement it timed (the timing boundary says it): left out of the report's facts
INTERNAL_PARAMS = frozenset(
    {"input_runs", "fusion_ms", "rows", "role", "kind", "timed", "timed_statement", "warnings"}
)


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


FLAGGED_SHOWN = 10  # the worst flagged queries shown with their plans; the rest folded away

# what each link of the chain that loses most calls for (the report's first sentence)
ACTIONS = {
    "index": "tune the index (a larger ef_search or probes, or a larger build)",
    "reach": "look at chunking, the embedding model and the queries' wording: no search "
    "found those chunks",
    "retrieval": "tune the index or the chunking (the experiment has no exact stage to tell "
    "them apart)",
    "fusion": "tune the merge",
    "rerank": "tune the reranker",
}


def conclusion(report: dict) -> str | None:
    """The report's answer in one sentence: for an experiment, the stage with the largest
    measured headroom and what recovers it (the stage report's ``advice``; a report saved
    before it had one: the link that costs most, "fusion costs 0.320: tune the merge"); for one
    run, its recall and how many of its queries are flagged."""
    sr = report.get("stage_report") or {}
    loss = {
        r.get("category"): r.get("recall_points") or 0.0 for r in sr.get("loss_attribution") or []
    }
    k, attributed = sr.get("k"), bool(loss)
    kept = loss.pop("kept", None)
    final = "" if kept is None else f" (recall@{k} kept: {kept:.3f})"
    if sr.get("advice") and k:
        return f"{sr['advice'].rstrip('.')}{final}."
    if attributed and k:
        if not loss or max(loss.values()) <= 0:
            return f"Nothing of recall@{k} is lost between the stages{final}."
        worst = max(loss, key=lambda c: loss[c])
        head = (
            f"The index costs {loss['index']:.3f} of recall@{k}; "
            if "index" in loss and worst != "index"
            else ""
        )
        return (
            f"{head}{worst} costs {loss[worst]:.3f}{'' if head else f' of recall@{k}'}: "
            f"{ACTIONS.get(worst, 'look at that link')}{final}."
        )
    summary = report.get("summary") or {}
    recall = largest_recall(report)
    if recall is None or summary.get(recall) is None:
        return None
    valid = (report.get("counts") or {}).get("valid")
    flagged = len({f["query_id"] for f in report.get("flagged") or []})
    return (
        f"{recall} is {summary[recall]:.3f} over {valid} valid queries; {flagged} of them "
        "are flagged (Recall@K < 0.3 or nDCG@10 < 0.5)."
    )


def largest_recall(report: dict) -> str | None:
    """The report's recall at its largest cut-off (``recall@10``), or None."""
    from ..measure.measures import find

    recalls = [
        (m.cutoff or 0, m.name)
        for m in map(find, (report.get("summary") or {}))
        if m is not None and m.family.name == "recall"
    ]
    return max(recalls)[1] if recalls else None


def flagged_rows(report: dict) -> list[dict]:
    """One row per flagged query (a query flagged for low recall and for poor ranking is one
    row naming both), worst first by a number: its recall at the largest cut-off, then the
    relevant chunks it missed (most first), then its lowest flagged value, then query id;
    with its plan."""
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
    cases = {c["query_id"]: c for c in report.get("cases") or []}
    recall = largest_recall(report) or ""
    for r in by_query.values():
        case = cases.get(r["query_id"]) or {}
        value = (case.get("metrics") or {}).get(recall)
        r["recall"] = value
        r["missed"] = (
            None
            if value is None or case.get("n_relevant") is None
            else round(case["n_relevant"] * (1 - value))
        )
    rows = sorted(
        by_query.values(),
        key=lambda r: (
            r["recall"] if r["recall"] is not None else 2.0,
            -(r["missed"] or 0),
            r["worst"] if r["worst"] is not None else 2.0,
            r["query_id"],
        ),
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
    level_of = report.get("acceptance") or {}
    thresholds = report.get("thresholds") or {}
    rows = []
    for metric, value in (report.get("summary") or {}).items():
        if "latency" in metric:
            continue
        row = {"metric": metric, "value": value}
        if levels:
            t = thresholds.get(metric)
            row["level"] = level_of.get(metric)
            row["thresholds"] = (
                f"{t['excellent']:.2f} / {t['good']:.2f} / {t['pass']:.2f}" if t else ""
            )
        rows.append(row)
    return rows


def latency_rows(report: dict) -> list[dict]:
    rows = []
    for source, values in (report.get("latency") or {}).items():
        if values and values.get("n"):
            summed = values.get("end_to_end_of")
            rows.append(
                {
                    "source": f"{source} (end to end: {' + '.join(summed)})" if summed else source,
                    "n": values["n"],
                    **{k: v for k, v in values.items() if k.endswith("_ms")},
                }
            )
    return rows


def headline_metrics(report: dict) -> list[str]:
    k = report.get("k") or {}
    return [f"{name}@{value}" for name in HEADLINE_FAMILIES for value in sorted(k.get(name) or [])]


def stage_rows(report: dict) -> list[dict]:
    """An experiment's stages side by side (from the stage report): means and p95 latency."""
    sr = report.get("stage_report") or {}
    head = [m for m in headline_metrics(report) if not m.startswith("precision")]
    index = f"index_recall@{sr.get('k')}"
    judged, ceiling = f"judged@{sr.get('k')}", f"ndcg@{sr.get('k')}"
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
                # how much of the stage's top K was judged, and its candidates ordered perfectly
                **({judged: values[judged].get("mean")} if judged in values else {}),
                **(
                    {f"{ceiling} ceiling": s["ceiling"][ceiling].get("ceiling")}
                    if ceiling in (s.get("ceiling") or {})
                    else {}
                ),
                # the ANN stages' recall against exact search, as stage-report prints it
                **({index: (s.get(index) or {}).get("mean")} if sr.get("k") else {}),
                "p95 ms": lat.get("p95"),
                **({f"{index} per query": tail} if tail else {}),
            }
        )
    if any(len(r) > len(rows[0]) for r in rows):  # one column for all, blank where no ANN
        key = f"{index} per query"
        rows = [{**r, key: r.get(key, "")} for r in rows]
    return rows


def headroom_rows(report: dict) -> list[dict]:
    """Where a change can win something back: each headroom (ceiling - actual) of the stage
    report, the largest first, marked."""
    sr = report.get("stage_report") or {}
    k = sr.get("k")
    return [
        {
            "headroom": h.get("kind"),
            "stage": h.get("stage"),
            "against": h.get("against") or "",
            f"ndcg@{k}": (h.get(f"ndcg@{k}") or {}).get("headroom"),
            f"recall@{k}": (h.get(f"recall@{k}") or {}).get("headroom"),
            "largest": bool(h.get("largest")),
        }
        for h in sr.get("headroom") or []
    ]


def loss_rows(report: dict) -> list[dict]:
    """Where recall@K was lost: category, chunks, share, Recall@K points (the waterfall)."""
    sr = report.get("stage_report") or {}
    keys = ("category", "chunks", "share", "recall_points")
    return [
        {**{k: r.get(k) for k in keys}, "meaning": r.get("meaning", "")}
        for r in sr.get("loss_attribution") or []
    ]


class Section(NamedTuple):
    key: str  # latency | answers | stages | loss | headroom | sweep | by_type
    title: str
    rows: list[dict]
    columns: list[str] | None  # None: the keys of the first row


def sections(report: dict) -> list[Section]:
    """The optional tables between the summary and the flagged queries, in the order both
    renderers print them; only those the report has data for."""
    sr, sw = report.get("stage_report") or {}, report.get("sweep") or {}
    typed_rows = report.get("by_type") if typed(report) else None
    candidates = [
        Section("latency", "Latency (nearest rank, ms)", latency_rows(report), None),
        Section(
            "answers",
            "End-to-end answers",
            [report["answers"]] if report.get("answers") else [],
            None,
        ),
        Section("stages", "Stages", stage_rows(report), None),
        Section("loss", f"Where recall@{sr.get('k')} was lost", loss_rows(report), None),
        Section(
            "headroom",
            "Headroom: each stage's ceiling minus its figure (reorder: rerank; reach: "
            "depth or another path; index: the setting)",
            headroom_rows(report),
            None,
        ),
        Section(
            "sweep",
            f"Sweep {sw.get('name')}: {sw.get('param')}",
            sw.get("points") or [],
            SWEEP_COLUMNS,
        ),
        Section(
            "by_type",
            "By query type",
            typed_rows or [],
            ["type", "queries", *headline_metrics(report)],
        ),
    ]
    # a sweep's table is shown with its heading even when it holds no point
    return [s for s in candidates if s.rows or (s.key == "sweep" and sw)]


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
