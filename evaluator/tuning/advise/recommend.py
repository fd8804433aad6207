"""The recommendation of an advise: of the designs reaching the target recall within the budgets,
the lowest p95 (within the p95 spread of the fastest: the smaller index); with the DDL and the
settings to apply it and, in words, why it won and what the runner-up costs more. When nothing
qualifies: which budget binds and what the closest design needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...testset.query_source import CAPTURE, SAMPLED_ROWS, bounded
from ..options import Finding
from ..sweep.scan_modes import mode_of
from . import apply, inplace
from .outcome import Outcome, Verdict
from .plan import AdviseConfig
from .rules import MB, Row, budgets, build_text, least_work, named, over_budget, pick

# said of a recommendation whose figure is sampled rows' through the index they are nodes of
UNMEASURED = (
    "; the application's queries are not measured: sampled rows are nodes of the index they "
    f"search and read it higher than its real queries; `{CAPTURE}` prints how to log them "
    "(then advise --captured SET)"
)


# why the index the table has stays (tuning/advise/rules.py, replaces)
KEPT = (
    "it is the index your table has (nothing to build; another design replaces it only with a "
    "p95 lower beyond the noise and a recall interval above the target)"
)


def server_context(kb: Any, target: Any, cfg: AdviseConfig) -> dict[str, Any]:
    from ...table.target_table import row_count

    shared, server_mwm = kb.execute(
        "SELECT pg_size_bytes(current_setting('shared_buffers')), "
        "pg_size_bytes(current_setting('maintenance_work_mem'))"
    ).fetchone()
    return {
        "shared_buffers": int(shared),
        "maintenance_work_mem": int(server_mwm),
        "rows": row_count(kb, target),
        "dimension": target.dimension,
        "vector_type": target.vector_type,
    }


def describe(row: Outcome, context: dict[str, Any], cfg: AdviseConfig) -> Outcome:
    """``row`` with its :class:`.outcome.Verdict`: what the build needed and where the design
    stands against the budgets."""
    from ..build_sweep import sized_memory

    build, size = row.measurement.build, row.figures.index_bytes
    mwm = cfg.maintenance_work_mem or _at_least(
        sized_memory(context["rows"], context["dimension"], context["vector_type"], build),
        context["maintenance_work_mem"],
    )
    over = over_budget(row, budgets(cfg))
    fits = None if size is None else size <= context["shared_buffers"]
    return replace(row, verdict=Verdict(mwm, fits, over))


def _at_least(sized: str, server_bytes: int) -> str:
    mb = int(sized[:-2])
    return sized if mb * MB >= server_bytes else f"{server_bytes // 1048576}MB"


def choose(
    kb: Any,
    target: Any,
    rows: Sequence[Row],
    cfg: AdviseConfig,
    group: str | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The recommendation (else None and what binds); ``group``: the column the application
    scopes each search by (its statement gets ``WHERE column = $2``)."""
    reaching = [r for r in rows if r["reached"] and r["p95_ms"] is not None]
    ok = least_work([r for r in reaching if not r["over_budget"]])
    goal = f"recall@{cfg.k} >= {cfg.target_recall:g}" + (
        " at the upper end of its setting's 95 % interval" if cfg.low_end and not group else ""
    )
    if not ok:
        return None, _unmet(rows, reaching, cfg, goal, ceilings(kb, rows))
    owned = _owned(kb, target, ok)
    chosen, by_tie = pick(ok, owned, cfg.target_recall)
    kept = any(chosen is r for r in owned)
    others = sorted((r for r in ok if r is not chosen), key=lambda r: r["p95_ms"])
    # sampled rows through the index they are nodes of: no figure of the application's queries
    bound = chosen.get("queries") == SAMPLED_ROWS
    why = (
        f"{named(chosen)}"
        + (
            f": {bounded(chosen['recall'], cfg.k)}{_worst(chosen)}"
            if bound
            else f" reaches {goal}{_worst(chosen)}"
        )
        + f" at p95 {chosen['p95_ms']:.3f} ms, index {chosen['index_bytes'] / MB:.1f} MB: "
        + (
            "its p95 is within the noise of the fastest's (spread or 95 % interval) and "
            + (KEPT if kept else "its index is the smallest")
            if by_tie
            else "the lowest p95"
        )
        + f" of the {len(ok)} design(s) "
        + ("whose queries read the target" if bound else "meeting the target")
        + " within the budgets"
    )
    if others:
        r = others[0]
        why += (
            f"; the runner-up, {named(r)}, costs p95 {r['p95_ms']:.3f} ms "
            f"({_pct(r['p95_ms'], chosen['p95_ms'])}) and index {r['index_bytes'] / MB:.1f} MB "
            f"({_pct(r['index_bytes'], chosen['index_bytes'])})"
        )
    why += _interval(chosen)
    from . import prepared

    stmts = apply.statements(kb, target, chosen, cfg.k, role=cfg.role, group=group)
    placed = inplace.advice(kb, target, chosen, stmts, cfg)
    if stmts.get("statement_change"):  # said first: the application's statement changes
        why = f"{stmts['statement_change']['why']}. {why}"
    note = apply.rebuilt_note(chosen["design"], chosen["build"])
    if placed["keep"] is not None and chosen.get("upper_bound"):
        why += _held_out_words(chosen, placed["keep"], cfg)
    elif placed["keep"] is not None and chosen.get("in_place"):
        why += f"; measured in place, on your table through {placed['keep']}: nothing to build"
    elif placed["keep"] is not None:  # the table's index, measured on a copy (the planner)
        why += f"; it is the build of {placed['keep']}, which your table has: nothing to build"
    elif note is not None:
        why += "; note: " + note
    excluded = [r for r in reaching if r["over_budget"]]
    if excluded:
        why += "; over budget: " + "; ".join(
            f"{r['design']} {build_text(r)} ({', '.join(r['over_budget'])})" for r in excluded
        )
    if bound:
        why += UNMEASURED
    return {
        "design": chosen["design"],
        "build": chosen["build"],
        "setting": chosen["setting"],
        "scan_mode": mode_of(chosen["setting"]),  # the iterative scan it needs ("off": none)
        "recall": chosen["recall"],
        "recall_margin": chosen.get("recall_margin"),
        "recall_queries": chosen.get("recall_queries"),
        # what the queries were: "sampled rows" (an upper bound for the application's),
        # "held-out rows", "query set", "test set"; an index in place measured again on a
        # held-out copy keeps its sampled rows' figure as ``upper_bound``
        "queries": chosen.get("queries"),
        "upper_bound": chosen.get("upper_bound"),
        "p95_ms": chosen["p95_ms"],
        "index_bytes": chosen["index_bytes"],
        "setting_interval": chosen.get("setting_interval"),
        "low_end": chosen.get("low_end"),
        "sweep": chosen["sweep"],
        "point": chosen["point"],
        "worst_group": chosen.get("worst_group"),
        "in_place": (chosen.get("in_place") or {}).get("name"),
        # grouped, measured in place: the groups a prepared statement serves otherwise
        "prepared": prepared.note(chosen, cfg.target_recall, cfg.k, cfg.role, rows),
        **stmts,
        **placed,
        # the SET the index was built with, printed before its DDL (none: nothing to build)
        "build_sql": [] if placed["keep"] is not None else _build_sets(chosen),
        "why": why,
    }, None


def _owned(kb: Any, target: Any, rows: Sequence[Row]) -> list[Row]:
    """The rows whose index the table has: measured in place, or the build of one of its valid
    indexes (measured on a copy where the planner preferred another)."""
    from ...table.table_index import table_indexes, twin

    indexes = [ix for ix in table_indexes(kb, target) if ix.valid]
    kb.rollback()
    return [
        r
        for r in rows
        if r.get("in_place") or twin(kb, target, r["design"], r["build"], indexes) is not None
    ]


def _held_out_words(chosen: Row, kept: str, cfg: Finding) -> str:
    """``; measured on a held-out copy of all 199,700 rows: ef_search 23 reaches 0.95 there;
    keep hnsw_idx (...)``: an index in place measured again without its sampled rows."""
    find, value = next(iter(chosen["setting"].items()))
    upper = chosen["upper_bound"]
    where = str(chosen.get("measured_where") or "")
    rows = where.split(" rows", 1)[0].rsplit(" ", 1)[-1]
    was = (upper.get("setting") or {}).get(find)
    recall = upper.get("recall")
    return (
        f"; measured on a held-out copy of all {rows} rows (the sampled rows left out): "
        f"{find.split('.', 1)[-1]} {value} reaches {cfg.target_recall:g} there; your table's "
        f"{kept} is that build: nothing to build"
        + (
            ""
            if recall is None
            else f" (in place, its sampled rows read {recall:.4f} at {was}: an upper bound)"
        )
    )


def _build_sets(row: Row) -> list[str]:
    from ...kinds import registry

    method = registry.KINDS[row["design"]].index_method or ""
    return apply.build_sets(method, row.get("maintenance_work_mem"))


def _interval(row: Row) -> str:
    """``; the setting's 95 % interval over 500 resamples of the queries: 18-33``."""
    iv = row.get("setting_interval")
    if not iv or iv.get("low") is None:
        return ""
    high = iv["high"] if iv.get("high") is not None else "above every value measured"
    return (
        f"; the setting's 95 % interval over {iv['resamples']} resamples of the queries: "
        f"{iv['low']}–{high}"
    )


def _worst(row: Row) -> str:
    """`` (0.9612 ±0.0094 over 500 queries)``; grouped: `` in every group (the worst, small with
    300 rows, at 0.9512 ±0.0160 over 100 queries)``. ±: the 95 % interval (:mod:`.margin`)."""
    worst = row.get("worst_group")
    margin = ""
    if row.get("recall_margin") is not None:
        margin = f" ±{row['recall_margin']:.4f} over {row['recall_queries']} queries"
    if not worst:
        return f" ({row['recall']:.4f}{margin})"
    return (
        f" in every group (the worst, {worst['group']} with {worst['rows']} rows, at "
        f"{worst['recall']:.4f}{margin})"
    )


def _missing(row: Row) -> str:
    """Grouped: ``; the worst group, small (300 rows), at 0.4100; missing: small, mid``."""
    worst = row.get("worst_group")
    if not worst:
        return ""
    recall = "n/a" if worst["recall"] is None else f"{worst['recall']:.4f}"
    return (
        f"; its worst group, {worst['group']} ({worst['rows']} rows), at {recall}; the groups "
        f"that miss: {', '.join(row.get('groups_missing') or []) or 'none'}"
    )


def _pct(value: float, base: float) -> str:
    if not base:
        return "n/a"
    return f"{(value - base) / base * 100:+.0f}%"


def ceilings(kb: Any, rows: Sequence[Row]) -> dict[str, float]:
    """The server's maximum of each setting a find searched (``pg_settings.max_val``; pgeval's
    own, ``bq.candidates``, has none): a find that stopped there cannot go higher."""
    from ...stages import gucs

    names = sorted({next(iter(r["setting"])) for r in rows if r["setting"]})
    gucs.load_libraries(kb)
    found = kb.execute(
        "SELECT name, max_val::float8 FROM pg_settings WHERE name = ANY(%s) AND max_val IS NOT NULL",
        (names,),
    ).fetchall()
    return {n: v for n, v in found}


def _higher(best: Row, ceilings: dict[str, float]) -> str:
    """What would bring the closest design further: a higher --find-max, unless its setting is
    at the server's maximum already."""
    name, value = next(iter(best["setting"].items()))
    if name in ceilings and value is not None and float(value) >= ceilings[name]:
        return (
            f"{name} is at the server's maximum ({ceilings[name]:g}): build the index denser "
            "or with more precision (--build)"
        )
    return "raise --find-max or build the index denser (--build)"


def _unmet(
    rows: Sequence[Row],
    reaching: Sequence[Row],
    cfg: AdviseConfig,
    goal: str,
    ceilings: dict[str, float],
) -> dict[str, Any]:
    if not reaching:
        best = max(rows, key=lambda r: r["recall"] or -1.0, default=None)
        closest = (
            None
            if best is None
            else {
                "design": best["design"],
                "build": best["build"],
                "setting": best["setting"],
                "recall": best["recall"],
            }
        )
        every = " in every group" if any(r.get("worst_group") for r in rows) else ""
        why = f"no design reaches {goal}{every} within --find-max" + (
            ""
            if best is None or best["recall"] is None
            else f"; the closest is {named(best)} at recall {best['recall']:.4f}{_missing(best)}: "
            + _higher(best, ceilings)
        )
        return {"binding": ["--target-recall"], "closest": closest, "why": why}
    binding = sorted({opt for r in reaching for opt in r["over_budget"]})
    # the closest: the smallest excess over its budgets, as a ratio of the budget
    b = budgets(cfg)
    best = min(reaching, key=lambda r: max(v / b[o] for o, v in r["over_budget"].items()))
    needs = {o: v for o, v in best["over_budget"].items()}
    why = (
        f"no design meets {goal} within the budgets: "
        + "; ".join(
            f"{opt} {b[opt]:g} binds ({', '.join(r['design'] for r in reaching if opt in r['over_budget'])} over it)"
            for opt in binding
        )
        + f". The closest, {named(best)}, needs "
        + ", ".join(f"{opt} {v:.3f}" for opt, v in needs.items())
        + (
            f" (its worst group, {best['worst_group']['group']}, at "
            f"{best['worst_group']['recall']:.4f})"
            if best.get("worst_group") and best["worst_group"]["recall"] is not None
            else ""
        )
    )
    return {
        "binding": binding,
        "closest": {
            "design": best["design"],
            "build": best["build"],
            "setting": best["setting"],
            "recall": best["recall"],
            "needs": needs,
        },
        "why": why,
    }
