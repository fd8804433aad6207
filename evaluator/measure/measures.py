"""The measure registry: which measures pgeval knows and how they are spelled. One place, read by
the SQL API (``pgeval.ranked_measures()`` and ``pgeval.max_cutoff()`` in sql/010_measures.sql
return the same lists; tests/test_measures_registry.py keeps them equal), by ``metrics`` (the
cut-off options) and by ``gate`` (the rules file).

- ranked measures, spelled ``name@K`` with 1 <= K <= :data:`MAX_K`: computed in SQL per query
  (sql/020_metrics.sql) from a run's ranked lists;
- answer measures (``citation_precision``, ``answer_accuracy``): sql/300_answers.sql;
- latency percentiles (``latency_p95_ms``, ``answer_latency_p99_9_ms``): from stored timings.
"""

from __future__ import annotations

import re

RANKED = ("recall", "mrr", "ndcg", "precision", "hit")
ANSWER = ("citation_precision", "answer_accuracy")
MAX_K = 100_000

_RANKED = re.compile(r"^(" + "|".join(RANKED) + r")@([1-9][0-9]{0,5})$")
_LATENCY = re.compile(r"^(answer_)?latency_p[0-9]{1,2}(_[0-9]+)?_ms$")


def parse_ranked(measure: str) -> tuple[str, int] | None:
    """``'ndcg@10'`` -> ``('ndcg', 10)``; None for anything that is not a ranked measure with a
    cut-off in range."""
    m = _RANKED.match(measure)
    if m is None or not 1 <= int(m.group(2)) <= MAX_K:
        return None
    return m.group(1), int(m.group(2))


def is_known(measure: str) -> bool:
    """A measure a report or a gate can name: ranked, answer or latency."""
    return (
        parse_ranked(measure) is not None
        or measure in ANSWER
        or _LATENCY.match(measure) is not None
    )


def spelled() -> str:
    """How the known measures are written, for error messages."""
    return ", ".join(
        [f"{name}@K" for name in RANKED]
        + list(ANSWER)
        + ["latency_p95_ms", "answer_latency_p95_ms"]
    )
