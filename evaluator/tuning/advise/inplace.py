"""The index you have is a candidate, measured in place (docs/advise.md, "The index in place").

- :func:`match`: a design whose build is an index the target's table has already (access method,
  operator class, the column or the cast expression the design searches, every option with its
  default, valid, not partial) is measured on the table itself, through that index (``sweep
  --index NAME`` without ``--build``), not rebuilt on a scratch copy.
- :func:`advice`: recommending such a design prints no ``CREATE INDEX`` ("keep NAME; set ...");
  a new index's DDL comes with the ANN indexes of the column it would supersede (the planner may
  keep choosing one of them), its rollback and when to drop the old one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...kinds import registry
from ...table import partitions
from ...table.table_index import TableIndex, per_group, serves_same, table_indexes, twin
from .plan import Design


def match(kb: Any, target: Any, plan: list[Design], column: str | None = None) -> list[Design]:
    """The plan with each design the table has already marked: measured in place. Grouped by
    ``column``, a design the table has as one partial index per group (``WHERE tenant = 3``)
    is measured in place too, each group through its own index (``family``: their names)."""
    indexes = table_indexes(kb, target)
    kb.rollback()
    out = []
    for d in plan:
        ix = twin(kb, target, d.kind, d.build, indexes, column)
        out.append(d if ix is None else replace(d, in_place=_existing(ix, indexes, column)))
    return out


def _existing(ix: TableIndex, indexes: list[TableIndex], column: str | None) -> dict[str, Any]:
    found = {"name": ix.name, "oid": ix.oid, "bytes": ix.bytes, "definition": ix.definition}
    if not ix.partial or column is None:
        return found
    family = [
        f
        for f in per_group(indexes, column)
        if (f.method, f.key, f.opclass, f.options) == (ix.method, ix.key, ix.opclass, ix.options)
    ]
    return {
        **found,
        "bytes": sum(f.bytes for f in family),
        "family": [f.name for f in family],  # one per group: each serves its group
    }


def _work(method: str) -> str | None:
    kind = registry.by_method(method)
    return None if kind is None else kind.find_setting({})


def _now(kb: Any, names: list[str]) -> dict[str, str | None]:
    from ...stages import gucs

    gucs.load_libraries(kb)
    return {n: kb.execute("SELECT current_setting(%s, true)", (n,)).fetchone()[0] for n in names}


def _drop(kb: Any, target: Any, name: str) -> str:
    return partitions.drop_index(kb, target, name).as_string(kb)


def _entries(
    kb: Any, target: Any, kind: registry.Kind, olds: list[TableIndex]
) -> list[dict[str, Any]]:
    """The indexes ``olds`` as the recommendation lists them: whether each serves the printed
    statement too, the setting it is searched at now (its access method's work setting, as the
    server has it), its DROP."""
    works = {ix.name: _work(ix.method) for ix in olds}
    now = _now(kb, sorted({w for w in works.values() if w}))
    kb.rollback()
    return [
        {
            "name": ix.name,
            "method": ix.method,
            "definition": ix.definition,
            "bytes": ix.bytes,
            "serves_statement": serves_same(kb, target, kind, ix),
            "setting": {w: now[w]} if (w := works[ix.name]) is not None else None,
            "drop": _drop(kb, target, ix.name),
        }
        for ix in olds
    ]


def _undo(stmts: dict[str, Any]) -> list[str]:
    """What a design's change of the table besides its index undoes (the label column)."""
    change = stmts.get("statement_change")
    return [] if change is None else [change["drop_sql"]]


def _confirm(cfg: Any, chosen: dict[str, Any], index: str) -> str:
    """The sweep that measures the recommended design through ``index`` on the table (a
    label-filtered design: its new statement, through SQL's evaluate_recall)."""
    kind = registry.KINDS[chosen["design"]]
    find = kind.find_setting(chosen["build"])
    if kind.labels:  # (a sweep of the table searches it by the group column, not the labels)
        return (
            "SELECT * FROM pgeval.evaluate_recall(<the printed statement>, <queries>, "
            f"'{{\"{find}\": [...]}}') with $2 each group's label: docs/sql.md"
        )
    return (
        f"pgeval sweep --target {cfg.target} --stage {chosen['design']} --index {index} "
        f"--find {find} --target-recall {cfg.target_recall:g} --k {cfg.k}"
    )


def advice(
    kb: Any, target: Any, chosen: dict[str, Any], stmts: dict[str, Any], cfg: Any
) -> dict[str, Any]:
    """What the recommendation says of the table's indexes: ``keep`` (the design is an index
    the table has: no DDL) or, for a new index, the indexes it ``supersedes`` (every valid ANN
    index of the column), the ``rollback``, ``confirm`` (the sweep that measures the new index)
    and ``drop_old`` (when to drop the old ones); ``planner``: the same in words."""
    indexes = [ix for ix in table_indexes(kb, target) if ix.valid]
    kind = registry.KINDS[chosen["design"]]
    placed = chosen.get("in_place") or {}
    kept = ", ".join(placed.get("family") or []) or placed.get("name")
    if kept is None:
        ix = twin(kb, target, chosen["design"], chosen["build"], indexes)
        kept = None if ix is None else ix.name
    if kept is not None:
        return _keep(kb, target, chosen, stmts, cfg, kept, indexes)
    from .apply import index_name

    new = index_name(target, chosen)
    confirm = _confirm(cfg, chosen, new)
    supersedes = _entries(kb, target, kind, indexes)
    return {
        "keep": None,
        "supersedes": supersedes,
        "rollback": [
            *(_drop(kb, target, n) for n in stmts["ddl_indexes"]),
            *_undo(stmts),
            *stmts["reset_sql"],
        ],
        "confirm": confirm,
        "drop_old": None if not supersedes else f"after `{confirm}` confirms {new}",
        "planner": _words(new, supersedes, confirm),
    }


def _keep(
    kb: Any,
    target: Any,
    chosen: dict[str, Any],
    stmts: dict[str, Any],
    cfg: Any,
    kept: str,
    indexes: list[TableIndex],
) -> dict[str, Any]:
    """Keep the table's index ``kept``: no DDL. Measured through it, nothing else is said (the
    plan used it); measured on a scratch copy instead, the indexes that serve the statement in
    its place are named, as what to drop once a sweep through ``kept`` confirms it."""
    settings = stmts["settings_sql"]
    planner = f"keep {kept} (the index your table has: no index to build); " + (
        "set " + "; ".join(settings) if settings else "no setting to change"
    )
    out: dict[str, Any] = {
        "ddl": None,
        "keep": kept,
        "supersedes": [],
        "rollback": stmts["reset_sql"],
        "confirm": None,
        "drop_old": None,
        "planner": planner,
    }
    if chosen.get("in_place"):
        return out
    kind = registry.KINDS[chosen["design"]]
    rivals = [
        e
        for e in _entries(kb, target, kind, [ix for ix in indexes if ix.name != kept])
        if e["serves_statement"]
    ]
    confirm = _confirm(cfg, chosen, kept)
    return {
        **out,
        "supersedes": rivals,
        "confirm": confirm,
        "drop_old": f"after `{confirm}` confirms {kept}" if rivals else None,
        "planner": planner
        + (
            f". Measured on a scratch copy: on your table the planner serves this statement "
            f"with {', '.join(r['name'] for r in rivals) or 'another index'}, not {kept}, so "
            f"the setting above does not reach it; {kept} serves the statement once "
            + ("; ".join(r["drop"] for r in rivals) or "the other index is dropped")
            + f" (then measure it: {confirm})"
        ),
    }


def _words(new: str, supersedes: list[dict[str, Any]], confirm: str) -> str | None:
    """What happens to the indexes the planner uses now, in words."""
    if not supersedes:
        return None
    parts = []
    for old in supersedes:
        mb = old["bytes"] / 1048576.0
        setting = ", ".join(f"{k} {v}" for k, v in (old["setting"] or {}).items())
        if old["serves_statement"]:
            parts.append(
                f"{old['name']} ({old['method']}, {mb:.1f} MB) serves the printed statement too: "
                f"the planner may keep choosing it over {new}"
                + (f", at the server's {setting}" if setting else "")
            )
        else:
            parts.append(
                f"{old['name']} ({old['method']}, {mb:.1f} MB) serves the application's present "
                "statement, not the printed one: it stays in use until the application runs "
                "the printed statement"
            )
    return (
        f"{new} is built beside {', '.join(o['name'] for o in supersedes)}: "
        + "; ".join(parts)
        + f". Measure {new} once built ({confirm}); then drop the old index"
        + ("es" if len(supersedes) > 1 else "")
        + " ("
        + "; ".join(o["drop"] for o in supersedes)
        + "), which every write maintains until then"
    )
