"""Stage kinds: what each kind is, described once, and kind -> runner class (modules load lazily).

Every part of pgeval that treats kinds differently reads :data:`KINDS` instead of listing kinds
by hand: the pipeline (runner, role recorded in each run's params, which SQL's stage roles read),
sweep (which kinds sweep, their work settings, build options), the fingerprint (index option
defaults), warm-up and diagnostics (the vector kinds), the catalog (which index and operator
class serve a kind), advise (its default designs, the iterative scan and the re-rank candidates
of a kind), the help texts that list kinds (:func:`listing`) and the tests. Adding a stage kind is
one module (its runner) plus one :class:`Kind` entry here, plus its test and its row in
docs/index-designs.md (docs/ARCHITECTURE.md, "Adding a stage kind").

The pipeline looks names up here; ``pgeval run pipeline --stages exact,hnsw,bm25,merge`` runs them
in that order. A stage name may carry a kind explicitly as ``NAME=KIND`` (``hnsw2=hnsw``) so that
one experiment can hold two stages of one kind.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import InputError, param
from ..core.search_types import SearchType, search_type

ROLES = ("exact", "ann", "keyword", "merge", "rerank", "path", "import")


@dataclass(frozen=True)
class Kind:
    """One stage kind.

    - ``role``: what it is in a pipeline (``exact`` search, an ``ann`` index scan, ``keyword``
      search, ``merge``, ``rerank``, another retrieval ``path``, an ``import``ed run);
    - ``index_method``: the access method (``pg_am.amname``) an ANN kind's index has;
    - ``guc_prefixes``: the settings families it applies (``hnsw.``);
    - ``work_settings``: its query-time settings whose value is the work a query does (more is
      slower and finds more), which a sweep varies;
    - ``build_options``: the index options a build sweep may set, with the access method's
      documented default (None: no fixed default), so that an explicit default and an omitted
      option are one configuration;
    - ``extension``: the extension that provides the access method;
    - ``cast_type``: the vector type it searches the column as, both sides cast to it, served
      by an index on that expression (``hnsw-halfvec``: half the index size; ``hnsw-bq``:
      ``binary_quantize(col)::bit(N)`` by Hamming distance, ``bq.candidates`` of them re-ranked
      by the full vector, pgvector's README "Binary Quantization");
    - ``reorders``: settings under which its scan emits rows out of distance order (an iterative
      scan in ``relaxed_order``), and ``always_reorders`` for a scan that always may (DiskANN
      beyond its rescored prefix): then the application's ``LIMIT K`` is the first K rows the
      scan emits, not the K nearest of a deeper fetch;
    - ``min_version``: the least version of ``extension`` that has what the kind searches with
      (``halfvec`` and ``binary_quantize`` came in pgvector 0.7.0);
    - ``iterative_scan``: the setting that lets a filtered scan go on past its first candidates
      (pgvector 0.8's iterative index scans) and the modes it takes, the one that keeps exact
      distance order first (HNSW: ``strict_order``, ``relaxed_order``; IVFFlat has only
      ``relaxed_order``, pgvector's README "Iterative Index Scans"; DiskANN: none), which a
      sweep grouped by tenant tries on the groups that miss the target (``--group-by``) and
      which advise sets where a find needs the index to return every row asked for;
    - ``rerank_candidates``: for a kind searching a quantized copy (``cast_type`` bit), the
      setting that bounds how many of its candidates are re-ranked by the full vector
      (``bq.candidates``, a setting of pgeval's own); None: the kind re-ranks nothing;
    - ``labels``: it searches the group filter as pgvectorscale's labels (``diskann-labels``): a
      scratch copy carries a ``smallint[]`` label column derived from the group column, the index
      is on (vector, labels) and the group is searched with ``labels && ARRAY[$n]::smallint[]``,
      a statement the application does not send yet (table/labels.py); advise measures it by
      default where it measures per group;
    - ``advise_default``: whether advise measures it when no ``--designs`` are given (a new
      kind is not a default design unless it says so);
    - ``find_by_build``: where the work setting that moves recall most depends on the build,
      (build option, {its value: that setting}); the option's default applies when a build
      leaves it out (else the first of ``work_settings``). DiskANN's default SBQ layout re-ranks
      ``query_rescore`` candidates by the full vector, which bounds its recall while the search
      list barely moves it (docs/advise.md); its plain layout has nothing to re-rank;
    - ``caps_rows``: work settings whose value caps the rows a query returns (HNSW's
      ``ef_search`` without an iterative scan, ``bq.candidates``, the inner LIMIT): advise finds
      them from the application's LIMIT up, never recommending fewer rows than it asks for.
    """

    name: str
    runner: str  # "module:Class"
    role: str
    index_method: str | None = None
    guc_prefixes: tuple[str, ...] = ()
    work_settings: tuple[str, ...] = ()
    build_options: dict[str, str | None] = field(default_factory=dict)
    extension: str | None = None
    reorders: dict[str, str] = field(default_factory=dict)
    always_reorders: bool = False
    # the type the kind searches the column as (both sides cast): halfvec for hnsw-halfvec
    cast_type: str | None = None
    iterative_scan: tuple[str, tuple[str, ...]] | None = None
    min_version: str | None = None
    caps_rows: tuple[str, ...] = ()
    find_by_build: tuple[str, dict[str, str]] | None = None
    rerank_candidates: str | None = None
    labels: bool = False
    advise_default: bool = False  # listed explicitly: advise's defaults never grow unasked

    def find_setting(self, build: dict[str, str] | None = None) -> str:
        """The work setting that moves recall most for an index built with ``build``."""
        if self.find_by_build is not None:
            option, by_value = self.find_by_build
            value = (build or {}).get(option) or self.build_options.get(option) or ""
            if value in by_value:
                return by_value[value]
        return self.work_settings[0]

    def may_reorder(self, settings: dict[str, str | None]) -> bool:
        """Whether a scan under ``settings`` (as the server shows them) may emit rows out of
        distance order. A cast kind always may: at half precision many rows tie, and which of
        them ``LIMIT K`` keeps is the order the scan emits them in."""
        return (
            self.always_reorders
            or self.cast_type is not None
            or any(
                (settings.get(name) or "").lower() == value for name, value in self.reorders.items()
            )
        )

    def rows_asked_scan(self) -> dict[str, str]:
        """The setting under which the index returns as many rows as a statement asks (its
        iterative scan, in the mode that keeps the most order: HNSW's ``strict_order``, IVFFlat's
        only one, ``relaxed_order``); {} for a kind without one."""
        if self.iterative_scan is None:
            return {}
        setting, modes = self.iterative_scan
        return {setting: modes[0]}

    @property
    def searched(self) -> SearchType | None:
        """The description of the type it casts to (None: the column's own)."""
        return None if self.cast_type is None else search_type(self.cast_type)

    @property
    def quantized(self) -> bool:
        """Searches a quantized copy, its candidates re-ranked by the full vector."""
        return self.searched is not None and self.searched.quantized

    @property
    def ann(self) -> bool:
        return self.role == "ann"

    @property
    def vector(self) -> bool:
        """Searches the target's vectors by distance (exact search or an ANN index)."""
        return self.role in ("exact", "ann")

    def opclass(self, vector_type: str, distance: str) -> str:
        """The operator class of an index of this kind on ``vector_type`` for ``distance``."""
        return opclass_for(self.cast_type or vector_type, distance)


def opclass_for(searched_type: str, distance: str) -> str:
    """The operator class an index needs to serve a search of ``searched_type`` (vector,
    halfvec, bit) by ``distance`` (cosine, l2, ip): core.search_types's."""
    return search_type(searched_type).opclass(distance)


_VECTOR = "evaluator.stages."
# pgvector's HNSW, whatever type it searches the column as
_HNSW: dict[str, Any] = dict(
    role="ann",
    index_method="hnsw",
    guc_prefixes=("hnsw.",),
    work_settings=("hnsw.ef_search", "hnsw.max_scan_tuples"),
    build_options={"m": "16", "ef_construction": "64"},
    extension="vector",
    reorders={"hnsw.iterative_scan": "relaxed_order"},
    iterative_scan=("hnsw.iterative_scan", ("strict_order", "relaxed_order")),
    caps_rows=("hnsw.ef_search",),
    advise_default=True,
)
# pgvector's IVFFlat, whatever type it searches the column as
_IVFFLAT: dict[str, Any] = dict(
    role="ann",
    index_method="ivfflat",
    guc_prefixes=("ivfflat.",),
    work_settings=("ivfflat.probes", "ivfflat.max_probes"),
    build_options={"lists": "100"},
    extension="vector",
    reorders={"ivfflat.iterative_scan": "relaxed_order"},
    iterative_scan=("ivfflat.iterative_scan", ("relaxed_order",)),
)
# pgvectorscale's StreamingDiskANN, whatever it filters by
_DISKANN: dict[str, Any] = dict(
    role="ann",
    index_method="diskann",
    guc_prefixes=("diskann.",),
    work_settings=("diskann.query_search_list_size", "diskann.query_rescore"),
    build_options={
        "num_neighbors": "50",
        "search_list_size": "100",
        "max_alpha": "1.2",
        "storage_layout": "memory_optimized",
        "num_bits_per_dimension": None,
        "num_dimensions": "0",
    },
    extension="vectorscale",
    always_reorders=True,
    find_by_build=(
        "storage_layout",
        {
            "memory_optimized": "diskann.query_rescore",
            "plain": "diskann.query_search_list_size",
        },
    ),
)
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("exact", _VECTOR + "exact:ExactStage", "exact", extension="vector"),
        Kind("hnsw", _VECTOR + "hnsw:HnswStage", **_HNSW),
        Kind(
            "hnsw-halfvec",
            _VECTOR + "hnsw_halfvec:HnswHalfvecStage",
            **_HNSW,
            cast_type="halfvec",
            min_version="0.7.0",
        ),
        Kind(
            "hnsw-bq",
            _VECTOR + "hnsw_bq:HnswBqStage",
            **{
                **_HNSW,
                "guc_prefixes": ("hnsw.", "bq."),
                "work_settings": ("bq.candidates", "hnsw.ef_search", "hnsw.max_scan_tuples"),
                "caps_rows": ("bq.candidates", "hnsw.ef_search"),
            },
            cast_type="bit",
            min_version="0.7.0",
            rerank_candidates="bq.candidates",
        ),
        Kind("ivfflat", _VECTOR + "ivfflat:IvfflatStage", **_IVFFLAT, advise_default=True),
        Kind(
            "ivfflat-halfvec",
            _VECTOR + "ivfflat_halfvec:IvfflatHalfvecStage",
            **_IVFFLAT,
            cast_type="halfvec",
            min_version="0.7.0",
            # not a default design (advise_default): advise measures it when --designs names it
        ),
        Kind("diskann", _VECTOR + "diskann:DiskannStage", **_DISKANN, advise_default=True),
        Kind(
            "diskann-labels",
            _VECTOR + "diskann_labels:DiskannLabelsStage",
            **_DISKANN,
            labels=True,
            # (label-filtered searches lost recall before 0.7.1: pgvectorscale's changelog)
            min_version="0.7.1",
            # not a default design (advise_default): advise measures it where it groups
        ),
        Kind("import", _VECTOR + "import_stage:ImportStage", "import"),
        Kind("bm25", _VECTOR + "bm25:Bm25Stage", "keyword"),
        Kind("merge", _VECTOR + "merge:MergeStage", "merge"),
        Kind("rerank", _VECTOR + "rerank:RerankStage", "rerank"),
        Kind("service", _VECTOR + "service:ServiceStage", "path"),
        Kind("weknora-vector", _VECTOR + "service:WeknoraVectorStage", "path"),
        Kind("weknora-keyword", _VECTOR + "service:WeknoraKeywordStage", "path"),
        Kind("weknora-hybrid", _VECTOR + "service:WeknoraHybridStage", "path"),
        Kind("weknora-final", _VECTOR + "service:WeknoraFinalStage", "path"),
    )
}
# kind -> runner class, as before
STAGES = {name: k.runner for name, k in KINDS.items()}


def kinds() -> list[str]:
    return list(STAGES)


def kind(name: str) -> Kind | None:
    return KINDS.get(name)


def ann_kinds() -> tuple[str, ...]:
    """The kinds that scan an ANN index (what a sweep measures)."""
    return tuple(k.name for k in KINDS.values() if k.ann)


def advise_kinds(grouped: bool = False) -> tuple[str, ...]:
    """The ANN kinds advise measures when no designs are named (``Kind.advise_default``);
    ``grouped`` (every design measured per group): the label-filtered kinds too."""
    return tuple(
        k.name for k in KINDS.values() if k.ann and (k.advise_default or (grouped and k.labels))
    )


def vector_kinds() -> tuple[str, ...]:
    """Exact search and the ANN kinds (what searches the target's vectors)."""
    return tuple(k.name for k in KINDS.values() if k.vector)


def find_settings() -> tuple[str, ...]:
    """The work settings a find searches, over every ANN kind and build (its first work setting
    and those its build chooses), in registry order."""
    found: list[str] = []
    for k in KINDS.values():
        if k.ann:
            found += [k.work_settings[0], *(k.find_by_build[1].values() if k.find_by_build else ())]
    return tuple(dict.fromkeys(found))


def listing(names: tuple[str, ...] | list[str] | None = None) -> str:
    """Kinds for a help text, from the registry (default: every kind): ``exact, hnsw, ...,
    weknora-vector|keyword|hybrid|final`` (kinds ``P-x`` of a prefix ``P`` that is no kind
    themselves, written once as ``P-x|y``)."""
    groups: dict[str, list[str]] = {}
    for name in names if names is not None else list(KINDS):
        prefix, dash, rest = name.partition("-")
        key = prefix if dash and prefix not in KINDS else name
        groups.setdefault(key, []).append(rest if key != name else name)
    return ", ".join(
        f"{key}-{'|'.join(items)}" if items != [key] else key for key, items in groups.items()
    )


def index_methods() -> tuple[str, ...]:
    """The access methods of ANN indexes, one per method, in registry order."""
    return tuple(dict.fromkeys(k.index_method for k in KINDS.values() if k.index_method))


def by_method(method: str) -> Kind | None:
    """The first ANN kind served by access method ``method``."""
    return next((k for k in KINDS.values() if k.index_method == method), None)


def build_defaults(method: str) -> dict[str, str]:
    """The documented defaults of ``method``'s index options (those that have one)."""
    k = by_method(method)
    return {} if k is None else {o: v for o, v in k.build_options.items() if v is not None}


def get(kind: str) -> Any:  # the registered runner class's instance (a Stage)
    """A new instance of the runner for ``kind``; InputError naming --stages when unknown."""
    target = STAGES.get(kind)
    if target is None:
        raise InputError(
            f"unknown stage '{kind}' (known: {', '.join(STAGES)})", field=param("stages")
        )
    module, attr = target.split(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(
            f"stage '{kind}' is not available in this build ({exc})", field=param("stages")
        ) from None
    return cls()


def parse_stages(spec: str) -> list[tuple[str, str]]:
    """'exact,hnsw,fast=hnsw' -> [("exact","exact"), ("hnsw","hnsw"), ("fast","hnsw")]."""
    out: list[tuple[str, str]] = []
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, _, kind = item.partition("=")
        name, kind = name.strip(), (kind.strip() or name.strip())
        if kind not in STAGES:
            raise InputError(
                f"unknown stage '{kind}' (known: {', '.join(STAGES)})", field=param("stages")
            )
        if not name.replace("_", "").replace("-", "").isalnum():
            raise InputError(
                f"stage name '{name}' must be letters, digits, '-' or '_'", field=param("stages")
            )
        if any(n == name for n, _ in out):
            raise InputError(
                f"stage '{name}' is listed twice (name the second one, e.g. {name}2={kind})",
                field=param("stages"),
            )
        out.append((name, kind))
    if not out:
        raise InputError("no stages given", field=param("stages"))
    return out
