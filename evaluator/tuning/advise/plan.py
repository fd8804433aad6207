"""The plan of an advise: which designs (ANN stage kinds) the server supports, the builds of each
(``--build KIND:OPTION=V1,V2``) and, per design, the work setting a find searches and the settings
it runs under."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...core.errors import InputError, param
from ...kinds import registry
from ...stages import gucs
from ...stages.server_support import version_tuple
from ..sweep import grid
from ..sweep.scan_modes import raised
from .config import AdviseConfig


@dataclass(frozen=True)
class Design:
    """One design x build: the stage kind, its build options, the work setting found and the
    settings fixed while finding it."""

    kind: str
    build: dict[str, str]
    find: str
    fixed: dict[str, str]
    find_min: int = 1  # the application's LIMIT where the setting caps the rows returned
    # the table's index this build is (inplace.match): {name, oid, bytes, definition}; measured
    # on the table through it, not rebuilt on a scratch copy
    in_place: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"{self.kind} {grid.label_of(self.build, {})}"


def find_setting(kind: registry.Kind, build: dict[str, str], fixed: dict[str, str]) -> str:
    """The work setting a design's find searches: the one that moves recall most for its build
    (the registry's), else, when ``--set`` fixes that one, the kind's other such setting
    (DiskANN: ``--set diskann.query_rescore=200`` finds the search list size)."""
    first = kind.find_setting(build)
    if first not in fixed:
        return first
    alternatives = kind.find_by_build[1].values() if kind.find_by_build else ()
    others = [w for w in alternatives if w != first and w not in fixed]
    if not others:
        raise InputError(
            f"'{first}' is what advise finds for {kind.name}: not also fixed ({param('settings')})",
            field=param("set"),
        )
    return others[0]


def fixed_settings(kind: registry.Kind, find: str) -> dict[str, str]:
    """Settings a find runs under: a setting of pgeval's own (``bq.candidates``, the LIMIT of the
    index scan) needs the index to return as many rows as it asks, whatever ``ef_search``: the
    kind's iterative scan, in the mode that keeps the most order (the registry's
    ``Kind.rows_asked_scan``: HNSW's strict_order; IVFFlat has relaxed_order only)."""
    if find in gucs.OWN:
        return kind.rows_asked_scan()
    return {}


def supported(conn: Any) -> tuple[list[str], dict[str, str]]:
    """The ANN kinds this database can build (their extension installed, their cast type known)
    and, for the default designs among the others, why not (what advise lists as skipped; a
    kind that is no default design is skipped only when named, :func:`designs` says why)."""
    installed = dict(conn.execute("SELECT extname, extversion FROM pg_extension").fetchall())
    available = dict(
        conn.execute("SELECT name, default_version FROM pg_available_extensions").fetchall()
    )
    ok: list[str] = []
    why: dict[str, str] = {}
    for name in registry.ann_kinds():
        kind = registry.KINDS[name]
        ext = kind.extension or ""
        searched = kind.searched
        if ext not in installed:
            reason = (
                f"extension {ext} {available[ext]} is available but not installed here "
                f"(CREATE EXTENSION {ext})"
                if ext in available
                else f"extension {ext} is not installed on this server"
            )
        elif searched is not None and not conn.execute(*searched.known_sql()).fetchone()[0]:
            reason = f"{ext} {installed[ext]} has no {searched.name} search (upgrade {ext})"
        elif kind.min_version and version_tuple(installed[ext]) < version_tuple(kind.min_version):
            reason = f"{ext} {installed[ext]} is older than {kind.min_version} (upgrade {ext})"
        else:
            ok.append(name)
            continue
        if kind.advise_default:
            why[name] = reason
    return ok, why


def _needs(kind: registry.Kind) -> str:
    """Why a kind that is no default design cannot be built, from its description."""
    version = f" {kind.min_version} or later" if kind.min_version else ""
    searched = f" with {kind.searched.name} search" if kind.searched else ""
    return f"it needs extension {kind.extension}{version}{searched} installed in this database"


def parse_builds(items: Any) -> dict[str, list[tuple[str, list[str]]]]:
    """('hnsw:m=8,16', 'hnsw:ef_construction=64,128') -> {'hnsw': [('m', ['8','16']), ...]}."""
    per_kind: dict[str, list[str]] = {}
    for item in items or ():
        kind, sep, rest = str(item).partition(":")
        kind = kind.strip()
        if not sep or not rest.strip():
            raise InputError(
                f"'{item}' is not KIND:OPTION=V1,V2 (e.g. hnsw:m=8,16)", field=param("build")
            )
        if kind not in registry.ann_kinds():
            raise InputError(
                f"'{kind}' is not an index design ({', '.join(registry.ann_kinds())})",
                field=param("build"),
            )
        per_kind.setdefault(kind, []).append(rest)
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for kind, rests in per_kind.items():
        axes = grid.parse_axes(rests, "m=8,16", param("build"))
        grid.check_build(axes, registry.KINDS[kind].index_method)
        out[kind] = axes
    return out


def designs(
    cfg: AdviseConfig, available: list[str], why_not: dict[str, str], grouped: bool = False
) -> list[Design]:
    """Every design x build to measure, in the order given (default: the registry's default
    designs, ``Kind.advise_default``, in its order; ``grouped``, measured per group: the
    label-filtered designs too, ``Kind.labels``)."""
    chosen = list(cfg.designs) or [n for n in available if n in registry.advise_kinds(grouped)]
    for name in chosen:
        if registry.KINDS.get(name, registry.KINDS["exact"]).labels and not grouped:
            raise InputError(
                f"design {name} searches one group at a time by its label: give "
                f"{param('group_by')} COLUMN (the column the application filters by)",
                field=param("designs"),
            )
        if name not in registry.ann_kinds():
            raise InputError(
                f"'{name}' is not an index design ({', '.join(registry.ann_kinds())})",
                field=param("designs"),
            )
        if name not in available:
            why = why_not.get(name) or _needs(registry.KINDS[name])
            raise InputError(f"design {name} cannot be built here: {why}", field=param("designs"))
    builds = parse_builds(cfg.build)
    for named in builds:
        if named not in chosen:
            raise InputError(
                f"{param('build')} names {named}, which is not among the designs ({', '.join(chosen)})",
                field=param("build"),
            )
    out = []
    for name in chosen:
        kind = registry.KINDS[name]
        axes = builds.get(name)
        if not axes:  # the access method's default, spelled out: the index is built
            first = next(o for o, v in kind.build_options.items() if v is not None)
            axes = [(first, [str(kind.build_options[first])])]
        for build in grid.product(axes):
            find = find_setting(kind, build, cfg.settings)
            floor = cfg.k if find in kind.caps_rows else 1
            out.append(Design(name, build, find, fixed_settings(kind, find), floor))
    return out


def iterative_variants(
    plan: list[Design], cfg: AdviseConfig, modes: Callable[[registry.Kind], list[dict[str, str]]]
) -> list[Design]:
    """Per tenant, each design the table has measured through its own index again in each
    iterative-scan mode of its kind with the mode's limits (``modes``:
    :func:`evaluator.tuning.sweep.scan_modes.searched`), whether or not the plain scan reaches
    the target: a filtered scan's short lists are what an iterative scan fills, often at far
    less work than the database-wide setting the plain scan needs. Not where ``--set`` or the
    design fixes the scan already."""
    out = []
    for d in plan:
        kind = registry.KINDS[d.kind]
        if kind.iterative_scan is None or not d.in_place or kind.iterative_scan[0] in d.fixed:
            continue
        out += [replace(d, fixed={**d.fixed, **mode}) for mode in modes(kind)]
    return out


def raised_variants(
    variants: list[Design], rows: Sequence[Mapping[str, Any]], fixed: Mapping[str, str]
) -> list[Design]:
    """The iterative variants whose rows (in their order) miss the target, their limits raised
    (:func:`evaluator.tuning.sweep.scan_modes.raised`); [] where none is left to raise."""
    out = []
    for d, row in zip(variants, rows, strict=True):
        higher = None if row["reached"] else raised(d.fixed, fixed)
        if higher is not None:
            out.append(replace(d, fixed=higher))
    return out
