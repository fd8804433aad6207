"""`pgeval sweep --plot FILE.png`: index recall@K against p95 latency, one dot per grid point
(error bars: the spread over repetitions), the Pareto front joined by a line, the target recall
as a dashed line and the recommended point ringed. matplotlib is imported only here."""

from __future__ import annotations

from pathlib import Path

from ...core import figures
from ...core.errors import InputError, param
from ...measure.operating_points import OperatingPoints


def write(
    path: str | Path,
    ops: OperatingPoints,
    *,
    k: int,
    title: str,
) -> Path:
    figures.needed()
    pts = [p for p in ops.points if p.recall is not None and p.p95_ms is not None]
    if not pts:
        raise InputError("no measured point to plot", field=param("plot"))
    fig = figures.figure(7.5, 4.6)
    ax = fig.add_subplot()
    xs = [p.p95_ms for p in pts]
    ys = [p.recall for p in pts]
    ax.errorbar(
        xs,
        ys,
        xerr=[p.p95_sd or 0 for p in pts],
        yerr=[p.recall_sd or 0 for p in pts],
        fmt="o",
        color="#57606a",
        ecolor="#afb8c1",
        capsize=2,
        label="grid point",
    )
    front = ops.pareto()
    if front:
        ax.plot(
            [p.p95_ms for p in front],
            [p.recall for p in front],
            "-o",
            color="#0969da",
            label="Pareto front",
        )
    target_recall, recommended = ops.target, ops.cheapest()
    ax.axhline(
        target_recall,
        linestyle="--",
        color="#cf222e",
        linewidth=1,
        label=f"target recall {target_recall:g}",
    )
    if recommended:
        ax.plot(
            [recommended.p95_ms],
            [recommended.recall],
            "o",
            ms=14,
            mfc="none",
            mec="#1a7f37",
            mew=2,
            label=f"recommended: {recommended.label}",
        )
    ax.set_xlabel("p95 latency (ms, nearest rank)")
    ax.set_ylabel(f"recall@{k} against exact search")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    figures.place_labels(ax, [(p.p95_ms or 0.0, p.recall or 0.0, p.label) for p in pts])
    out = Path(path)
    out.write_bytes(figures.png(fig))
    return out
