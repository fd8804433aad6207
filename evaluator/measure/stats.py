"""Inference over per-query metric values that SQL computed: a paired two-sided randomisation
(sign-flip permutation) test and a bootstrap confidence interval of the mean difference. Seeded,
so that the same two runs always give the same p-value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PERMUTATIONS = 10_000
BOOTSTRAP = 10_000
SEED = 0
_CHUNK = 1_000  # permutations per block: memory stays O(_CHUNK * n)


@dataclass
class PairedResult:
    n: int
    mean_a: float
    mean_b: float
    delta: float  # mean(b - a)
    p_value: float
    ci_low: float
    ci_high: float


def randomisation_test(diff: Any, permutations: int = PERMUTATIONS, seed: int = SEED) -> float:
    """Two-sided p-value of H0 "the pairs are exchangeable" for per-query differences ``diff``.

    Each permutation flips the sign of every difference with probability 1/2; the p-value is
    (1 + #{|mean of flipped| >= |observed mean|}) / (1 + permutations), never 0."""
    import numpy as np

    d = np.asarray(diff, dtype=float)
    if d.size == 0:
        return 1.0
    observed = abs(d.mean())
    if observed == 0.0:
        return 1.0
    rng = np.random.default_rng(seed)
    tol = 1e-12 * max(1.0, observed)
    extreme = 0
    done = 0
    while done < permutations:
        size = min(_CHUNK, permutations - done)
        signs = rng.integers(0, 2, size=(size, d.size), dtype=np.int8) * 2 - 1
        means = np.abs(signs @ d) / d.size
        extreme += int(np.count_nonzero(means >= observed - tol))
        done += size
    return (extreme + 1) / (permutations + 1)


def bootstrap_ci(
    diff: Any, resamples: int = BOOTSTRAP, seed: int = SEED, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``diff`` (queries resampled with
    replacement)."""
    import numpy as np

    d = np.asarray(diff, dtype=float)
    if d.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed + 1)
    means = np.empty(resamples)
    done = 0
    while done < resamples:
        size = min(_CHUNK, resamples - done)
        idx = rng.integers(0, d.size, size=(size, d.size))
        means[done : done + size] = d[idx].mean(axis=1)
        done += size
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def paired(
    a: Any, b: Any, permutations: int = PERMUTATIONS, resamples: int = BOOTSTRAP, seed: int = SEED
) -> PairedResult:
    """Compare paired values ``a`` (baseline) and ``b`` (candidate), one pair per query."""
    import numpy as np

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    d = b - a
    low, high = bootstrap_ci(d, resamples, seed)
    return PairedResult(
        n=int(d.size),
        mean_a=float(a.mean()) if a.size else float("nan"),
        mean_b=float(b.mean()) if b.size else float("nan"),
        delta=float(d.mean()) if d.size else float("nan"),
        p_value=randomisation_test(d, permutations, seed),
        ci_low=low,
        ci_high=high,
    )
