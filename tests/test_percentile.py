"""The one percentile rule: the client's nearest rank (evaluator/core/percentile.py, for warm-up
passes that are not stored) equals SQL's pgeval.nearest_rank on the real server."""

from __future__ import annotations

import random

import pytest

from evaluator.core.percentile import nearest_rank

FRACTIONS = (0.01, 0.07, 0.1, 1 / 3, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)


def test_client_and_sql_agree(conn):
    rng = random.Random(7)
    for n in (1, 2, 3, 7, 10, 99, 100, 101, 1000):
        values = [round(rng.uniform(0.1, 20.0), rng.choice((1, 3, 6))) for _ in range(n)]
        for f in FRACTIONS:
            sql = conn.execute(
                "SELECT pgeval.nearest_rank(%s::float8[], %s)", (values, f)
            ).fetchone()[0]
            assert nearest_rank(values, f) == sql, (n, f)


def test_worked_examples():
    assert nearest_rank([15, 20, 35, 40, 50], 0.3) == 20  # ceil(1.5) = 2nd
    assert nearest_rank([15, 20, 35, 40, 50], 0.4) == 20  # exactly 2: not the 3rd
    assert nearest_rank(range(1, 101), 0.07) == 7  # 0.07 * 100 is 7, exactly
    assert nearest_rank([3, 1, 2, 4], 0.5) == 2  # a median is an element, never a mean of two
    assert nearest_rank([], 0.5) is None
    with pytest.raises(ValueError):
        nearest_rank([1], 0)
