"""The grid of a sweep: ``--param GUC=v1,v2`` (query-time settings) and ``--build KEY=v1,v2``
(index build options); several of each give the cartesian product, the first one varying
slowest. Every grid point has a label (``ef_search=40``, ``m=16,ef_construction=64``) used in
run names and reports."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import InputError, param
from ...kinds.registry import KINDS, ann_kinds

_GUC = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")

# Build options per access method (the index reloptions pgeval may set on a scratch copy): each
# ANN kind's, from evaluator.kinds.registry.
BUILD_OPTIONS = {k.index_method: tuple(k.build_options) for k in KINDS.values() if k.index_method}


@dataclass(frozen=True)
class Point:
    """One point of the grid: its position, settings and build options."""

    number: int
    settings: dict = field(default_factory=dict)
    build: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return label_of(self.build, self.settings)


def label_of(build: dict, settings: dict) -> str:
    parts = [f"{k}={v}" for k, v in build.items()]
    parts += [f"{k.split('.', 1)[-1]}={v}" for k, v in settings.items()]
    return ",".join(parts) or "default"


def parse_axes(items: Any, what: str, field_name: str) -> list[tuple[str, list[str]]]:
    """('hnsw.ef_search=10,20', ...) -> [('hnsw.ef_search', ['10', '20']), ...]."""
    axes: list[tuple[str, list[str]]] = []
    for item in items or ():
        name, sep, values = str(item).partition("=")
        name = name.strip().lower()
        if not sep or not name:
            raise InputError(f"'{item}' is not NAME=V1,V2,... (e.g. {what})", field=field_name)
        if not _GUC.match(name):
            raise InputError(f"'{name}' is not a valid name", field=field_name)
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not vals:
            raise InputError(f"'{item}' gives no value", field=field_name)
        dup = sorted({v for v in vals if vals.count(v) > 1})
        if dup:
            raise InputError(f"'{name}' lists {', '.join(dup)} twice", field=field_name)
        if any(n == name for n, _ in axes):
            raise InputError(
                f"'{name}' is given twice (list its values once: {name}=v1,v2,...)",
                field=field_name,
            )
        axes.append((name, vals))
    return axes


def check_params(axes: Any, stage_kind: str, prefixes: tuple[str, ...], settings: dict) -> None:
    """Every swept setting must be one the stage applies (its extension's or a core one)."""
    for name, _ in axes:
        if "." in name and not any(name.startswith(p) for p in prefixes):
            raise InputError(
                f"stage {stage_kind} does not apply '{name}' (it applies "
                f"{', '.join(p + '*' for p in prefixes) or 'no extension setting'} "
                "and core settings)",
                field=param("params"),
            )
        if name in settings:
            raise InputError(
                f"'{name}' is both swept ({param('params')}) and fixed ({param('settings')})",
                field=param("params"),
            )


def check_build(axes: Any, method: str | None) -> None:
    if not axes:
        return
    allowed = BUILD_OPTIONS.get(method or "")
    if not allowed:
        raise InputError(
            f"build sweeps need an ANN stage ({', '.join(ann_kinds())})", field=param("build")
        )
    defaults = next((k.build_options for k in KINDS.values() if k.index_method == method), {})
    for name, values in axes:
        if name not in allowed:
            raise InputError(
                f"'{name}' is not a {method} build option (known: {', '.join(allowed)})",
                field=param("build"),
            )
        _check_values(method or "", name, values, defaults.get(name))


def _check_values(method: str, name: str, values: Any, default: str | None) -> None:
    """A numeric build option (its default a number) takes numbers only: checked here, before
    any work, rather than failing mid-sweep (the server checks the range when it builds)."""
    if default is None:
        return
    kind, pattern = (
        ("an integer", r"\d+") if default.isdigit() else ("a number", r"\d+(\.\d*)?|\.\d+")
    )
    if not re.fullmatch(r"\d+(\.\d*)?", default):
        return  # a word (storage_layout): the server names what it accepts
    for v in values:
        if not re.fullmatch(pattern, str(v).strip()):
            raise InputError(
                f"{method} build option {name}={v!r}: expected {kind}", field=param("build")
            )


def product(axes: Any) -> list[dict]:
    if not axes:
        return [{}]
    names = [n for n, _ in axes]
    return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in axes))]


def points(param_axes: Any, build_axes: Any) -> list[Point]:
    """The grid in order: builds vary slowest, then the settings in the order given."""
    out: list[Point] = []
    for b in product(build_axes):
        for s in product(param_axes):
            out.append(Point(len(out) + 1, s, b))
    return out


def as_json(param_axes: Any, build_axes: Any) -> dict:
    return {"params": {n: v for n, v in param_axes}, "build": {n: v for n, v in build_axes}}
