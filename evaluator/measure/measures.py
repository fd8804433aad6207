"""The measure registry: every measure pgeval knows, as objects, and the one parser of a measure's
name. Read by ``metrics`` (the default list, the cut-off options), ``stage_report`` (the stage
measures), the CLI (``--measure``), ``reporting.compare`` (which measures are retrieval ones, the
largest cut-off), ``reporting.json`` (the cut-offs) and ``reporting.gate`` (the rules file).

The SQL API holds the same lists: ``pgeval.measure_families()``, ``pgeval.ranked_measures()``,
``pgeval.default_measures()`` and ``pgeval.max_cutoff()`` in sql/010_measures.sql;
tests/test_measures_registry.py keeps them equal. A family is computed by the SQL function it
names (``Family.sql``); Python never computes one.

- ranked measures, computed in SQL per query (sql/020_metrics.sql) from a run's ranked lists:
  with a cut-off, spelled ``name@K`` with 1 <= K <= :data:`MAX_K` (recall, mrr, ndcg, precision,
  hit, map, judged: the share of the first K that carries a judgement, grade 0 included), or
  without one, spelled ``name`` (``rprec``: R-precision, the cut-off is the query's
  number of relevant chunks; ``map``: average precision over the whole list). ``map`` is spelled
  both ways (``optional_cutoff``);
- answer measures (``citation_precision``, ``answer_accuracy``): sql/300_answers.sql;
- latency percentiles (``latency_p95_ms``, ``answer_latency_p99_9_ms``): from stored timings;
- index recall (``index_recall@K``, stage-report only): sql/100_index_recall.sql.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import InputError, param

MAX_K = 100_000


@dataclass(frozen=True)
class Family:
    """A kind of measure: how it is spelled and where SQL computes it."""

    name: str
    kind: str  # "ranked" | "answer" | "latency" | "index"
    needs_cutoff: bool
    sql: str  # the SQL function whose rows carry its values
    higher_is_better: bool = True
    optional_cutoff: bool = False  # spelled name@K and name alone (map)
    quality: bool = True  # False: says how a figure was measured, not how good a list is (judged)

    @property
    def takes_cutoff(self) -> bool:
        """Spelled ``name@K`` (always, or as one of its two spellings)."""
        return self.needs_cutoff or self.optional_cutoff


FAMILIES = (
    Family("recall", "ranked", True, "pgeval.summary"),
    Family("mrr", "ranked", True, "pgeval.summary"),
    Family("ndcg", "ranked", True, "pgeval.summary"),
    Family("precision", "ranked", True, "pgeval.summary"),
    Family("hit", "ranked", True, "pgeval.summary"),
    Family("map", "ranked", False, "pgeval.summary", optional_cutoff=True),
    Family("rprec", "ranked", False, "pgeval.summary"),
    Family("judged", "ranked", True, "pgeval.summary", quality=False),
    Family("citation_precision", "answer", False, "pgeval.answer_summary"),
    Family("answer_accuracy", "answer", False, "pgeval.answer_summary"),
    Family("latency", "latency", False, "pgeval.run_latency", higher_is_better=False),
    Family("answer_latency", "latency", False, "pgeval.run_latency", higher_is_better=False),
    Family("index_recall", "index", True, "pgeval.index_recall_summary"),
)
_BY_NAME = {f.name: f for f in FAMILIES}

# the ranked families SQL computes (pgeval.measure_families()), with and without a cut-off (map
# is in both)
RANKED = tuple(f.name for f in FAMILIES if f.kind == "ranked" and f.takes_cutoff)
UNCUT = tuple(f.name for f in FAMILIES if f.kind == "ranked" and not f.needs_cutoff)
ANSWER = tuple(f.name for f in FAMILIES if f.kind == "answer")


@dataclass(frozen=True)
class Measure:
    """One measure as named in a report, a rules file or an option: ``ndcg@10``, ``rprec``."""

    name: str
    family: Family
    cutoff: int | None = None

    @property
    def kind(self) -> str:
        return self.family.kind

    @property
    def higher_is_better(self) -> bool:
        return self.family.higher_is_better


class UnknownMeasure(ValueError):
    """A name that is no measure; the message says why, for the caller to place."""


# how a measure with a cut-off is spelled, name@K: the one rule, which SQL's
# pgeval.measure_name_pattern() returns too (tests/test_measures_registry.py); underscores are in
# it because index_recall@K has one
NAME_PATTERN = "^([a-z_]+)@([1-9][0-9]{0,5})$"
_CUT = re.compile(NAME_PATTERN)
_LATENCY = re.compile(r"^((?:answer_)?latency)_p[0-9]{1,2}(?:_[0-9]+)?_ms$")


def parse(name: str) -> Measure:
    """``'ndcg@10'`` -> Measure(ndcg, cutoff 10); ``'rprec'`` -> Measure(rprec, no cut-off).
    Raises :class:`UnknownMeasure` for anything else (the one parser of measure names)."""
    m = _CUT.match(name)
    if m is not None:
        family = _BY_NAME.get(m.group(1))
        if family is not None and not family.takes_cutoff and family.kind != "latency":
            raise UnknownMeasure(f"{family.name} takes no cut-off: write '{family.name}'")
        if family is not None and family.takes_cutoff and int(m.group(2)) <= MAX_K:
            return Measure(name, family, int(m.group(2)))
    else:
        lat = _LATENCY.match(name)
        family = _BY_NAME.get(lat.group(1) if lat else name)
        if family is not None and family.needs_cutoff:
            raise UnknownMeasure(f"{family.name} needs a cut-off: write '{family.name}@K'")
        if family is not None and (lat is not None or family.kind != "latency"):
            return Measure(name, family)
    raise UnknownMeasure(f"unknown measure '{name}' ({spelled()})")


def find(name: str) -> Measure | None:
    """:func:`parse`, or None for a name that is no measure (keys of a saved report)."""
    try:
        return parse(name)
    except UnknownMeasure:
        return None


def is_known(measure: str) -> bool:
    """A measure a report or a gate can name: ranked, answer or latency."""
    found = find(measure)
    return found is not None and found.kind != "index"


def spelled() -> str:
    """How the known measures are written, for error messages."""
    return ", ".join(
        [f"{name}@K" for name in RANKED]
        + list(UNCUT)
        + list(ANSWER)
        + ["latency_p95_ms", "answer_latency_p95_ms"]
    )


def ranked(names: str | list[str], option: str = "measures") -> list[str]:
    """The ranked measures named in ``names`` (a comma-separated string or a list), each checked
    by :func:`parse`; an :class:`InputError` naming ``option`` for any other name."""
    items = names.split(",") if isinstance(names, str) else names
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        try:
            measure = parse(item)
        except UnknownMeasure as exc:
            raise InputError(str(exc), field=param(option)) from None
        if measure.kind != "ranked":
            raise InputError(
                f"'{item}' is not computed from a ranked list (ranked measures: "
                f"{', '.join([f'{n}@K' for n in RANKED] + list(UNCUT))})",
                field=param(option),
            )
        out.append(item)
    return out


# ---- the default lists -----------------------------------------------------------------------
DEFAULT_RECALL_K = (3, 5, 10)  # also Precision@K and Hit@K (`--k`)
DEFAULT_NDCG_K = (5, 10)
DEFAULT_MRR_K = (20,)


def measures_for(
    k: list[int] | None = None, ndcg_k: list[int] | None = None, mrr_k: list[int] | None = None
) -> list[str]:
    """The measure list: Recall@K for each K, MRR@K, nDCG@K, then Precision@K and Hit@K."""
    k = list(k or DEFAULT_RECALL_K)
    ndcg_k = list(ndcg_k or DEFAULT_NDCG_K)
    mrr_k = list(mrr_k or DEFAULT_MRR_K)
    for option, values in ((param("k"), k), (param("ndcg_k"), ndcg_k), (param("mrr_k"), mrr_k)):
        for value in values:
            if not 1 <= value <= MAX_K:
                raise InputError(
                    f"cut-off K must be between 1 and {MAX_K:,}, got {value}", field=option
                )
    return (
        [f"recall@{x}" for x in k]
        + [f"mrr@{x}" for x in mrr_k]
        + [f"ndcg@{x}" for x in ndcg_k]
        + [f"precision@{x}" for x in k]
        + [f"hit@{x}" for x in k]
    )


# `pgeval metrics` and the SQL API's defaults (pgeval.default_measures())
DEFAULT_MEASURES = tuple(measures_for())
# the headline families: the judged measures `pgeval stage-report` shows per stage (their
# defaults) and the reports' headline figures and charts
HEADLINE_FAMILIES = ("recall", "mrr", "ndcg")
STAGE_MEASURES = tuple(m for m in DEFAULT_MEASURES if parse(m).family.name in HEADLINE_FAMILIES)


def stage_measures(k: int) -> list[str]:
    """The stage report's measures at the report's cut-off K: Recall@K first when it is not
    among :data:`STAGE_MEASURES`."""
    out = list(STAGE_MEASURES)
    if f"recall@{k}" not in out:
        out.insert(0, f"recall@{k}")
    return out


# judged@K under this: most of the first K carry no judgement and count as not relevant, so the
# other measures are lower bounds (the warning of `metrics`, `stage-report` and the reports)
JUDGED_FLOOR = 0.5


def judged_at(names: list[str] | tuple[str, ...]) -> str:
    """The judged@K that goes with ``names``: K their largest recall cut-off (10 without one)."""
    ks = [m.cutoff for m in map(parse, names) if m.family.name == "recall" and m.cutoff]
    return f"judged@{max(ks, default=10)}"


def with_judged(names: list[str]) -> list[str]:
    """``names`` and, unless one is there already, :func:`judged_at`: every figure is shown with
    how much of its lists was judged."""
    if any(parse(n).family.name == "judged" for n in names):
        return list(names)
    return [*names, judged_at(names)]


def judged_warning(measure: str, value: float | None, judged_only: bool = False) -> str | None:
    """The warning of a judged@K under :data:`JUDGED_FLOOR` (None at or above it, or when the
    lists were measured on their judged chunks only)."""
    if value is None or value >= JUDGED_FLOOR or judged_only:
        return None
    k = parse(measure).cutoff
    return (
        f"{measure} is {value:.2f} (< {JUDGED_FLOOR}): most of the first {k} chunks carry no "
        "judgement and count as not relevant, so the figures are lower bounds "
        "(--judged-only measures the judged chunks alone, as trec_eval -J)"
    )


def cutoffs(names: list[str]) -> dict[str, list[int]]:
    """family -> the cut-offs asked for, in order, of the measures with one."""
    out: dict[str, list[int]] = {}
    for name in names:
        measure = parse(name)
        if measure.cutoff is not None:
            out.setdefault(measure.family.name, []).append(measure.cutoff)
    return out
