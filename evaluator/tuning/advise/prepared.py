"""What prepared statements get (issue "What the application gets", item 1): where advise
measured a design on the table's own index per group, each group was measured again with the
generic plan a server settles on after five executions of a prepared statement (psycopg 3 and
JDBC prepare by default; sweep/groups.py, ``_generic``). The recommendation then says which
groups a prepared statement serves otherwise, and what to set when that costs recall."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...measure.operating_points import reaches


def note(
    chosen: Mapping[str, Any],
    target_recall: float,
    k: int,
    role: str | None,
    rows: Sequence[Mapping[str, Any]] = (),
) -> dict | None:
    """The groups of ``chosen`` (a grouped design's row) whose generic plan differs from the
    one-shot statement's: {"groups": [...], "below": [groups under the target prepared],
    "instead": a row of ``rows`` (the same index, other settings: an iterative scan) where
    every group reaches the target both ways, "line": the sentence}; None when none differs
    or none was measured so."""
    differ = [g for g in chosen.get("groups") or [] if (g.get("generic") or {}).get("differs")]
    if not differ:
        return None
    below = [
        g["group"]
        for g in differ
        if g["generic"].get("recall") is not None
        and not reaches(g["generic"]["recall"], target_recall)
    ]
    parts = "; ".join(
        f"{g['group']} {_fmt(g['generic'].get('recall'))} through {g['generic'].get('served_by')}"
        f" (one-shot {_fmt(g.get('recall'))} through {g.get('served_by')})"
        for g in differ
    )
    line = (
        "prepared statements get other plans (the generic plan a server settles on after five "
        f"executions, as psycopg 3 and JDBC prepare by default), recall@{k}: {parts}"
    )
    if below:
        who = f"ROLE {role}" if role else "the application's role"
        line += (
            f"; prepared, {', '.join(map(str, below))} miss {target_recall:g}: send the statement "
            f"unprepared, or set plan_cache_mode = force_custom_plan for {who} (ALTER ROLE ... "
            "SET plan_cache_mode = force_custom_plan)"
        )
    instead = _both_ways(chosen, rows, target_recall) if below else None
    if instead is not None:
        extra = {n: v for n, v in instead["setting"].items() if chosen["setting"].get(n) != v}
        line += (
            f"; or set {', '.join(f'{n} = {v}' for n, v in extra.items())}: measured, every "
            f"group reaches {target_recall:g} one-shot and prepared, at p95 "
            f"{instead['p95_ms']:.3f} ms"
        )
    return {
        "groups": [
            {
                "group": g["group"],
                "recall": g.get("recall"),
                "served_by": g.get("served_by"),
                "generic_recall": g["generic"].get("recall"),
                "generic_served_by": g["generic"].get("served_by"),
            }
            for g in differ
        ],
        "below": below,
        "instead": None if instead is None else {"setting": instead["setting"]},
        "line": line,
    }


def _both_ways(chosen: Mapping[str, Any], rows: Any, target: float) -> dict[str, Any] | None:
    """The fastest other row of the same design and build where every group reaches the
    target with both plans."""
    ok = [
        r
        for r in rows
        if r is not chosen
        and (r["design"], r["build"]) == (chosen["design"], chosen["build"])
        and r.get("reached")
        and r.get("p95_ms") is not None
        and r.get("groups")
        and all(reaches((g.get("generic") or {}).get("recall"), target) for g in r["groups"])
    ]
    return min(ok, key=lambda r: r["p95_ms"], default=None)


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{v:.4f}"
