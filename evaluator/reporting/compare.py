"""`pgeval compare BASELINE CANDIDATE`: per metric the two means (as SQL computed them), the delta,
a paired two-sided randomisation test (or, with ``test="t-test"``, a paired t-test) and a
bootstrap 95 % CI over the per-query values, per-query
wins/ties/losses, the queries that moved most, METRICS.md's reading hints applied to the observed
pattern, and what differs between the two configurations.

Both sides are JSON report documents (:func:`evaluator.reporting.obtain`: a run, an experiment or a
saved report), so a comparison never recomputes a metric: it pairs the per-query values the SQL
functions produced and does inference over them (:mod:`evaluator.measure.stats`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, param
from ..measure import stats
from ..measure.measures import find
from . import label

if TYPE_CHECKING:
    from ..core.db import Database

ALPHA = 0.05
TIE = 1e-12
LATENCY_KEYS = ("latency_p95_ms", "answer_latency_p95_ms")


@dataclass
class Comparison:
    baseline: str
    candidate: str
    testset: str | None
    alpha: float
    permutations: int
    seed: int
    rows: list[dict]
    test: str
    latency: list[dict]
    moved_by: str | None
    moved: list[dict]
    hints: list[str]
    changes: list[dict]
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def check_same_testset(base: dict, cand: dict) -> str | None:
    """Refuse two sides over different test sets (or relevance thresholds); return the name."""
    rb, rc = base.get("run") or {}, cand.get("run") or {}
    hb, hc = rb.get("testset_hash"), rc.get("testset_hash")
    if hb and hc and hb != hc:
        raise InputError(
            f"'{label(base)}' and '{label(cand)}' were evaluated on different test "
            f"sets ('{rb.get('testset')}' {hb[:12]} vs '{rc.get('testset')}' "
            f"{hc[:12]}): their numbers cannot be compared"
        )
    if not (hb and hc) and rb.get("testset") != rc.get("testset"):
        raise InputError(
            f"'{label(base)}' and '{label(cand)}' name different test sets "
            f"('{rb.get('testset')}' vs '{rc.get('testset')}')"
        )
    if base.get("rel", 1) != cand.get("rel", 1):
        raise InputError(
            f"'{label(base)}' counts grade >= {base.get('rel', 1)} as relevant, "
            f"'{label(cand)}' grade >= {cand.get('rel', 1)}: compare like with like"
        )
    return rb.get("testset") or rc.get("testset")


def per_query(report: dict, metric: str) -> dict[str, float]:
    """query_id -> value of ``metric`` from a report's cases (values the SQL produced)."""
    out = {}
    for case in report.get("cases") or []:
        value = (case.get("metrics") or {}).get(metric)
        if value is not None:
            out[str(case["query_id"])] = float(value)
    return out


def paired_values(
    base: dict, cand: dict, metric: str
) -> tuple[list[str], list[float], list[float]]:
    a, b = per_query(base, metric), per_query(cand, metric)
    ids = sorted(set(a) & set(b))
    return ids, [a[q] for q in ids], [b[q] for q in ids]


def quality_metrics(base: dict, cand: dict) -> list[str]:
    """Metrics both may carry, in report order: retrieval measures, then end-to-end ones."""
    names = list(dict.fromkeys([*(base.get("measures") or []), *(cand.get("measures") or [])]))
    for key in (*base.get("summary", {}), *cand.get("summary", {})):
        if "latency" not in key and key not in names:
            names.append(key)
    return names


def direction(row: dict | None, alpha: float) -> str | None:
    """'up', 'down' or 'same' (not significant at alpha); None when the metric is missing."""
    if row is None or row.get("p_value") is None or row.get("delta") is None:
        return None
    if row["p_value"] < alpha and row["delta"] > 0:
        return "up"
    if row["p_value"] < alpha and row["delta"] < 0:
        return "down"
    return "same"


def _first(rows: dict, family: str, largest: bool = True) -> dict | None:
    """The row of ``family``'s measure at the largest (or smallest) cut-off."""
    found = [m for m in map(find, rows) if m is not None and m.family.name == family]
    if not found:
        return None
    cutoff = [m.cutoff or 0 for m in found]
    return rows[found[cutoff.index(max(cutoff) if largest else min(cutoff))].name]


def reading_hints(rows: list[dict], latency: list[dict], alpha: float) -> list[str]:
    """METRICS.md "Reading a change between two runs", applied to what was observed (judged@K,
    which says how much was judged, not how good a list is, is no part of a reading)."""
    rows = [r for r in rows if (m := find(r["metric"])) is None or m.family.quality]
    by = {r["metric"]: r for r in rows}
    recall, mrr = direction(_first(by, "recall"), alpha), direction(_first(by, "mrr"), alpha)
    retrieval = [
        direction(r, alpha)
        for m, r in by.items()
        if (measure := find(m)) is not None and measure.kind == "ranked"
    ]
    answer = direction(by.get("answer_accuracy"), alpha)
    citation = direction(by.get("citation_precision"), alpha)
    hints = []
    if recall == "down" and mrr == "down":
        hints.append("recall ↓ and MRR ↓ → look at parsing, chunking, embedding or the ANN index")
    if recall == "same" and mrr == "down":
        hints.append("recall = and MRR ↓ → fusion or rerank regressed")
    if retrieval and all(d == "same" for d in retrieval) and answer == "down":
        hints.append("retrieval = and answer accuracy ↓ → prompt, model or context assembly")
    if answer == "same" and citation == "down":
        hints.append(
            "answer accuracy = and citation precision ↓ → citation protocol or its validation"
        )
    dirs = [direction(r, alpha) for r in rows]
    if "up" in dirs and "down" not in dirs:
        for lat in latency:
            if lat.get("ratio") is not None and lat["ratio"] >= 2:
                hints.append(
                    f"quality ↑ but {lat['metric']} ×{lat['ratio']:.1f} → a product "
                    "decision, never automatic"
                )
    if not hints and all(d in ("same", None) for d in dirs):
        hints.append(
            f"no metric changed significantly (p >= {alpha}): the difference is within "
            "the noise of this test set"
        )
    if not hints:
        ups = [r["metric"] for r in rows if direction(r, alpha) == "up"]
        downs = [r["metric"] for r in rows if direction(r, alpha) == "down"]
        if ups and not downs:
            hints.append(
                f"quality ↑ ({', '.join(ups)} significantly better, nothing worse): no "
                "regression to explain"
            )
        else:
            hints.append(
                f"mixed change (↑ {', '.join(ups) or 'none'}; ↓ {', '.join(downs)}): "
                "none of METRICS.md's reading patterns applies; start from the queries "
                "that moved most"
            )
    return hints


def config_changes(base: dict, cand: dict) -> tuple[list[dict], list[str]]:
    """What differs between the two configurations, and the warnings it calls for.

    Both sides fingerprinted: the fingerprint diff of :mod:`evaluator.table.config_diff` (keys grouped
    into variables, the ``info`` part ignored). Otherwise the runs' stage and parameters, each
    differing key counted as one variable."""
    from ..table.config_diff import compare as diff_fingerprints
    from ..table.config_diff import flatten

    fb, fc = base.get("fingerprint"), cand.get("fingerprint")
    if isinstance(fb, dict) and isinstance(fc, dict):
        d = diff_fingerprints(
            fb, fc, label(base), label(cand), base.get("config_hash"), cand.get("config_hash")
        )
        diffs = [
            {"key": r["key"], "baseline": r["a"], "candidate": r["b"], "variable": r["variable"]}
            for r in d.rows()
        ]
        return diffs, d.warnings()
    rb, rc = base.get("run") or {}, cand.get("run") or {}
    a = flatten({"stage": rb.get("stage"), "params": rb.get("params") or {}})
    b = flatten({"stage": rc.get("stage"), "params": rc.get("params") or {}})
    rows: list[dict[str, Any]] = [
        {"key": k, "baseline": a.get(k), "candidate": b.get(k), "variable": k}
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]
    warnings = [
        "no configuration fingerprint on "
        + (" and ".join(n for n, f in ((label(base), fb), (label(cand), fc)) if not f))
        + ": comparing run parameters only"
    ]
    if len(rows) > 1:
        warnings.append(
            f"{len(rows)} variables differ ({', '.join(r['key'] for r in rows)}): "
            "a change in the numbers cannot be attributed to one of them"
        )
    return rows, warnings


def compare(
    base: dict,
    cand: dict,
    *,
    alpha: float = ALPHA,
    permutations: int = stats.PERMUTATIONS,
    seed: int = stats.SEED,
    top: int = 10,
    moved_by: str | None = None,
    test: str = stats.RANDOMISATION,
) -> Comparison:
    if test not in stats.TESTS:
        raise InputError(f"unknown test '{test}' ({' or '.join(stats.TESTS)})", field=param("test"))
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be between 0 and 1, got {alpha}", field=param("alpha"))
    if permutations < 100:
        raise InputError("use at least 100 permutations", field=param("permutations"))
    testset = check_same_testset(base, cand)
    warnings: list[str] = []
    sb, sc = base.get("summary") or {}, cand.get("summary") or {}
    rows = []
    for metric in quality_metrics(base, cand):
        b, c = sb.get(metric), sc.get(metric)
        if b is None and c is None:
            continue
        delta = None if b is None or c is None else c - b
        test_row = _paired_test(base, cand, metric, alpha, permutations, seed, test)
        rows.append({"metric": metric, "baseline": b, "candidate": c, "delta": delta, **test_row})
        if not test_row["n"] and delta is not None:
            warnings.append(
                f"{metric}: no per-query values on both sides, so no significance "
                "test (save reports with their cases)"
            )
    latency = []
    for key in LATENCY_KEYS:
        la, lb = sb.get(key), sc.get(key)
        if la is None and lb is None:
            continue
        latency.append(
            {
                "metric": key,
                "baseline": la,
                "candidate": lb,
                "delta": None if la is None or lb is None else lb - la,
                "ratio": lb / la if la and lb is not None else None,
            }
        )
    moved_by = moved_by or next(
        (m for m in ("ndcg@10",) if any(r["metric"] == m for r in rows)),
        rows[0]["metric"] if rows else None,
    )
    moved = _moved(base, cand, moved_by, top) if moved_by and top else []
    changes, change_warnings = config_changes(base, cand)
    warnings.extend(change_warnings)
    return Comparison(
        baseline=label(base),
        candidate=label(cand),
        testset=testset,
        alpha=alpha,
        permutations=permutations,
        seed=seed,
        rows=rows,
        test=test,
        latency=latency,
        moved_by=moved_by,
        moved=moved,
        hints=reading_hints(rows, latency, alpha),
        changes=changes,
        warnings=warnings,
    )


def _paired_test(
    base: dict, cand: dict, metric: str, alpha: float, permutations: int, seed: int, test: str
) -> dict[str, Any]:
    """The paired test of ``metric`` over the queries both sides measured: the interval of the
    mean difference, the p-value, and the queries won, tied and lost (n 0 and None without a
    query in common)."""
    ids, a, b = paired_values(base, cand, metric)
    if not ids:
        keys = ("ci_low", "ci_high", "p_value", "significant", "n", "wins", "ties", "losses")
        return {**dict.fromkeys(keys), "n": 0}
    res = stats.paired(a, b, permutations, permutations, seed, test)
    diffs = [y - x for x, y in zip(a, b)]
    wins, losses = sum(d > TIE for d in diffs), sum(d < -TIE for d in diffs)
    return {
        "ci_low": res.ci_low,
        "ci_high": res.ci_high,
        "p_value": res.p_value,
        "significant": res.p_value < alpha,
        "n": res.n,
        "wins": wins,
        "ties": res.n - wins - losses,
        "losses": losses,
    }


def _moved(base: dict, cand: dict, metric: str, top: int) -> list[dict]:
    if not any(r for r in (per_query(base, metric), per_query(cand, metric))):
        raise InputError(
            f"no per-query values of '{metric}' to rank queries by", field=param("moved_by")
        )
    ids, a, b = paired_values(base, cand, metric)
    texts = {str(c["query_id"]): c.get("text") for c in cand.get("cases") or []}
    moved: list[dict[str, Any]] = [
        {"query_id": q, "text": texts.get(q), "baseline": x, "candidate": y, "delta": y - x}
        for q, x, y in zip(ids, a, b)
        if not math.isclose(x, y, abs_tol=TIE)
    ]
    moved.sort(key=lambda r: (-abs(r["delta"]), r["query_id"]))
    return moved[:top]


def compare_specs(
    database: Database,
    baseline: str,
    candidate: str,
    *,
    measures: list[str] | None = None,
    rel: int = 1,
    allow_partial: bool = False,
    **kwargs: Any,
) -> Comparison:
    """:func:`compare` of two runs, experiments or saved JSON reports named as on the command
    line (the ones in the database read in one snapshot); ``kwargs`` go to :func:`compare`."""
    from ..measure.metrics import measures_for
    from . import obtain_all

    sides = obtain_all(
        database,
        [baseline, candidate],
        measures=measures or measures_for(),
        rel=rel,
        allow_partial=allow_partial,
    )
    return compare(sides[0], sides[1], **kwargs)
