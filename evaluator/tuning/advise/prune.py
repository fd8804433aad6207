"""Which screened design is built in full, and why each of the others is not (docs/advise.md,
"A large table"): as Faiss's operating points drop the dominated ones, a design screened on a
sample is dropped when its sample figures cannot win on the table.

Every design is screened on one sample, the design the table has (the anchor, measured in
place on the table) too, so that a challenger is compared with the anchor on the same rows. A
challenger is dropped when, on the sample:

- it did not reach the target recall (a larger table needs a higher setting, not a lower one);
- its work setting is at the server's maximum already (the table would need more);
- its index size or build time, scaled to the table's rows, is over a budget;
- the anchor meets the target within the budgets on the table and the challenger's p95 is not
  below the anchor's beyond their noise (the two p95 intervals apart, or the spreads);
- another challenger beats it by the recommendation's rule (at most one full build).

What is left, if anything, is the one challenger built in full."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .rules import BUILD_GROWTH, MB, Row, at_ceiling, beats, over_budgets, p95_range, pick, scaled


def _short(setting: str) -> str:
    return setting.split(".", 1)[-1]


def verdicts(
    labels: list[str],
    finds: list[str],
    screened: Sequence[Row],
    anchor: int | None,
    anchor_ok: bool,
    *,
    rows: int,
    scale: float,
    budgets: dict[str, float],
    ceilings: dict[str, float],
    target_recall: float,
    placed: set[int],
) -> tuple[int | None, list[dict[str, Any]]]:
    """(the index of the challenger to build in full, else None; the designs dropped, each
    ``{design, why}``). ``labels``, ``finds``, ``screened``: per design its label, the setting
    its find searched and its row on the sample of ``rows`` rows; ``anchor``: the anchor's index
    among them (None: the table has no design's index); ``anchor_ok``: it meets the target
    within the budgets on the table; ``placed``: the designs measured in place (not built)."""
    on = f"on {rows:,} rows"
    base = screened[anchor] if anchor is not None else None
    base_usable = base is not None and base.get("reached") and base.get("p95_ms") is not None
    dropped: list[dict[str, Any]] = []
    left: list[int] = []
    for i, row in enumerate(screened):
        if i in placed:
            continue
        why = _why(row, finds[i], on, scale, budgets, ceilings, target_recall)
        if why is None and anchor_ok and base_usable and not beats(row, base):  # type: ignore[arg-type]
            assert base is not None and anchor is not None
            why = (
                f"its p95 {on} ({_range(row)} ms) is not below {labels[anchor]}'s "
                f"({_range(base)} ms) beyond their noise: it cannot beat the index your table has"
            )
        if why is None:
            left.append(i)
        else:
            dropped.append({"design": labels[i], "why": why})
    if not left:
        return None, dropped
    best, _ = pick([screened[i] for i in left])
    chosen = next(i for i in left if screened[i] is best)
    for i in left:
        if i != chosen:
            dropped.append(
                {
                    "design": labels[i],
                    "why": f"{labels[chosen]} beats it {on} (the recommendation's rule): "
                    "one design at most is built in full",
                }
            )
    return chosen, dropped


def _why(
    row: Row,
    setting: str,
    on: str,
    scale: float,
    budgets: dict[str, float],
    ceilings: dict[str, float],
    target_recall: float,
) -> str | None:
    """Why a screened row cannot win on the table by its own figures (None: it may)."""
    value = (row.get("setting") or {}).get(setting)
    if not row.get("reached") or row.get("p95_ms") is None:
        recall = "nothing measured" if row.get("recall") is None else f"{row['recall']:.4f}"
        return (
            f"it did not reach recall {target_recall:g} {on} (best {recall} at {_short(setting)} "
            f"{value}): a larger table needs more, not less"
        )
    if at_ceiling(row, setting, ceilings):
        return (
            f"its {_short(setting)} {value} {on} is at the server's maximum "
            f"({ceilings[setting]:g}): the table would need more"
        )
    over = over_budgets(row, budgets, scale)
    if over:
        size = scaled(row, "index_bytes", scale)
        build = scaled(row, "build_ms", scale)
        carried = []
        if size is not None:
            carried.append(f"index about {size / MB:,.0f} MB")
        if build is not None:
            carried.append(f"build about {build / 1000:,.0f} s")
        return (
            f"over {', '.join(over)} carried from {on} to the table ({', '.join(carried)}; "
            f"size in proportion to the rows, build time at rows^{BUILD_GROWTH:g})"
        )
    return None


def _range(row: Row) -> str:
    low, high = p95_range(row)
    return f"{row['p95_ms']:.3f}, {max(low, 0):.3f}–{high:.3f}"


def round_up(seconds: float) -> int:
    """A bound above ``seconds`` a person would type: 1,000 s steps above 1,000 s."""
    step = 1000 if seconds > 1000 else 100
    return int(-(-seconds // step) * step)
