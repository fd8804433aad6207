"""`advise --captured SET`: the recommendation checked per shape as the application sent it.

advise measures each design with the set's vectors through the design's own statement (the
shapes' filters and LIMITs not applied). Where the recommendation keeps the index the table has
(nothing to build: the setting applies as printed), every captured shape is measured at that
setting by :func:`..sweep.shapes.run_shapes` (one point per shape, the shape's own statement,
LIMIT and values, a stored point reused): per shape recall ± its 95 % half-width and share, the
weighted recall, and whether every shape reaches the target; a shape that does not is named in
the recommendation's words and a note, with the sweep that finds what it needs. Where the
recommendation builds an index, its shapes can only be measured after the build: a note says
with which command. A set that cannot be measured per shape (a shape whose statement no longer
runs) is said in a note: the recommendation stands.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...core.errors import InputError
from ..options import taken
from ..sweep import SweepConfig
from ..sweep.shapes import run_shapes, short
from .config import SWEPT
from .plan import AdviseConfig


def command(cfg: AdviseConfig, rec: dict[str, Any], captured: str) -> str:
    """The sweep that finds the least setting every shape reaches the target at."""
    find = next(iter(rec["setting"]), "SETTING")
    return (
        f"pgeval sweep --target {cfg.target} --stage {rec['design']} --captured {captured} "
        f"--target-recall {cfg.target_recall:g} --find {find}"
    )


def check(
    database: Any, cfg: AdviseConfig, rec: dict[str, Any], warn: Any
) -> tuple[dict[str, Any], str | None]:
    """(``rec`` with its ``shapes`` where the index is kept, the note to print: None where
    none); ``rec`` as it is unless the queries are a captured set."""
    captured = getattr(cfg.queries, "captured", None)
    if captured is None:
        return rec, None
    find = command(cfg, rec, captured)
    if rec.get("keep") is None:
        return rec, (
            f"the captured shapes are measured once the index is built, each as the "
            f"application sends it: `{find}`"
        )
    scfg = replace(
        taken(SweepConfig(target=cfg.target, stage=rec["design"]), cfg, *SWEPT),
        params=tuple(f"{k}={v}" for k, v in rec["setting"].items()),
        settings=dict(cfg.settings),
        find=None,
        find_max=None,
        find_min=None,
        find_start=None,
    )
    try:
        res = run_shapes(database, scfg, on_warning=warn)
    except InputError as exc:  # (a shape whose statement no longer runs): said, not fatal
        return rec, f"the captured shapes were not measured: {exc.detail}"
    rows = [
        {k: r[k] for k in ("shape", "statement", "share", "queries", "k", "recall", "margin95",
                           "reached", "sweep")}
        for r in res.shown
    ]  # fmt: skip
    missing = [r for r in rows if not r["reached"]]
    got = {
        "captured": captured,
        "target_recall": cfg.target_recall,
        "settings": None if res.at is None else res.at["settings"],
        "shapes": rows,
        "weighted_recall": None if res.at is None else res.at["weighted_recall"],
        "every_shape": bool(rows) and not missing,
        "missing": [r["shape"] for r in missing],
    }
    if not missing:
        return {**rec, "shapes": got}, None
    said = "; ".join(
        f"shape {r['shape']} ({short(r['statement'], 50)}) reads "
        + ("n/a" if r["recall"] is None else f"{r['recall']:.4f}")
        for r in missing
    )
    words = (
        f"as the application sends them, not every captured shape reaches "
        f"{cfg.target_recall:g} at this setting: {said}; find what they need with `{find}`"
    )
    return {**rec, "shapes": got, "why": f"{rec['why']}; {words}"}, words[0].upper() + words[1:]


def line(rec: dict[str, Any]) -> str | None:
    """``captured shapes, as the application sends them: shape 1 0.9800 ±0.0100 (43 %), ...;
    weighted 0.9700: every shape reaches 0.95``; None: not measured."""
    got = rec.get("shapes")
    if not got:
        return None

    def one(r: dict[str, Any]) -> str:
        recall = "n/a" if r["recall"] is None else f"{r['recall']:.4f}"
        margin = "" if r["margin95"] is None else f" ±{r['margin95']:.4f}"
        return f"shape {r['shape']} {recall}{margin} ({r['share']:.0%})" + (
            "" if r["reached"] else " ✗"
        )

    weighted = got["weighted_recall"]
    return (
        "captured shapes, as the application sends them: "
        + ", ".join(one(r) for r in got["shapes"])
        + ("" if weighted is None else f"; weighted {weighted:.4f}")
        + (
            f": every shape reaches {got['target_recall']:g}"
            if got["every_shape"]
            else f": shape(s) {', '.join(map(str, got['missing']))} below {got['target_recall']:g}"
        )
    )
