"""`pgeval sweep --captured SET`: each shape measured as the application sent it, printed as a
table per shape, the weighted line and the verdict (or JSON, CSV)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ...api.vocabulary import short_statement
from ..output import echo_line, emit, fixed, info, to_json, warn
from .common import OneTask

if TYPE_CHECKING:
    from ...api import Pgeval


def shape_rows(d: dict[str, Any], width: int = 40) -> list[dict[str, Any]]:
    """The shapes at the point shown, one row each (the statement within ``width``): recall at
    each shape's LIMIT with its 95 % half-width."""
    ks = {r["k"] for r in d["shapes"]}
    recall = f"recall@{ks.pop()}" if len(ks) == 1 else "recall@LIMIT"
    return [
        {
            "shape": r["shape"],
            "statement": short_statement(r["statement"], width),
            "share": f"{r['share']:.0%}",
            recall: f"{fixed(r['recall'])} ±{fixed(r['margin95'], '.3f')}",
            "p95_ms": fixed(r["p95_ms"], ".2f"),
            "": "" if r["reached"] else "✗",
        }
        for r in d["shapes"]
    ]


def verdict_line(d: dict[str, Any]) -> str:
    """The recommendation: the point where every shape reaches the target, or the shapes that
    reach it nowhere measured, with their best."""
    v, goal = d["verdict"] or {}, d["target_recall"]
    if v.get("point"):
        return f"recommended: {v['point']} — every shape reaches recall {goal:g}"
    missing = [s for s in v.get("shapes", []) if s["reaches_at"] is None]
    return f"no setting measured reaches recall {goal:g} in every shape: " + "; ".join(
        f"shape {s['shape']} cannot (best {fixed(s['best'])} at {s['best_at']})" for s in missing
    )


def weighted_line(d: dict[str, Any]) -> str:
    at = d["at"] or {}
    return (
        f"weighted by the searches sent: recall {fixed(d['weighted_recall'])} at "
        f"{at.get('label', '—')} ({at.get('why', '')})"
    )


def run_shaped(pg: Pgeval, target: str, stage: str, fmt: str, plot: str | None,
               options: dict[str, Any]) -> None:  # fmt: skip
    """`pgeval sweep --captured SET` (no --group-by): ``options`` by the API's names."""
    captured = options.pop("captured")
    with OneTask() as bar:

        def on_shape(i: int, n: int, sh: Any, step: str) -> None:
            confirm = " (the value found)" if step == "confirm" else ""
            bar.show(f"shape {i}/{n}{confirm}", i - 1, n)

        res = pg.sweep_shapes(
            target, stage, captured=captured, **options, on_shape=on_shape, on_warning=bar.warn
        )
    d = res.as_dict()
    d.update(weighted_line=weighted_line(d), verdict_line=verdict_line(d))
    if fmt == "json":
        click.echo(to_json(d))
    elif fmt == "csv":
        emit(shape_rows(d, 200), "csv")
    else:
        echo_line(
            f"sweep of target {target} on captured set {captured}: each shape as the "
            "application sent it (its statement, LIMIT and values; exact twin as truth)"
        )
        if d["at"] is not None:
            echo_line(f"shapes at {d['at']['label']}:")
        emit(shape_rows(d), "table")
        echo_line(d["weighted_line"])
        echo_line(d["verdict_line"])
    if plot:
        info("--plot draws one sweep: see the shape sweeps with `pgeval sweep list`")
    for w in res.warnings if fmt != "table" else ():
        warn(w)
