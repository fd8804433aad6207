"""The choice among configurations, cross-validated: the valid queries are split into ``folds``
(seeded), and for each fold the configuration with the best mean of the metric on the other
folds is chosen and scored on that fold's queries, which played no part in the choice. The
held-out figure of every query is therefore the figure of a configuration chosen without it;
its gain over the experiment's own configuration (configuration 0) is tested pairwise
(:func:`evaluator.measure.stats.paired`: randomisation test, bootstrap interval). A change is
recommended only when that held-out gain is positive and significant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...measure import stats

ALPHA = 0.05


@dataclass(frozen=True)
class HeldOut:
    folds: list[list[int]]  # query indexes of each fold
    chosen: list[int]  # the configuration chosen on the other folds, per fold
    values: Any  # np.ndarray: each query's metric under the configuration chosen without it
    gain: float  # mean(values - current)
    ci_low: float
    ci_high: float
    p_value: float

    def as_dict(self, queries: list[str]) -> dict[str, Any]:
        """JSON; ``queries``: the query ids the indexes refer to."""
        return {
            "gain": self.gain,
            "interval": [self.ci_low, self.ci_high],
            "p": self.p_value,
            "alpha": ALPHA,
            "significant": self.gain > 0 and self.p_value < ALPHA,
            "folds": [[queries[i] for i in part] for part in self.folds],
            "chosen": self.chosen,
        }


def best(means: Any) -> int:
    """The configuration with the highest mean; ties to the first listed (the current one is
    first: a tie never changes it)."""
    import numpy as np

    return int(np.argmax(np.asarray(means)))


def split(n: int, folds: int, seed: int) -> list[list[int]]:
    """``n`` query indexes in ``folds`` folds of sizes differing by one at most, seeded."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(n)
    return [sorted(int(i) for i in part) for part in np.array_split(order, folds)]


def cross_validate(
    metric: Any,
    folds: int,
    seed: int,
    permutations: int = stats.PERMUTATIONS,
) -> HeldOut:
    """``metric[c, q]``: configuration c's value on query q; configuration 0 is the current."""
    import numpy as np

    metric = np.asarray(metric, dtype=float)
    parts = split(metric.shape[1], folds, seed)
    held = np.empty(metric.shape[1])
    chosen = []
    for part in parts:
        train = np.ones(metric.shape[1], dtype=bool)
        train[part] = False
        c = best(metric[:, train].mean(axis=1))
        chosen.append(c)
        held[part] = metric[c, part]
    r = stats.paired(metric[0], held, permutations=permutations, seed=seed)
    return HeldOut(parts, chosen, held, r.delta, r.ci_low, r.ci_high, r.p_value)
