"""`pgeval advise --plot FILE.png`: recall@K against p95 per design — each design's find path as
a line, the value found as a marker whose area is the index size, with its recall's 95 % interval
as a bar — the target recall as a dashed line and the recommended design ringed. matplotlib is imported only here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.errors import InputError, param

MB = 1048576.0


def png(result: dict[str, Any]) -> bytes:
    from ...core import figures
    from ...reporting import plots

    if not figures.available():
        raise InputError(
            f"{param('plot')} needs matplotlib: pip install matplotlib (or the clone's plot "
            "extra: pip install -e '.[plot]')",
            field=param("plot"),
        )
    fig = figures.figure(7.5, 4.8)
    ax = fig.add_subplot()
    rows = [r for r in result["designs"] if r["p95_ms"] is not None]
    biggest = max((r["index_bytes"] or 0 for r in rows), default=0) or 1
    for i, r in enumerate(rows):
        colour = plots.SERIES[i % len(plots.SERIES)]
        path = sorted(
            (p for p in r["points"] if p["p95_ms"] is not None and p["recall"] is not None),
            key=lambda p: float(p["value"]),  # in order of work
        )
        build = ",".join(f"{k}={v}" for k, v in r["build"].items())
        ax.plot(
            [p["p95_ms"] for p in path],
            [p["recall"] for p in path],
            "-o",
            color=colour,
            alpha=0.35,
            linewidth=1,
            ms=3,
        )
        ax.scatter(
            [r["p95_ms"]],
            [r["recall"]],
            s=40 + 460 * (r["index_bytes"] or 0) / biggest,
            color=colour,
            alpha=0.8,
            edgecolors="white",
            label=f"{r['design']} {build}: {(r['index_bytes'] or 0) / MB:.1f} MB" + _misses(r),
        )
        if r.get("recall_margin"):  # the recall's 95 % interval over the queries
            ax.errorbar(
                [r["p95_ms"]],
                [r["recall"]],
                yerr=[r["recall_margin"]],
                color=colour,
                capsize=4,
                linewidth=1,
            )
    ax.axhline(
        result["target_recall"],
        linestyle="--",
        color="#cf222e",
        linewidth=1,
        label=f"target recall {result['target_recall']:g}",
    )
    rec = result.get("recommendation")
    if rec:
        ax.plot(
            [rec["p95_ms"]],
            [rec["recall"]],
            "o",
            ms=22,
            mfc="none",
            mec="#1a7f37",
            mew=2,
            label=f"recommended: {rec['design']}",
        )
    ax.set_xscale("log")
    _plain_ms(ax)
    ax.set_xlabel("p95 latency (ms, nearest rank, log scale)")
    ax.set_ylabel(
        f"recall@{result['k']} against exact search"
        + (f" (worst group of {result['group_by']})" if result.get("group_by") else "")
    )
    ax.set_title(
        f"advise on target {result['target']}: marker area = index size; lines: each find's values in order of work",
        fontsize=9,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best", markerscale=0.5)
    return figures.png(fig)


def _plain_ms(ax: Any) -> None:
    """Milliseconds as plain numbers on the log axis (0.2, 0.5, 1, 2, 5), not 2x10^-1 labels
    that run into each other."""
    from matplotlib import ticker

    plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(
        ticker.FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else "")
    )


def _misses(row: dict[str, Any]) -> str:
    """`` (misses)``; grouped: the groups that miss, worst first, with their recall."""
    if row["reached"]:
        return ""
    missing = [g for g in row.get("groups") or [] if not g["reached"]]
    if not missing:
        return " (misses)"
    shown = ", ".join(
        f"{g['group']} {g['recall']:.2f}" if g["recall"] is not None else str(g["group"])
        for g in missing[:3]
    )
    more = f" +{len(missing) - 3}" if len(missing) > 3 else ""
    return f" (misses in {shown}{more})"


def write(path: str | Path, result: dict[str, Any]) -> Path:
    out = Path(path)
    out.write_bytes(png(result))
    return out
