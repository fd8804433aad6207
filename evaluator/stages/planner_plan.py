"""The planner's own plan: an ANN stage measured with the plan the planner chooses for the
application's statement, whatever it is (a group's sweep, `sweep --plan custom|generic`).

By default an ANN stage must be served by its index (:mod:`.plan_check` refuses any other plan,
and the stage sets ``enable_seqscan = off``). An application sets neither: for a small tenant the
planner may serve ``WHERE tenant = $2 ORDER BY embedding <=> $1 LIMIT 10`` through the tenant's
btree and a sort (exact search), and the same statement prepared (the generic plan a server picks
after five executions, as psycopg 3 and JDBC do) through the HNSW index. Under
``ctx.extra[PLANNER] = {"mode": "custom" | "generic"}`` the stage:

- adds none of its own planner settings (a ``--set`` still applies, and is the user's forcing);
- pins the plan mode with ``plan_cache_mode`` (``force_custom_plan``: each execution planned with
  its values, as a one-shot statement; ``force_generic_plan``: the prepared statement's generic
  plan), so that the timed statements never switch plan half way;
- reads the plan of that mode with EXPLAIN and records what served it (:func:`served_by`) in
  the run's ``params.plan``: the ANN index, or the path the planner took instead;
- never refuses the plan: the rows the application gets are what is measured.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import PlanError
from . import plan_check

PLANNER = "planner_plan"  # ctx.extra's key: {"mode": "custom" | "generic"}
MODES = ("custom", "generic")
CACHE_MODE = {"custom": "force_custom_plan", "generic": "force_generic_plan"}


def mode(ctx: Any) -> str | None:
    """The plan mode measured (None: the stage's index is required, as by default)."""
    found = ctx.extra.get(PLANNER)
    return None if found is None else str(found.get("mode") or "custom")


def settings(ctx: Any, given: dict[str, str]) -> dict[str, str]:
    """The stage's settings in planner mode: the user's, and the plan mode pinned (unless the
    user pinned one)."""
    out = dict(given)
    out.setdefault("plan_cache_mode", CACHE_MODE[mode(ctx) or "custom"])
    return out


def served_by(plan: dict, all_ann: dict[str, str], index: str | None) -> str:
    """What served the statement, in words: ``index kb_hnsw (hnsw)``, ``exact via kb_tenant``
    (another index and a sort), ``exact via a sequential scan``; a partitioned table's
    statement that no partition key prunes, ``indexes kb_t1_e_idx, kb_t2_e_idx (hnsw)`` (an
    Append of its partitions' index scans)."""
    if index is not None:
        method = all_ann.get(index, "ann")
        used = [n for _, n, _ in plan_check.index_scans(plan) if all_ann.get(n) == method]
        if len(set(used)) > 1:
            return f"indexes {', '.join(dict.fromkeys(used))} ({method})"
        return f"index {index} ({method})"
    scans = plan_check.index_scans(plan)
    if scans:
        return "exact via " + ", ".join(dict.fromkeys(name for _, name, _ in scans))
    return "exact via a sequential scan"


def _served(
    conn: Any,
    ctx: Any,
    tx: dict,
    method: str,
    custom: tuple[Any, dict],
    generic: tuple[Any, list] | None,
) -> tuple[str | None, str]:
    """The plan of the context's mode: the ANN index serving it (None: another path) and what
    served it, in words."""
    which = mode(ctx) or "custom"
    if which == "generic" and generic is not None:
        plan = plan_check.explain_generic(conn, generic[0], generic[1])
    else:
        plan = plan_check.explain(conn, custom[0], custom[1])
    try:
        index: str | None = plan_check.check_in(
            plan, tx, stage=ctx.stage, method=method, generic=which == "generic"
        )
    except PlanError:  # another path serves it
        index = None
    all_ann = tx["all_ann"] if isinstance(tx["all_ann"], dict) else {}
    return index, served_by(plan, all_ann, index)


def check(
    conn: Any,
    ctx: Any,
    tx: dict,
    method: str,
    custom: tuple[Any, dict],
    generic: tuple[Any, list] | None,
) -> str | None:
    """The ANN index serving the plan of the context's mode (None: another path serves it);
    ``tx["plan"]`` records the mode and what served it. ``custom``: the statement and its
    values; ``generic``: the ``$n`` statement and its values in order."""
    index, served = _served(conn, ctx, tx, method, custom, generic)
    tx["plan"] = {"mode": mode(ctx) or "custom", "served_by": served, "ann": index is not None}
    return index


def at_application_limit(
    conn: Any,
    ctx: Any,
    tx: dict,
    method: str,
    limit: int,
    custom: tuple[Any, dict],
    generic: tuple[Any, list] | None,
) -> None:
    """The measured statement fetches ``ctx.depth`` rows (one more for a sampled row, whose own
    row is dropped; or a deeper --depth); the application's is ``LIMIT limit``. Near the point
    where the planner switches paths the two LIMITs can be planned differently: then
    ``tx["plan"]["at_limit"]`` names what serves the application's LIMIT, and a warning says
    the figures are not what the application gets (held-out queries run at its LIMIT)."""
    _, served = _served(conn, ctx, tx, method, custom, generic)
    if served == tx["plan"]["served_by"]:
        return
    tx["plan"]["at_limit"] = {"limit": limit, "served_by": served}
    scope = getattr(ctx.target, "scope", None)
    where = f" for {scope[0]}={scope[1]}" if scope else ""
    ctx.warn(
        f"stage {ctx.stage}{where}: the statement measured fetches LIMIT {ctx.depth} and its "
        f"{tx['plan']['mode']} plan is served by {tx['plan']['served_by']}, but the "
        f"application's LIMIT {limit} is served by {served}: these figures are not what the "
        "application gets (near the planner's switching point); measure at the application's "
        + (
            "LIMIT with held-out queries (--queries-file)"
            if ctx.extra.get("exclude_own")
            else f"LIMIT: --depth {limit}"
        )
    )
