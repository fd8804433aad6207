"""`pgeval compare RUN1 RUN2 RUN3 ...`: more than two runs, every pair of them.

Each pair is compared as :func:`evaluator.reporting.compare.compare` compares two (the earlier
run on the command line is the pair's baseline), then Holm's step-down correction
(:func:`evaluator.measure.stats.holm`) is applied across every pair and measure that has a
p-value: a difference is significant when its adjusted p-value is below alpha, which keeps the
chance of any false "significant" among all of them at alpha (six configurations are fifteen
pairs: uncorrected, about one in two such comparisons shows a "significant" pair by chance).

A run chosen in-sample (``run.params["tuned"]`` true, as `pgeval tune` stores its pick: chosen
on these very queries) is noted in each pair it is in: its lead is optimistic, its held-out gain
is the figure to read."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError
from ..measure import stats
from . import label
from .compare import ALPHA, check_same_testset, compare, reading_hints

if TYPE_CHECKING:
    from ..core.db import Database

CORRECTION = "holm"
TUNED = "tuned"  # run.params key: the run was picked in-sample (pgeval tune)


@dataclass
class MultiComparison:
    runs: list[str]
    testset: str | None
    alpha: float
    permutations: int
    seed: int
    test: str
    correction: str
    tests: int  # p-values in the family Holm's correction runs over
    pairs: list[dict]
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def in_sample(report: dict) -> bool:
    """Whether the report's run was picked in-sample (``run.params["tuned"]``)."""
    return bool(((report.get("run") or {}).get("params") or {}).get(TUNED))


def _pair(base: dict, cand: dict, kwargs: dict) -> dict:
    c = compare(base, cand, top=0, **kwargs)
    picked = [label(r) for r in (base, cand) if in_sample(r)]
    notes = [
        f"'{name}' was picked in-sample (tuned on these queries): its lead in this pair is "
        "optimistic; read its held-out gain (`pgeval tune`)"
        for name in picked
    ]
    return {
        "baseline": c.baseline,
        "candidate": c.candidate,
        "in_sample": picked,
        "rows": c.rows,
        "latency": c.latency,
        "hints": [],
        "changes": c.changes,
        "notes": notes,
        "warnings": c.warnings,
    }


def compare_many(sides: list[dict], *, alpha: float = ALPHA, **kwargs: Any) -> MultiComparison:
    """Every pair of ``sides`` (report documents, as :func:`compare` takes two), Holm-corrected
    across pairs and measures; ``kwargs``: :func:`compare`'s ``permutations``, ``seed``,
    ``test``."""
    if len(sides) < 2:
        raise InputError("compare needs at least two runs")
    names = [label(s) for s in sides]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"'{twice[0]}' is named twice among the runs to compare")
    testset = None
    for other in sides[1:]:
        testset = check_same_testset(sides[0], other)
    pairs = [_pair(a, b, {"alpha": alpha, **kwargs}) for a, b in combinations(sides, 2)]
    tested = [r for p in pairs for r in p["rows"] if r["p_value"] is not None]
    for row, adjusted in zip(tested, stats.holm([r["p_value"] for r in tested])):
        row["p_holm"] = adjusted
        row["significant"] = adjusted < alpha
    for p in pairs:
        corrected = [{**r, "p_value": r.get("p_holm")} for r in p["rows"]]
        p["hints"] = reading_hints(corrected, p["latency"], alpha)
    warnings = list(dict.fromkeys(w for p in pairs for w in (*p["notes"], *p.pop("warnings"))))
    return MultiComparison(
        runs=names,
        testset=testset,
        alpha=alpha,
        permutations=kwargs.get("permutations", stats.PERMUTATIONS),
        seed=kwargs.get("seed", stats.SEED),
        test=kwargs.get("test", stats.RANDOMISATION),
        correction=CORRECTION,
        tests=len(tested),
        pairs=pairs,
        warnings=warnings,
    )


def compare_many_specs(
    database: Database,
    specs: list[str],
    *,
    measures: list[str] | None = None,
    rel: int = 1,
    allow_partial: bool = False,
    **kwargs: Any,
) -> MultiComparison:
    """:func:`compare_many` of runs, experiments or saved JSON reports named as on the command
    line (the ones in the database read in one snapshot)."""
    from ..measure.metrics import measures_for
    from . import obtain_all

    sides = obtain_all(
        database, specs, measures=measures or measures_for(), rel=rel, allow_partial=allow_partial
    )
    return compare_many(sides, **kwargs)
