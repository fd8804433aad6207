"""`pgeval sweep --plot FILE.png`: index recall@K against p95 latency, one dot per grid point
(error bars: the spread over repetitions), the Pareto front joined by a line, the target recall
as a dashed line and the recommended point ringed. matplotlib is imported only here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    target_line(ax, target_recall)
    if recommended:
        ring(ax, recommended.p95_ms, recommended.recall, recommended.label, 14)
    ax.set_xlabel("p95 latency (ms, nearest rank)")
    ax.set_ylabel(f"recall@{k} against exact search")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    figures.place_labels(ax, [(p.p95_ms or 0.0, p.recall or 0.0, p.label) for p in pts])
    out = Path(path)
    out.write_bytes(figures.png(fig))
    return out


def target_line(ax: Any, target_recall: float) -> None:
    """The target recall, a dashed line across the axes (the sweep's plot and advise's)."""
    label = f"target recall {target_recall:g}"
    ax.axhline(target_recall, linestyle="--", color="#cf222e", linewidth=1, label=label)


def ring(ax: Any, p95_ms: Any, recall: Any, label: str, size: int) -> None:
    """The recommended point ringed (``size``: the ring's marker size)."""
    style = {"ms": size, "mfc": "none", "mec": "#1a7f37", "mew": 2}
    ax.plot([p95_ms], [recall], "o", label=f"recommended: {label}", **style)
