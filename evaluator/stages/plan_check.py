"""EXPLAIN checks: an ANN stage must be served by the intended index, the exact stage by no ANN
index at all. A stage that fails its check raises :class:`PlanError` naming what the planner
chose, and is never reported as that index.

The generic plan (the one a prepared statement may switch to after five executions) is read with
``EXPLAIN (GENERIC_PLAN)`` on PostgreSQL 16 and newer; on 14 and 15, which lack that option, with
``PREPARE`` + ``EXPLAIN EXECUTE`` of the query's own values under
``plan_cache_mode = force_generic_plan`` (the same plan: its parameters are not folded in)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from ..core.errors import PlanError
from ..targets import introspect

GENERIC_PLAN_OPTION = 160000  # server_version_num of the first release with GENERIC_PLAN
_names = itertools.count(1)

SCAN_NODES = ("Index Scan", "Index Only Scan", "Bitmap Index Scan")


def explain(conn: Any, statement: Any, params: dict | None = None, generic: bool = False) -> dict:
    """The JSON plan (the top "Plan" node) of ``statement``."""
    from psycopg import sql

    opts = "GENERIC_PLAN, FORMAT JSON" if generic else "FORMAT JSON"
    row = conn.execute(
        sql.SQL("EXPLAIN ({}) ").format(sql.SQL(opts)) + statement, params
    ).fetchone()
    return _plan_of(row[0])


def _plan_of(doc: Any) -> dict:
    """The top "Plan" node of EXPLAIN's JSON (text where no JSON loader is registered)."""
    if isinstance(doc, str):
        import json

        doc = json.loads(doc)
    return doc[0]["Plan"]


def explain_generic(conn: Any, statement: Any, values: list) -> dict:
    """The generic plan of ``statement`` (placeholders ``$1, $2, ...``); ``values`` are the
    parameters in that order, bound only where the server needs them to EXECUTE (< 16)."""
    if conn.info.server_version >= GENERIC_PLAN_OPTION:
        return explain(conn, statement, None, generic=True)
    from psycopg import sql

    name = sql.Identifier(f"pgeval_plan_check_{next(_names)}")
    previous = conn.execute("SELECT current_setting('plan_cache_mode')").fetchone()[0]
    conn.execute(sql.SQL("PREPARE {} AS ").format(name) + statement)
    try:
        conn.execute("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")
        # EXPLAIN EXECUTE takes no bound parameters: the values go in as literals (quoted by
        # psycopg's dumpers: vectors as text, filters as their own types)
        args = (
            sql.SQL("({})").format(sql.SQL(", ").join(map(sql.Literal, values)))
            if values
            else sql.SQL("")
        )
        row = conn.execute(
            sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {}{}").format(name, args)
        ).fetchone()
        conn.execute("SELECT set_config('plan_cache_mode', %s, true)", (previous,))
    finally:
        if conn.info.transaction_status != 3:  # not INERROR: the stage rolls back, then it
            conn.execute(sql.SQL("DEALLOCATE {}").format(name))  # goes with the session
    return _plan_of(row[0])


def nodes(plan: dict) -> Iterator[Any]:
    yield plan
    for child in plan.get("Plans", ()) or ():
        yield from nodes(child)


def index_scans(plan: dict) -> list[tuple[str, str, str]]:
    """[(node type, index name, relation)] of every index scan in the plan."""
    return [
        (n["Node Type"], n.get("Index Name"), n.get("Relation Name", ""))
        for n in nodes(plan)
        if n["Node Type"] in SCAN_NODES
    ]


def ann_indexes(conn: Any, relation_oid: int) -> dict[str, str]:
    """name -> method of every ANN index on the relation (any column, any operator class)."""
    return {name: method for name, method, _, _ in introspect.ann_indexes(conn, relation_oid)}


def describe(plan: dict, methods: dict[str, str]) -> str:
    """What the planner chose, in words: 'index chunks_emb_diskann (diskann)' or
    'a sequential scan on chunks'."""
    scans = index_scans(plan)
    if scans:
        return ", ".join(
            f"index {name} ({methods.get(name, 'btree or other')}, {typ})" for typ, name, _ in scans
        )
    seq = [n.get("Relation Name") for n in nodes(plan) if n["Node Type"] == "Seq Scan"]
    if seq:
        return f"a sequential scan on {seq[0]}"
    return f"a {plan['Node Type']} plan without an index scan"


def check_in(plan: dict, tx: dict, *, stage: str, method: str, generic: bool = False) -> str:
    """:func:`check_ann` against the indexes of a vector stage's open transaction ``tx``
    (its candidates, every ANN index, the one wanted: ``VectorStage.begin``)."""
    return check_ann(
        plan,
        stage=stage,
        method=method,
        candidates=tx["candidates"],
        all_ann=tx["all_ann"],
        wanted=tx["wanted"],
        generic=generic,
    )


def check_ann(
    plan: dict,
    *,
    stage: str,
    method: str,
    candidates: list[str],
    all_ann: dict[str, str],
    wanted: str | None = None,
    generic: bool = False,
) -> str:
    """Return the index name serving the plan, or raise PlanError."""
    used = [name for _, name, _ in index_scans(plan) if name in all_ann]
    ok = [name for name in used if name in candidates and (wanted is None or name == wanted)]
    if ok:
        return ok[0]
    what = (
        f"index {wanted}"
        if wanted
        else (f"a {method} index ({', '.join(candidates)})" if candidates else f"a {method} index")
    )
    kind = "generic plan (prepared statement)" if generic else "plan"
    hint = ""
    if not candidates:
        hint = f"; the target has no {method} index for its column and distance"
    elif used:
        hint = (
            "; another vector index on the same column wins: use --isolate-index (drops the "
            "others inside the stage's transaction and rolls back; it locks the table) or "
            "keep each index on its own copy of the table"
        )
    elif index_scans(plan):
        hint = (
            "; the planner prefers to filter through that index and sort the matches itself "
            "(a selective filter, or a small table): that is exact search over the filtered "
            "rows, not the ANN index — check ANALYZE, or measure it as the exact stage"
        )
    else:
        hint = (
            "; the planner prefers not to use the index (small table or filters): check "
            "ANALYZE, or --set enable_seqscan=off"
        )
    raise PlanError(f"stage {stage}: the {kind} uses {describe(plan, all_ann)}, not {what}{hint}")


def check_exact(plan: dict, *, stage: str, all_ann: dict[str, str]) -> None:
    used = [name for _, name, _ in index_scans(plan) if name in all_ann]
    if used:
        raise PlanError(
            f"stage {stage}: exact search must not use an ANN index but the plan "
            f"uses {describe(plan, all_ann)}"
        )


# planner settings that can make an ANN index serve a filtered query, tried in this order when
# the plan check fails (each inside a savepoint of the stage's transaction, rolled back)
FORCING_CANDIDATES = (
    {"enable_sort": "off"},
    {"enable_bitmapscan": "off"},
    {"enable_sort": "off", "enable_bitmapscan": "off"},
    {"enable_seqscan": "off"},
    {"enable_sort": "off", "enable_bitmapscan": "off", "enable_seqscan": "off"},
    {
        "enable_sort": "off",
        "enable_bitmapscan": "off",
        "enable_seqscan": "off",
        "enable_material": "off",
        "enable_hashagg": "off",
    },
)


def find_forcing(
    conn: Any, statement: Any, params: dict, check: Any, current: dict[str, str]
) -> Any:
    """The first of :data:`FORCING_CANDIDATES` (settings the stage does not already have)
    under which ``check(plan)`` passes: ``(settings, index)``, or None. Each try runs in a
    savepoint of the open transaction and is rolled back: nothing stays set."""
    for candidate in FORCING_CANDIDATES:
        if all(str(current.get(k, "")).lower() in (v, "false", "0") for k, v in candidate.items()):
            continue  # the stage already runs with these
        try:
            with conn.transaction(force_rollback=True):
                for name, value in candidate.items():
                    conn.execute("SELECT set_config(%s, %s, true)", (name, value))
                plan = explain(conn, statement, params)
                return candidate, check(plan)
        except PlanError:
            continue
    return None


def forcing_hint(stage: str, found: Any) -> str:
    """'; with --set hnsw:enable_sort=off the planner uses idx_hnsw (tried ...)'."""
    if found is None:
        tried = sorted({k for c in FORCING_CANDIDATES for k in c})
        return (
            f"; no planner setting tried ({', '.join(k + '=off' for k in tried)}) makes the "
            "planner use it"
        )
    settings, index = found
    flags = " ".join(f"--set {stage}:{k}={v}" for k, v in settings.items())
    return (
        f"; with {flags} the planner uses {index} (tried inside the stage's transaction, "
        "rolled back)"
    )


def access_path(plan: dict) -> str:
    """'Index Scan using idx' / 'Seq Scan on t' / the top node type: what a person reads first."""
    scans = index_scans(plan)
    seq = [n.get("Relation Name") for n in nodes(plan) if n["Node Type"] == "Seq Scan"]
    return (
        ", ".join(f"{t} using {i}" for t, i, _ in scans)
        if scans
        else f"Seq Scan on {seq[0]}"
        if seq
        else plan["Node Type"]
    )
