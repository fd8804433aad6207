"""An index in place measured with sampled rows, measured again where its figure is the
application's (docs/advise.md, "Sampled rows").

A row sampled as a query is a node of the index it searches (its own row taken out of its list):
its recall there is an upper bound for the application's queries, the further above them the
larger the table (issue 47: 0.9503 on sampled rows of a 200,000-row HNSW index where the
application's queries read 0.875). So the same index definition is built on the held-out copy of
every row (the sampled rows left out: true held-out queries there, :mod:`.sample`) with its own
find, when its build, estimated from the sample's, fits ``--max-confirm-s``. The design's row is
then that copy's (setting, recall, latency), its index the one in place (nothing to build), the
in-place figure kept beside it as ``upper_bound``. Where the build does not fit, the row stays
the sampled rows' figure, labelled (``queries``: :data:`SAMPLED_ROWS`), and a note says what
measures it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...testset.query_source import CAPTURE
from . import prune
from .outcome import Outcome
from .plan import AdviseConfig, Design

# what an index in place keeps of its sampled rows' figure beside the held-out copy's
UPPER_BOUND = ("setting", "recall", "sweep", "point", "at")


def fits(cfg: AdviseConfig, estimate: float | None) -> bool:
    """Whether a build estimated at ``estimate`` seconds (None: unknown) fits --max-confirm-s."""
    bound = cfg.max_confirm_s
    return bound is None or estimate is None or estimate <= bound


def again(
    measured: Any, design: Design, row: Outcome, target: str, where: str, eta: float | None
) -> Outcome:
    """``row``, ``design`` measured in place with sampled rows, measured again on the held-out
    copy ``target`` (``where``: the copy in words): that copy's figures, the index in place."""
    copy = measured.one(replace(design, in_place=None), target, eta=eta)
    # (the table has it: nothing to build)
    built = replace(copy.figures, index_bytes=row.figures.index_bytes, build_ms=None)
    return replace(
        copy,
        measurement=replace(copy.measurement, figures=built),
        in_place=row.in_place,
        measured_where=where,
        upper_bound={k: row.get(k) for k in UPPER_BOUND},
    )


def not_built(
    cfg: AdviseConfig, design: Design, row: Outcome, estimate: float, notes: list[str]
) -> Outcome:
    """``row`` stays the sampled rows' figure: said in the row and in ``notes``, with what
    measures it."""
    bound = cfg.max_confirm_s
    notes.append(
        f"{design.label} is measured in place with sampled rows only (an upper bound for the "
        f"application's queries): its build on a held-out copy of every row is estimated at "
        f"{estimate:,.0f} s, over --max-confirm-s {bound:g}; to measure it, run the same advise "
        f"with --max-confirm-s {prune.round_up(estimate * 1.5)}, or capture the application's queries "
        f"(`{CAPTURE}`) and advise --captured SET"
    )
    said = {"built": False, "estimated_build_s": estimate, "max_confirm_s": bound}
    return replace(row, held_out_build=said)
