"""`pgeval run pipeline --group-by COLUMN`: one pipeline per group, printed as one table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..output import emit, info, printed_json

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...api import Pgeval
    from ...api.results import Group, GroupPipelineResult


def grouped(
    pg: Pgeval, column: str, sizes: tuple[int, int | None], fmt: str
) -> Callable[..., GroupPipelineResult]:
    """A stand-in for ``pg.run_pipeline`` that runs every group and prints the groups
    (``sizes``: at most so many groups, so many queries each: None, the sample spread)."""

    def run(testset: str | None, stages: str, **kw: Any) -> GroupPipelineResult:
        def on_group(i: int, n: int, g: Group) -> None:
            info(f"group {i}/{n} {column}={g.value} ({g.rows} rows)")

        res = pg.run_pipeline_groups(
            testset,
            stages,
            group_by=column,
            max_groups=sizes[0],
            group_queries=sizes[1],
            on_group=on_group if fmt == "table" else None,
            **kw,
        )
        show(res, fmt)
        return res

    return run


def rows(res: GroupPipelineResult) -> list[dict[str, Any]]:
    out = []
    for g in res.groups:
        row = {"group": g["group"], "rows": g["rows"], "queries": g["queries"]}
        for label, st in g["stages"].items():
            row[f"{label} recall@{res.k}"] = st["recall"]
            row[f"{label} short"] = st["short"]
            row[f"{label} p95_ms"] = st.get("p95_ms")
        row["experiment"] = g["experiment"]
        out.append(row)
    return out


def show(res: GroupPipelineResult, fmt: str) -> None:
    if printed_json(fmt, res.as_dict()):
        return
    click.echo(
        f"pipeline grouped by {res.column}: {res.chosen} · recall@{res.k} of each ANN stage "
        "against exact search within the group, worst group first"
    )
    emit(rows(res), "table" if fmt == "table" else fmt)
    for s in res.skipped:
        click.echo(f"skipped {res.column}={s['group']} ({s['rows']} rows): {s['why']}")
    for value, why in res.failed.items():
        click.echo(f"not measured {res.column}={value}: {why}")
