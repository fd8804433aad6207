"""Which way an imported run's scores point, stored as ``run.params["score"]``: ``distance``
(lower is better), ``similarity`` (higher is better) or ``rank`` (the scores are ranks, as a
TREC export of a run without comparable scores writes them, -rank). Score fusion
(``pgeval.fuse_scores``: minmax, zscore) negates distances, refuses ranks and refuses a run
whose direction is unknown (docs/pipeline.md "Score direction"); rrf reads ranks only.

Where the direction comes from, first that applies: ``--score`` (``run import``,
``import:score=``); a JSONL file's own ``"score"`` key on each line (written by `run export`);
a TREC file's format (trec_eval ranks by score descending: similarity, or ``rank`` when every
score is minus its rank); a JSONL file's scores themselves, when they fall (similarity) or rise
(distance) down every list. A declared direction that the file's order contradicts is refused
with the line, as is a line declaring another direction than the file's other lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError, param

GIVEN = ("distance", "similarity")  # what --score takes
STORED = ("distance", "similarity", "rank")  # what run.params["score"] and a JSONL line say
_FALLING = ("similarity", "rank")  # directions whose best score comes first: scores fall


def check_given(score: str | None, fmt: str) -> None:
    """Refuse a ``--score`` that is not one of :data:`GIVEN`, and distances in a TREC file
    (which trec_eval, and this import, rank by score descending: backwards)."""
    if score is None:
        return
    if score not in GIVEN:
        raise InputError(
            f"score must be distance or similarity, got '{score}'", field=param("score")
        )
    if fmt == "trec" and score == "distance":
        raise InputError(
            "a TREC run is ranked by score descending (trec_eval's rule): distances would be "
            "ranked backwards; write negated distances, or import JSONL with "
            f"{param('score')} distance",
            field=param("score"),
        )


@dataclass
class Direction:
    """The direction of a JSONL file's scores, read line by line (:meth:`declare`,
    :meth:`observe`), decided once the file is read (:meth:`decided`)."""

    path: Path
    given: str | None = None
    declared: str | None = None
    declared_on: int = 0
    rises_on: int = 0  # first line whose scores rise down the list
    falls_on: int = 0  # first line whose scores fall down the list

    def declare(self, value: object, lineno: int) -> None:
        """A line's ``"score"`` key (absent: None)."""
        if value is None:
            return
        if value not in STORED:
            raise InputError(
                f"score must be one of {', '.join(STORED)}, got {value!r}",
                file=str(self.path),
                line=lineno,
                field="score",
            )
        earlier = self.given or self.declared
        if earlier is not None and value != earlier:
            said = f"{param('score')}" if self.given else f"line {self.declared_on}"
            raise InputError(
                f"score '{value}' here, '{earlier}' by {said}",
                file=str(self.path),
                line=lineno,
                field="score",
            )
        if self.declared is None:
            self.declared, self.declared_on = str(value), lineno

    def observe(self, scores: list[float | None], lineno: int) -> None:
        """A list's scores in the file's order."""
        known = [s for s in scores if s is not None]
        pairs = list(zip(known, known[1:]))
        if not self.rises_on and any(b > a for a, b in pairs):
            self.rises_on = lineno
        if not self.falls_on and any(b < a for a, b in pairs):
            self.falls_on = lineno

    def decided(self) -> str | None:
        """The direction (None: unknown); InputError when the file's order contradicts it."""
        said = self.given or self.declared
        if said is None:
            if self.rises_on and not self.falls_on:
                return "distance"
            if self.falls_on and not self.rises_on:
                return "similarity"
            return None
        wrong = self.rises_on if said in _FALLING else self.falls_on
        if wrong:
            by = param("score") if self.given else f"line {self.declared_on}"
            way = "rise" if said in _FALLING else "fall"
            raise InputError(
                f"the scores {way} down this list, yet they are {said} scores ({by} says so): "
                "the list's order and its scores disagree",
                file=str(self.path),
                line=wrong,
                field="score",
            )
        return said
