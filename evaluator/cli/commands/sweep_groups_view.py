"""`pgeval sweep --group-by COLUMN`: run the grouped sweep and print it (table, JSON or CSV)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ...api.vocabulary import grouped_consistency_line, reaches
from ..output import echo_line, emit, fixed, info, to_json, warn, wrapped
from .common import OneTask
from .query_options import group_queries_words

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import Group, GroupSweepResult, Point


def iterative_text(row: dict[str, Any]) -> str:
    """``hnsw.iterative_scan=strict_order 0.998 ✓, relaxed_order 0.991 ✓`` for a group
    measured again with the kind's iterative scan."""
    modes = row.get("iterative")
    if not modes:
        return ""
    return (
        str(row.get("iterative_setting", ""))
        + "="
        + ", ".join(
            f"{mode} {fixed(recall, '.3f')}{' ✓' if mode in row.get('fixed_by', []) else ' ✗'}"
            for mode, recall in modes.items()
        )
    )


def group_rows(res: GroupSweepResult) -> list[dict[str, Any]]:
    k = res.k
    parts = any("partition" in g for g in res.groups)  # a partitioned table's
    return [
        {
            "group": g["group"],
            **({"partition": g.get("partition") or ""} if parts else {}),
            "rows": g["rows"],
            "queries": g["queries"],
            f"recall@{k}": g["recall"],
            "short": g["short"],
            "p95_ms": g["p95_ms"],
            "misses": "" if g["reached"] else "✗",
        }
        for g in res.groups
    ]


def served_lines(groups: list[dict[str, Any]], column: str) -> list[str]:
    """One line per path that served the groups' statements (the planner's own plan), with
    the groups it served: ``custom plan: index kb_hnsw (hnsw) served tenant=t30``."""
    paths: dict[tuple[str, str], list[str]] = {}
    for g in groups:
        if g.get("served_by"):
            paths.setdefault((g.get("plan") or "custom", g["served_by"]), []).append(g["group"])
    return [
        f"{mode} plan: {path} served {', '.join(f'{column}={v}' for v in values)}"
        for (mode, path), values in paths.items()
    ]


def limit_lines(groups: list[dict[str, Any]], column: str) -> list[str]:
    """The groups whose figures were measured at a LIMIT the planner plans otherwise than the
    application's (stages/planner_plan.py ``at_application_limit``): not what it gets."""
    out = []
    for g in groups:
        if not g.get("served_at_limit"):
            continue
        limit, _, served = str(g["served_at_limit"]).partition(": ")
        out.append(
            f"{column}={g['group']}: not what the application gets: measured through "
            f"{g['served_by']}, but its LIMIT {limit} is served by {served} (the planner's "
            f"switching point: measure at its LIMIT, held-out queries (--queries-file), --depth {limit})"
        )
    return out


def _mode_words(mode: str | None) -> str:
    return {
        "custom": " with one-shot statements (the custom plan)",
        "generic": " with prepared statements (the generic plan)",
    }.get(str(mode), "")


def generic_lines(res: GroupSweepResult, column: str) -> list[str]:
    """The groups whose prepared statement (the generic plan) is served otherwise, or gets
    another recall, than the one-shot statement measured above."""
    out = []
    for g in res.groups:
        gen = g.get("generic")
        if not gen or not gen["differs"]:
            continue
        out.append(
            f"generic plan (prepared statements: psycopg 3, JDBC) for {column}={g['group']}: "
            f"{gen['served_by']} gets recall@{res.k} {fixed(gen['recall'])} (custom plan: "
            f"{g['served_by']}, {fixed(g['recall'])})"
        )
    return out


def point_rows(res: GroupSweepResult) -> list[dict[str, Any]]:
    return [
        {
            "point": p["point"],
            "label": p["label"],
            f"worst_recall@{res.k}": p["worst_recall"],
            "worst_group": p["worst_group"],
            "p95_ms (slowest group)": p["p95_ms"],
        }
        for p in res.points
    ]


def recommendation_line(res: GroupSweepResult) -> str:
    rec, k, goal = res.recommendation, res.k, res.target_recall
    if rec:
        worst = res.groups[0] if res.groups else {}
        # (a group not measured there reaches nothing: "every group" only when it is true)
        which = "every group" if not res.failed else "every group measured"
        unmeasured = (
            "; not measured, so not known to reach it: " + ", ".join(sorted(res.failed))
            if res.failed
            else ""
        )
        prepared = [
            g["group"]
            for g in res.groups
            if (g.get("generic") or {}).get("recall") is not None
            and not reaches(g["generic"]["recall"], goal)
        ]
        generic = (
            f"; prepared (the generic plan), {', '.join(prepared)} miss it" if prepared else ""
        )
        return (
            f"recommended: {rec['label']} — {which} reaches recall@{k} {goal:g}"
            f"{_mode_words(worst.get('plan'))}; the worst, {worst.get('group')}, "
            f"{fixed(rec['index_recall'])} at p95 "
            f"{fixed(rec['p95_ms'], '.3f')} ms ({rec['why']}){unmeasured}{generic}"
        )
    if not res.groups:
        return "no group was measured"
    assert res.at is not None  # the groups are those at a point
    missing = ", ".join(g["group"] for g in res.missing)
    fixes = [g for g in res.missing if g.get("fixed_by")]
    text = (
        f"no point reaches recall@{k} {goal:g} in every group: {missing} miss it at "
        f"{res.at['label']}"
    )
    if fixes:
        text += "; an iterative scan fixes " + ", ".join(
            f"{g['group']} ({' or '.join(g['fixed_by'])})" for g in fixes
        )
    return text


def scan_mode_lines(d: dict[str, Any]) -> list[str]:
    """``--find``: each scan mode's least value and the least work across them; the groups no
    setting brings to the target."""
    lines = [d.get("scan_modes_line"), d.get("unreachable_line")]
    return [("scan modes: " if i == 0 else "") + s for i, s in enumerate(lines) if s]


def run_grouped(
    pg: Pgeval,
    testset: str | None,
    target: str,
    stage: str,
    column: str,
    fmt: str,
    plot: str | None,
    options: dict[str, Any],
) -> None:
    """`pgeval sweep --group-by`: ``options`` the query source's, the groups' and the sweep's,
    by the API's names."""
    label = [""]  # the group being measured
    with OneTask() as bar:

        def on_group(i: int, n: int, g: Group, step: str) -> None:
            what = {"sweep": "", "confirm": " (the values found)", "generic": " (the generic plan)"}
            what_text = what.get(step, " (iterative scan)")
            label[0] = f"group {i}/{n} {column}={g.value} ({g.rows} rows){what_text}"
            bar.show(label[0], i - 1, n)

        def on_point(point: Point, rep: int, how: str) -> None:
            if bar.task is not None:
                bar.show(f"{label[0]} {point.label} ({how})")

        res = pg.sweep_groups(
            testset,
            target,
            stage,
            group_by=column,
            **options,
            on_group=on_group,
            on_warning=bar.warn,
            on_point=on_point,
        )
    line = recommendation_line(res)
    if fmt == "json":
        click.echo(to_json({**res.as_dict(), "recommendation_line": line}))
    elif fmt == "csv":
        emit(group_rows(res), "csv")
    else:
        _print_table(res, target, column)
        echo_line(line)
        for said in scan_mode_lines(res.as_dict()):
            echo_line(said)
    if plot:
        info("--plot draws one sweep: see the group sweeps with `pgeval sweep list`")
    for w in res.warnings if fmt != "table" else ():
        warn(w)


def _print_table(res: GroupSweepResult, target: str, column: str) -> None:
    """The grouped sweep as tables: its points, the groups at the chosen point worst first, each
    group's iterative scan, the groups skipped or not measured."""
    echo_line(
        f"sweep of target {target} grouped by {column}: {res.chosen} · "
        + (
            group_queries_words(res.group_queries)
            or "each group's captured queries (sent with its value)"
        )
        + f" · recall@{res.k} against exact search within each group · p95 nearest rank, the "
        "slowest group's"
    )
    emit(point_rows(res), "table")
    if res.at is not None:
        echo_line(f"groups at {res.at['label']} ({res.at['why']}), worst first:")
        emit(group_rows(res), "table")
        for line in [
            *served_lines(res.groups, column),
            *limit_lines(res.groups, column),
            *generic_lines(res, column),
        ]:  # (at 80 columns also when piped: between whole names)
            click.echo(wrapped(line, 80))
    for g in res.groups:
        if g.get("iterative"):
            echo_line(f"{column}={g['group']} with an iterative scan: {iterative_text(g)}")
    for skip in res.skipped:
        echo_line(f"skipped {column}={skip['group']} ({skip['rows']} rows): {skip['why']}")
    for value, why in res.failed.items():
        echo_line(f"not measured {column}={value}: {why}")
    said = grouped_consistency_line({g: s.consistency for g, s in res.sweeps.items()}, column)
    if said:
        echo_line(said)
