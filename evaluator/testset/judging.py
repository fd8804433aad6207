"""A model judge's grades, kept apart from the people's (``pgeval.model_grade``), and how they
agree with the people's where both graded: the confusion table and Cohen's kappa, both read
from SQL (``pgeval.judge_confusion``, ``pgeval.judge_kappa``: sql/270_judging.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass(frozen=True)
class Agreement:
    """The judge ``judge`` against the human grades of test set ``testset_id``: ``confusion``
    maps (human grade, model grade) to a count; ``kappa`` None when no chunk was graded by both
    (or both gave one grade throughout)."""

    judge: str
    confusion: dict[tuple[int, int], int]
    kappa: float | None

    @property
    def compared(self) -> int:
        return sum(self.confusion.values())

    @property
    def agreed(self) -> int:
        return sum(n for (h, m), n in self.confusion.items() if h == m)

    def as_dict(self) -> dict:
        return {
            "judge": self.judge,
            "compared": self.compared,
            "agreed": self.agreed,
            "kappa": self.kappa,
            "confusion": [
                {"human": h, "model": m, "n": n} for (h, m), n in sorted(self.confusion.items())
            ],
        }

    def table(self) -> list[str]:
        """The confusion table in words: a row per human grade, a column per model grade."""
        head = "human \\ model " + " ".join(f"{g:>5}" for g in range(4))
        rows = [
            f"{h:>13} " + " ".join(f"{self.confusion.get((h, m), 0):>5}" for m in range(4))
            for h in range(4)
        ]
        return [head, *rows]


def store(conn: Any, testset_id: int, judge: str, grades: Iterable[tuple[str, str, int]]) -> int:
    """Keep the judge's ``(query_id, chunk_id, grade)`` for the test set (a grade it gave
    before is replaced); the caller's transaction. Returns the number stored."""
    rows = list(grades)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO pgeval.model_grade (testset_id, judge, query_id, chunk_id, grade) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (testset_id, judge, query_id, chunk_id) "
            "DO UPDATE SET grade = EXCLUDED.grade, created_at = now()",
            [(testset_id, judge, q, c, g) for q, c, g in rows],
        )
    return len(rows)


def agreement(conn: Any, testset_id: int, judge: str) -> Agreement:
    """How the judge's stored grades agree with the test set's human grades."""
    confusion = {
        (h, m): n
        for h, m, n in conn.execute(
            "SELECT human, model, n FROM pgeval.judge_confusion(%s, %s)", (testset_id, judge)
        ).fetchall()
    }
    kappa = conn.execute("SELECT pgeval.judge_kappa(%s, %s)", (testset_id, judge)).fetchone()[0]
    return Agreement(judge, confusion, kappa)
