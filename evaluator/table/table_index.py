"""The ANN indexes a target's table has on its vector column (:func:`table_indexes`, read by
``target.introspect``, the one reader of the index catalog), and which build of a kind one of
them is (:func:`twin`): advise measures such an index in place (tuning/advise/inplace.py), a sweep
on sampled rows rebuilds it on copies (tuning/sweep/held_out.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ..kinds import registry
from ..targets import introspect
from .fingerprint import reloptions
from .target_table import resolve_table


@dataclass(frozen=True)
class TableIndex:
    """An ANN index of the target's table on its vector column (plain or an expression of it)."""

    name: str
    method: str
    opclass: str
    key: str  # the key as the server prints it: ``e``, ``((e)::halfvec(32))``
    options: dict[str, str]  # with the access method's defaults
    partial: bool
    valid: bool
    bytes: int
    oid: int
    definition: str
    predicate: str | None = None  # a partial index's WHERE, as the server prints it


def _bare(text: str) -> str:
    """An expression without quotes, parentheses and blanks: the server's text and ours compare."""
    return re.sub(r'["()\s]', "", text)


def _value(v: Any) -> str:
    """An option's value as compared: ``16``, ``'16'`` and ``16.0`` are one."""
    text = str(v).strip().strip("'").lower()
    try:
        return repr(float(text))
    except ValueError:
        return text


def _options(method: str, given: dict[str, Any]) -> dict[str, str]:
    return {k: _value(v) for k, v in {**registry.build_defaults(method), **given}.items()}


def _on_column(key: str, column: str) -> bool:
    bare = key.replace('"', "")
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(column)}(?![A-Za-z0-9_])", bare) is not None


def table_indexes(kb: Any, target: Any) -> list[TableIndex]:
    """The ANN indexes (the registry's access methods) of the target's table on its vector
    column, by name (read by ``target.introspect``, the one reader of the index catalog). A
    partitioned table's: each partitioned index (one per partition, its bytes theirs), and an
    index of one partition only as partial."""
    methods = registry.index_methods()
    out = []
    for row in introspect.all_index_rows(kb, resolve_table(kb, target)):
        name, method, relopts, valid, pred, opclasses, keys, ddl, size, oid, _, on, part = row
        keys = list(keys or [])
        if method not in methods or len(keys) != 1 or not _on_column(keys[0], target.vector_column):
            continue
        if part:  # a partition of a partitioned index: that index is the one listed
            continue
        out.append(
            TableIndex(
                name=name,
                method=method,
                opclass=(list(opclasses or [""]))[0],
                key=keys[0],
                options=_options(method, reloptions(relopts)),
                partial=pred is not None or on is not None,  # one partition's: its rows only
                valid=bool(valid),
                bytes=int(size),
                oid=int(oid),
                definition=ddl,
                predicate=pred,
            )
        )
    return out


def _searched(kb: Any, target: Any, kind: registry.Kind) -> tuple[str, str]:
    """(the key a design's index has, bare; its operator class)."""
    searched = replace(target, search_type=kind.cast_type) if kind.cast_type else target
    key = _bare(searched.vector_expr().as_string(kb))
    return key, kind.opclass(target.vector_type, target.distance)


def serves_same(kb: Any, target: Any, kind: registry.Kind, ix: TableIndex) -> bool:
    """Whether ``ix`` serves the statement a design of ``kind`` prints (the same key and
    operator class, whatever its access method): the planner may choose it for that statement."""
    key, opclass = _searched(kb, target, kind)
    return _bare(ix.key) == key and ix.opclass == opclass


def twin(
    kb: Any,
    target: Any,
    design: str,
    build: dict[str, str],
    indexes: list[TableIndex],
    column: str | None = None,
) -> TableIndex | None:
    """The table's index a build of ``design`` would duplicate (valid, not partial), else None;
    with ``column`` (a grouped measurement's), else the first of :func:`per_group`."""
    kind = registry.KINDS[design]
    wanted = _options(kind.index_method or "", build)
    same = [
        ix
        for ix in indexes
        if ix.valid
        and ix.method == kind.index_method
        and not kind.labels  # (its index has a second key, the labels: built, never kept)
        and serves_same(kb, target, kind, ix)
        and ix.options == wanted
    ]
    whole = [ix for ix in same if not ix.partial]
    if whole or column is None:
        return whole[0] if whole else None
    family = per_group(same, column)
    return family[0] if family else None


def per_group(indexes: list[TableIndex], column: str) -> list[TableIndex]:
    """The partial indexes of ``indexes`` whose WHERE names the group ``column`` (``WHERE
    tenant = 3``: one tenant's index), by name: together the build each group is served by."""
    return sorted(
        (ix for ix in indexes if ix.predicate and _on_column(ix.predicate, column)),
        key=lambda ix: ix.name,
    )
