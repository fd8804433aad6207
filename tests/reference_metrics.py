"""A small pure-Python reference of METRICS.md, used only by tests to check the SQL."""

from __future__ import annotations

import math


def per_query(
    ranked: list[str], grades: dict[str, int], measure: str, rel: int = 1
) -> float | None:
    """Value of ``measure`` (e.g. 'ndcg@10', 'rprec') for one query; None when the query is not
    valid."""
    n_rel = sum(1 for g in grades.values() if g >= rel)
    if n_rel == 0:
        return None
    if measure == "rprec":  # precision at R, R = the number of relevant chunks
        return sum(1 for c in ranked[:n_rel] if grades.get(c, 0) >= rel) / n_rel
    name, cut = measure.split("@") if "@" in measure else (measure, str(len(ranked)))
    k = int(cut)
    if name == "map":  # precision at each relevant rank <= K, summed, over all relevant chunks
        seen, total = 0, 0.0
        for i, c in enumerate(ranked[:k], 1):
            if grades.get(c, 0) >= rel:
                seen += 1
                total += seen / i
        return total / n_rel
    top = ranked[:k]
    hits = [c for c in top if grades.get(c, 0) >= rel]
    if name == "judged":  # judged chunks (grade 0 included) in the first K, over K
        return sum(1 for c in top if c in grades) / k
    if name == "recall":
        return len(hits) / n_rel
    if name == "precision":
        return len(hits) / k
    if name == "hit":
        return 1.0 if hits else 0.0
    if name == "mrr":
        for i, c in enumerate(top, 1):
            if grades.get(c, 0) >= rel:
                return 1.0 / i
        return 0.0
    if name == "ndcg":
        dcg = sum((2 ** grades.get(c, 0) - 1) / math.log2(i + 1) for i, c in enumerate(top, 1))
        ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
        idcg = sum((2**g - 1) / math.log2(i + 1) for i, g in enumerate(ideal, 1))
        return dcg / idcg
    raise ValueError(measure)


def mean(
    run: dict[str, list[str]], qrels: dict[str, dict[str, int]], measure: str, rel: int = 1
) -> float | None:
    values = [per_query(run.get(q, []), g, measure, rel) for q, g in qrels.items()]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None
