"""advise's rules, each one function over a design's outcome (:mod:`.outcome`, or any row
that reads as one): the budgets and what a design is over, a sample's figures carried to the
table, the tie rule of the recommendation, and when a challenger beats the anchor. The flow
(:mod:`.screen`, :mod:`.prune`, :mod:`.recommend`) asks them; a new rule goes here
(docs/ARCHITECTURE.md, "A new advise rule")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..options import Budgets
from ..sweep.scan_modes import ModeResult, cheapest, mode_of

Row = Mapping[str, Any]  # a design's outcome, as its row reads
MB = 1048576.0
# budget option -> (the design's figure, its unit in the figure, the figure in the budget's unit)
BUDGETS: dict[str, tuple[str, str, Callable[[Row], float]]] = {
    "--max-p95-ms": ("p95_ms", "ms", lambda r: r["p95_ms"]),
    "--max-index-mb": ("index_bytes", "MB", lambda r: r["index_bytes"] / MB),
    "--max-build-s": ("build_ms", "s", lambda r: r["build_ms"] / 1000.0),
}
# an index build grows faster than its rows, the more so as the graph outgrows the caches: on
# the 2-core machine the benchmarks ran on, HNSW 2.0 s at 10,000 x 384 and 56.7 s at 160,000
# (16x the rows for 28x the time: exponent 1.21); hnsw-halfvec, serial (pgvector 0.8.1's
# advisory), 43.4 s at 100,000 x 384 and 1,120 s at 1,000,000 (exponent 1.41, bench/
# advise_scale.py). The exponent the full build's time is estimated with from the sample's (the
# progress line, --max-build-s, --max-confirm-s): the larger, so that an estimate errs long
BUILD_GROWTH = 1.4


def build_text(row: Row) -> str:
    """``m=16,ef_construction=64``: a design's build options."""
    return ",".join(f"{k}={v}" for k, v in row["build"].items())


def named(row: Row) -> str:
    """``hnsw (m=16) at hnsw.ef_search=40``: the design, its build and its setting."""
    setting = ", ".join(f"{k}={v}" for k, v in row["setting"].items())
    return f"{row['design']} ({build_text(row)}) at {setting}"


def budgets(cfg: Budgets) -> dict[str, float]:
    """The budgets given: option -> bound."""
    given = {
        "--max-p95-ms": cfg.max_p95_ms,
        "--max-index-mb": cfg.max_index_mb,
        "--max-build-s": cfg.max_build_s,
    }
    return {k: v for k, v in given.items() if v is not None}


def over_budget(row: Row, given: dict[str, float]) -> dict[str, float]:
    """The budgets a design measured at the table's size is over: option -> its figure."""
    return {
        opt: round(figure(row), 6)
        for opt, (key, _, figure) in BUDGETS.items()
        if opt in given and row[key] is not None and figure(row) > given[opt]
    }


def scaled(row: Row, key: str, scale: float) -> float | None:
    """A sample figure carried to the table's rows: size in proportion, build time at
    :data:`BUILD_GROWTH`; other figures are not carried."""
    value = row.get(key)
    if value is None:
        return None
    if key == "index_bytes":
        return float(value) * scale
    if key == "build_ms":
        return float(value) * scale**BUILD_GROWTH
    return float(value)


def estimated_build_s(row: Row, rows: int, sample_rows: int) -> float | None:
    """A screened row's build time carried to the table's ``rows`` (seconds; None: not known)."""
    build_ms = scaled(row, "build_ms", rows / max(sample_rows, 1))
    return None if build_ms is None else build_ms / 1000.0


def over_budgets(row: Row, given: dict[str, float], scale: float) -> list[str]:
    """The budget options a row is over, its size and build time carried to the table."""
    out = []
    for opt, (key, _, figure) in BUDGETS.items():
        if opt not in given or row.get(key) is None:
            continue
        carried = {**row, key: scaled(row, key, scale)}
        if figure(carried) > given[opt]:
            out.append(opt)
    return out


def pick(
    ok: Sequence[Row], owned: Sequence[Row] = (), target: float | None = None
) -> tuple[Any, bool]:
    """The tie rule: the lowest p95; among those within its noise (the fastest's p95 spread
    over repetitions, or p95 intervals that overlap), the least work: an index the table has
    (nothing to build), then the smallest index. Where the table has one of the designs
    (``owned``: measured in place, or its build), another replaces it only when it
    :func:`replaces` it. Returns (chosen, whether the tie rule chose it)."""
    fastest = min(ok, key=lambda r: (r["p95_ms"], r["index_bytes"] or 0))
    spread = fastest["p95_sd"] or 0.0
    tied = [
        r
        for r in ok
        if r["p95_ms"] - fastest["p95_ms"] <= max(spread, r["p95_sd"] or 0.0)
        or _overlap(fastest, r)
    ]
    chosen = min(tied, key=lambda r: (not r.get("in_place"), r["index_bytes"] or 0, r["p95_ms"]))
    if owned and not any(chosen is r for r in owned):
        anchor = min(owned, key=lambda r: (r["p95_ms"], r["index_bytes"] or 0))
        if not replaces(chosen, anchor, target):
            return anchor, True
    return chosen, chosen is not fastest


def replaces(challenger: Row, anchor: Row, target: float | None) -> bool:
    """Whether a design worth a build replaces an index the table has (issue 50: a smaller
    index within the noise is no reason): its p95 :func:`beats` the index's beyond their noise
    and its recall's 95 % interval lies above the target (``recall_margin``, where known)."""
    margin = challenger.get("recall_margin")
    sure = target is None or margin is None or challenger["recall"] - margin >= target
    return beats(challenger, anchor) and sure


def _overlap(a: Row, b: Row) -> bool:
    """Whether two designs' p95 intervals overlap: which is faster is within the noise."""
    ends = [a.get("p95_low"), b.get("p95_low"), a.get("p95_high"), b.get("p95_high")]
    if any(e is None for e in ends):
        return False
    low_a, low_b, high_a, high_b = (float(e) for e in ends)  # type: ignore[arg-type]
    return max(low_a, low_b) <= min(high_a, high_b)


def p95_range(row: Row) -> tuple[float, float]:
    """(low, high) of a row's p95: its 95 % interval, else the spread over rounds, else itself."""
    p95 = float(row["p95_ms"])
    low, high = row.get("p95_low"), row.get("p95_high")
    sd = float(row.get("p95_sd") or 0.0)
    if low is not None and high is not None:
        return min(float(low), p95 - sd), max(float(high), p95 + sd)
    return p95 - sd, p95 + sd


def beats(challenger: Row, anchor: Row) -> bool:
    """Whether ``challenger``'s p95 is below ``anchor``'s beyond their noise."""
    return p95_range(challenger)[1] < p95_range(anchor)[0]


def at_ceiling(row: Row, setting: str, ceilings: dict[str, float]) -> bool:
    """Whether a find's setting is at the server's maximum (it cannot go higher)."""
    value = (row.get("setting") or {}).get(setting)
    return setting in ceilings and value is not None and float(value) >= ceilings[setting]


def index_of(row: Row) -> tuple[Any, ...]:
    """What a row measured, but for its scan mode: its design, build and index in place."""
    return (
        row["design"],
        tuple(sorted(row["build"].items())),
        (row.get("in_place") or {}).get("name"),
    )


def mode_result(row: Row) -> ModeResult:
    """A design's row as one scan mode's answer: its work setting (the first of its setting,
    as :class:`.outcome.Measurement` holds it), the rest its mode's settings."""
    find, *rest = list(row["setting"])
    value = row["setting"][find]
    worst = row.get("worst_group") or {}
    return ModeResult(
        mode=mode_of(row["setting"]),
        settings={k: str(row["setting"][k]) for k in rest},
        find=find,
        value=None if value is None else int(value),
        reached=bool(row["reached"]),
        p95_ms=row.get("p95_ms"),
        worst_group=worst.get("group"),
        worst_recall=worst.get("recall", row.get("recall")),
    )


def least_work(ok: Sequence[Row]) -> list[Row]:
    """One index measured in several scan modes (the index in place, its iterative scans)
    stays a candidate once, in the mode of least work reaching the target
    (:func:`evaluator.tuning.sweep.scan_modes.cheapest`: the least work setting, at equal work
    the earlier mode); the choice among designs (:func:`pick`) is by p95, the choice among one index's
    modes by work."""
    by_index: dict[tuple[Any, ...], list[Row]] = {}
    for r in ok:
        by_index.setdefault(index_of(r), []).append(r)
    chosen: dict[tuple[Any, ...], Row] = {}
    for key, same in by_index.items():
        results = [mode_result(s) for s in same]
        best = cheapest(results)
        if len(same) > 1 and best is not None:
            chosen[key] = same[results.index(best)]
    return [r for r in ok if chosen.get(index_of(r), r) is r]
