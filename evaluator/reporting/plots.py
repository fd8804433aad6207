"""PNG plots of a report document, drawn on the Agg canvas of :mod:`evaluator.core.figures` (no
display, no pyplot global state). matplotlib is optional (`pip install matplotlib`, or the plot
extra): :func:`available` says whether it is
there, and callers leave the plots out when it is not."""

from __future__ import annotations

from typing import Any

from ..core.figures import available, figure, place_labels, png

__all__ = ["available", "by_type", "waterfall", "sweep", "distribution", "latency", "render_all"]

from ..measure.measures import HEADLINE_FAMILIES

SERIES = ("#0969da", "#8250df", "#bf3989", "#1a7f37", "#d4a72c", "#57606a")


def _headline(report: dict) -> list[str]:
    """The metrics a bar chart shows: largest-K recall, first MRR, largest-K nDCG."""
    k = report.get("k") or {}
    return [
        f"{name}@{max(k[name]) if name != 'mrr' else k[name][0]}"
        for name in HEADLINE_FAMILIES
        if k.get(name)
    ]


def by_type(report: dict) -> bytes | None:
    from .common import typed

    rows = report.get("by_type") or []
    metrics = [m for m in _headline(report) if rows and m in rows[0]]
    if not rows or not metrics or not typed(report):  # one "(untyped)" bar says nothing
        return None
    fig = figure(max(6.0, 1.1 * len(rows) + 2), 3.6)
    ax = fig.add_subplot()
    width = 0.8 / len(metrics)
    for i, m in enumerate(metrics):
        xs = [j + (i - (len(metrics) - 1) / 2) * width for j in range(len(rows))]
        ax.bar(xs, [r.get(m) or 0.0 for r in rows], width, label=m, color=SERIES[i % len(SERIES)])
    ax.set_xticks(
        range(len(rows)), [f"{r['type']}\n(n={r.get('queries', '?')})" for r in rows], fontsize=8
    )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean over valid queries")
    ax.set_title("metrics by query type")
    ax.legend(fontsize=8, ncols=len(metrics), loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    return png(fig)


def waterfall(report: dict) -> bytes | None:
    """Recall@K points: kept, then each category that lost relevant chunks, summing to 1."""
    sr = report.get("stage_report") or {}
    cats = sr.get("loss_attribution") or []
    if not cats:
        return None
    fig = figure(7.5, 3.4)
    ax = fig.add_subplot()
    bottom = 0.0
    labels, colours = [], {"kept": "#1a7f37"}
    for i, c in enumerate(cats):
        value = c.get("recall_points") or 0.0
        colour = colours.get(c["category"], SERIES[i % len(SERIES)])
        ax.bar(i, value, bottom=bottom, color=colour)
        ax.text(
            i,
            bottom + value / 2,
            f"{value:.3f}",
            ha="center",
            va="center",
            fontsize=8,
            color="white" if value > 0.08 else "black",
        )
        bottom += value
        labels.append(c["category"])
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylim(0, max(1.0, bottom) * 1.05)
    ax.set_ylabel(f"Recall@{sr.get('k', '?')} points")
    ax.set_title(f"where recall@{sr.get('k', '?')} was lost (stage waterfall)")
    ax.grid(axis="y", alpha=0.3)
    return png(fig)


def sweep(report: dict) -> bytes | None:
    """Recall against p95 latency over the sweep's points, each labelled with its setting."""
    drawn = _sweep_figure(report)
    return None if drawn is None else png(drawn[0])


def sweep_svg(report: dict) -> str | None:
    """The sweep plot as an inline SVG whose points show their setting, recall (with its
    spread over repetitions), p95 and index size on hover."""
    from ..core.figures import svg

    drawn = _sweep_figure(report)
    return None if drawn is None else svg(*drawn)


def _sweep_figure(report: dict) -> tuple[Any, dict[str, str]] | None:
    """The figure and, by each point's gid, its hover text."""
    sw = report.get("sweep") or {}
    points = [
        p
        for p in sw.get("points") or []
        if p.get("recall") is not None and p.get("latency_p95_ms") is not None
    ]
    if not points:
        return None
    fig = figure(7.0, 4.0)
    ax = fig.add_subplot()
    points = sorted(points, key=lambda p: p["latency_p95_ms"])
    ax.plot(
        [p["latency_p95_ms"] for p in points],
        [p["recall"] for p in points],
        color=SERIES[0],
    )
    metric = sw.get("metric", "recall")
    titles: dict[str, str] = {}
    for i, p in enumerate(points):  # one artist a point: its own hover
        ax.plot([p["latency_p95_ms"]], [p["recall"]], "o", color=SERIES[0])[0].set_gid(f"sweep-{i}")
        sd = f" ±{p['recall_sd']:.4f} (sd over repetitions)" if p.get("recall_sd") else ""
        size = f", index {p['index_bytes'] / 1048576:.1f} MB" if p.get("index_bytes") else ""
        titles[f"sweep-{i}"] = (
            f"{p.get('label', '')}: {metric} {p['recall']:.4f}{sd}, "
            f"p95 {p['latency_p95_ms']:.3g} ms{size}"
        )
    for p in points:
        if p.get("current"):
            ax.plot(
                p["latency_p95_ms"],
                p["recall"],
                marker="o",
                markersize=11,
                markerfacecolor="none",
                markeredgecolor="#cf222e",
                label="this run",
            )
    ax.margins(x=0.12, y=0.1)
    if any(p.get("current") for p in points):
        ax.legend(fontsize=8, loc="lower right")
    ax.set_xlabel("p95 latency (ms)")
    ax.set_ylabel(metric)
    ax.set_title(f"recall vs latency: {sw.get('param', 'sweep')}")
    ax.grid(alpha=0.3)
    place_labels(ax, [(p["latency_p95_ms"], p["recall"], str(p.get("label", ""))) for p in points])
    return fig, titles


def distribution(report: dict) -> bytes | None:
    """Histogram of the per-query values of the largest-K recall and of nDCG."""
    metrics = [m for m in _headline(report) if not m.startswith("mrr")]
    cases = [c for c in report.get("cases") or [] if c.get("metrics")]
    if not metrics or not cases:
        return None
    fig = figure(7.5, 3.2)
    ax = fig.add_subplot()
    data = [[c["metrics"][m] for c in cases if c["metrics"].get(m) is not None] for m in metrics]
    ax.hist(
        data, bins=[i / 10 for i in range(11)], label=metrics, color=list(SERIES[: len(metrics)])
    )
    ax.set_xlabel("per-query value")
    ax.set_ylabel("queries")
    ax.set_title("distribution over valid queries")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return png(fig)


def latency(report: dict) -> bytes | None:
    values = [c["latency_ms"] for c in report.get("cases") or [] if c.get("latency_ms") is not None]
    if not values:
        return None
    fig = figure(7.5, 3.0)
    ax = fig.add_subplot()
    ax.hist(values, bins=min(40, max(5, len(values) // 5)), color=SERIES[1])
    p95 = (report.get("summary") or {}).get("latency_p95_ms")
    if p95 is not None:
        ax.axvline(p95, color="#cf222e", linestyle="--", label=f"p95 {p95:.1f} ms")
        ax.legend(fontsize=8)
    ax.set_xlabel(f"latency (ms, {report.get('timing_boundary') or 'as recorded'})")
    ax.set_ylabel("queries")
    ax.set_title("per-query latency")
    ax.grid(axis="y", alpha=0.3)
    return png(fig)


PLOTS = (
    ("waterfall", waterfall),
    ("sweep", sweep),
    ("by_type", by_type),
    ("distribution", distribution),
    ("latency", latency),
)


def render_all(report: dict) -> dict[str, bytes]:
    """Every plot the report has data for, by name, in page order."""
    drawn = {name: fn(report) for name, fn in PLOTS}
    return {name: png for name, png in drawn.items() if png}
