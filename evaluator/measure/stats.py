"""Inference over per-query metric values that SQL computed: a paired two-sided randomisation
(sign-flip permutation) test, or a paired two-sided Student's t-test, and a bootstrap confidence
interval of the mean difference. Seeded, so that the same two runs always give the same p-value.
The t distribution is computed here (the regularised incomplete beta function), without scipy;
tests/test_compare.py checks it against scipy.stats.ttest_rel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PERMUTATIONS = 10_000
BOOTSTRAP = 10_000
SEED = 0
RANDOMISATION = "randomisation"
T_TEST = "t-test"
TESTS = (RANDOMISATION, T_TEST)  # `pgeval compare --test`; the first is the default
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


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), 0 <= x <= 1."""
    import math

    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_test(diff: Any) -> float:
    """Two-sided p-value of the paired t-test of H0 "the mean difference is 0" for per-query
    differences ``diff``: t = mean / (s / sqrt(n)), s the sample standard deviation (n - 1),
    against Student's t with n - 1 degrees of freedom (scipy.stats.ttest_rel's p-value). With
    fewer than two pairs, or every difference 0, the p-value is 1; with every difference equal
    and not 0 (s = 0), it is 0."""
    import math

    import numpy as np

    d = np.asarray(diff, dtype=float)
    if d.size < 2 or not np.any(d):
        return 1.0
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd <= 1e-15 * max(1.0, abs(mean)):
        return 0.0
    t = mean / (sd / math.sqrt(d.size))
    df = d.size - 1.0
    return min(1.0, incomplete_beta(df / 2.0, 0.5, df / (df + t * t)))


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
    a: Any,
    b: Any,
    permutations: int = PERMUTATIONS,
    resamples: int = BOOTSTRAP,
    seed: int = SEED,
    test: str = RANDOMISATION,
) -> PairedResult:
    """Compare paired values ``a`` (baseline) and ``b`` (candidate), one pair per query; the
    p-value from ``test`` (:data:`TESTS`), the interval from the bootstrap either way."""
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
        p_value=t_test(d) if test == T_TEST else randomisation_test(d, permutations, seed),
        ci_low=low,
        ci_high=high,
    )


def holm(p_values: Any) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the order given: the i-th smallest of
    m p-values times (m - i + 1), capped at 1, never below the one before it. Reject where the
    adjusted value is < alpha: the family-wise error rate stays <= alpha over all m tests."""
    p = [float(x) for x in p_values]
    m = len(p)
    out = [0.0] * m
    running = 0.0
    for step, i in enumerate(sorted(range(m), key=lambda j: p[j])):
        running = max(running, min(1.0, (m - step) * p[i]))
        out[i] = running
    return out
