"""`pgeval advise --plot FILE.png`: recall@K against p95 per design — each design's find path as
a line, the value found as a marker whose area is the index size, with its recall's 95 % interval
as a bar — the target recall as a dashed line, the p95 budget as a dotted one, the recommended
design ringed, the legend beside the axes; in the HTML report an SVG whose points show their
setting, recall, p95 and index size on hover. matplotlib is imported only here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core import figures
from ..sweep.plot import ring, target_line
from .rules import build_text

MB = 1048576.0


def png(result: dict[str, Any]) -> bytes:
    """The plot as a PNG (``--plot FILE.png``)."""
    fig, _ = draw(result)
    return figures.png(fig)


def svg(result: dict[str, Any]) -> str:
    """The plot as an inline SVG (the HTML report): each design's point and each value its find
    tried shows its setting, recall with its interval, p95 and index size on hover."""
    fig, titles = draw(result)
    return figures.svg(fig, titles)


def draw(result: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    """The figure and, by the gid of each point drawn, the text its hover shows."""
    figures.needed()
    fig = figures.figure(8.6, 4.8)
    ax = fig.add_subplot()
    k = result["k"]
    titles: dict[str, str] = {}
    labels: list[tuple[float, float, str]] = []
    rows = [r for r in result["designs"] if r["p95_ms"] is not None]
    biggest = max((r["index_bytes"] or 0 for r in rows), default=0) or 1
    for i, r in enumerate(rows):
        _design(ax, i, r, k, biggest, titles, labels)
    _budgets(ax, result)
    rec = result.get("recommendation")
    if rec:
        ring(ax, rec["p95_ms"], rec["recall"], rec["design"], 22)
    ax.set_xscale("log")
    _plain_ms(ax)
    ax.margins(x=0.15, y=0.08)
    ax.set_xlabel("p95 latency (ms, nearest rank, log scale)")
    ax.set_ylabel(
        f"recall@{k} against exact search"
        + (f" (worst group of {result['group_by']})" if result.get("group_by") else "")
    )
    ax.set_title(
        f"advise on target {result['target']}: marker area = index size; lines: each find's "
        "values in order of work",
        fontsize=9,
    )
    ax.grid(True, alpha=0.3)
    # beside the axes, never over a point
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), markerscale=0.5)
    figures.place_labels(ax, labels)
    return fig, titles


def _design(
    ax: Any,
    i: int,
    r: dict[str, Any],
    k: int,
    biggest: float,
    titles: dict[str, str],
    labels: list[tuple[float, float, str]],
) -> None:
    """One design: its find's path, its point (area: index size) with its recall's interval,
    the hover texts of both, its label."""
    from ...reporting import plots

    colour = plots.SERIES[i % len(plots.SERIES)]
    path = sorted(
        (p for p in r["points"] if p["p95_ms"] is not None and p["recall"] is not None),
        key=lambda p: float(p["value"]),  # in order of work
    )
    build = build_text(r)
    setting = ", ".join(f"{n.split('.', 1)[-1]}={v}" for n, v in r["setting"].items())
    size = "" if r["index_bytes"] is None else f", index {r['index_bytes'] / MB:.1f} MB"
    ax.plot(
        [p["p95_ms"] for p in path],
        [p["recall"] for p in path],
        "-",
        color=colour,
        alpha=0.35,
        linewidth=1,
    )
    for j, p in enumerate(path):  # each value the find tried, its own hover
        dot = ax.plot([p["p95_ms"]], [p["recall"]], "o", color=colour, alpha=0.5, ms=3)[0]
        gid = f"advise-{i}-{j}"
        dot.set_gid(gid)
        titles[gid] = (
            f"{r['design']} {build} at {_tried(r, p)}: recall@{k} {p['recall']:.4f}, "
            f"p95 {p['p95_ms']:.3g} ms{size}"
        )
    margin = r.get("recall_margin")
    found = ax.scatter(
        [r["p95_ms"]],
        [r["recall"]],
        s=40 + 460 * (r["index_bytes"] or 0) / biggest,
        color=colour,
        alpha=0.8,
        edgecolors="white",
        label=f"{r['design']} {build}: {(r['index_bytes'] or 0) / MB:.1f} MB" + _misses(r),
        zorder=3,
    )
    found.set_gid(f"advise-{i}")
    titles[f"advise-{i}"] = (
        f"{r['design']} {build} at {setting}: recall@{k} {r['recall']:.4f}"
        + (f" ±{margin:.4f} (95 % interval)" if margin else "")
        + f", p95 {r['p95_ms']:.3g} ms{size}"
    )
    labels.append((r["p95_ms"], r["recall"], f"{r['design']} {setting}"))
    if margin:  # the recall's 95 % interval over the queries
        ax.errorbar(
            [r["p95_ms"]],
            [r["recall"]],
            yerr=[margin],
            color=colour,
            capsize=4,
            linewidth=1,
        )


def _tried(row: dict[str, Any], point: dict[str, Any]) -> str:
    """The setting of one value a design's find tried: its work setting at that value."""
    name = next(iter(row["setting"]), "value")
    return f"{name.split('.', 1)[-1]}={point['value']}"


def _budgets(ax: Any, result: dict[str, Any]) -> None:
    """The target recall and the budgets a point can be read against: p95 as a vertical line;
    the index size and build time (not on these axes) named in the legend."""
    target_line(ax, result["target_recall"])
    budgets = result.get("budgets") or {}
    if budgets.get("--max-p95-ms") is not None:
        ax.axvline(
            budgets["--max-p95-ms"],
            linestyle=":",
            color="#bc4c00",
            linewidth=1.2,
            label=f"p95 budget {budgets['--max-p95-ms']:g} ms",
        )
    for name, unit in (("--max-index-mb", "MB index"), ("--max-build-s", "s build")):
        if budgets.get(name) is not None:
            ax.plot([], [], " ", label=f"budget: {budgets[name]:g} {unit}")


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
