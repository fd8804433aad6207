"""A sweep of a captured set (``pgeval sweep --captured SET``): each shape measured as the
application sent it, one stored sweep per shape (``<sweep>.s<shape>``; a rerun reuses them),
combined as the grouped sweep combines its groups (:mod:`.groups`).

- A shape's sweep searches a target derived in memory from the sweep's (:func:`shape_target`,
  never stored): the shape's own statement text (``statement``/``statement_template``, as
  ``target add --statement`` keeps them), the distance its operator computes, and per query id
  the values of ``$2, $3 ...`` it was sent with (``bound``, read from pgeval.captured_query:
  captured query ids are stable digests of what was sent). Each query binds its own values
  (its tenant, its LIMIT) under the planner's own plan (custom), its exact twin (the same
  statement, ANN index scans off: targets/statement.TWIN_SETTINGS) the ground truth.
- Recall is read at the shape's LIMIT (recall@LIMIT, the application's K), whatever ``--k``
  says; a warning says so where they differ.
- Most applications select ids only: a statement without a ``distance`` column has each
  returned id's distance read after the timing, untimed, from the target's table under the
  target's distance (stages/statement_sql.with_distances), so pgeval ranks the lists and
  applies its tie rule as for any other: with no ties its recall is numpy's
  ``|returned ∩ exact top-K| / K``.
- Combined: per shape its recall (95 % half-width), p95, queries and share of the searches
  sent; per point the recall weighted by those shares (as SQL's pgeval.evaluate_captured
  weights it). With ``--find``, each shape finds its least value, then every shape is measured
  at the largest value found (and at the best value of a shape that reaches none); the
  :func:`verdict` is the first point every shape reaches, or names the shapes that reach none
  with their best.
- Refused before anything is stored: a set captured on another table than the target's, a
  shape whose statement no longer runs there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...core.errors import InputError, param
from ...core.warnings_once import once
from ...measure.operating_points import reaches
from ...targets.shapes import Shape, shape_target, shapes_of
from .config import SweepConfig
from .result import SweepResult
from .runner import run_sweep

if TYPE_CHECKING:
    from ...core.db import Database


def verdict(rows: list[dict], target_recall: float) -> dict:
    """The first point where every shape reaches ``target_recall`` (None: none), and per shape
    the first point it reaches it at, or its best where it reaches it nowhere (``rows``: one per
    shape and point, with ``shape``, ``point``, ``label``, ``recall``)."""
    points = sorted({(r["point"], r["label"]) for r in rows})
    shapes = sorted({r["shape"] for r in rows})
    at = {(r["shape"], r["point"]): r for r in rows}
    every = next(
        (
            p
            for p in points
            if all(
                (s, p[0]) in at and reaches(at[(s, p[0])]["recall"], target_recall) for s in shapes
            )
        ),
        None,
    )
    per_shape = []
    for s in shapes:
        mine = [at[(s, p[0])] for p in points if (s, p[0]) in at]
        first = next((r for r in mine if reaches(r["recall"], target_recall)), None)
        best = max(mine, key=lambda r: r["recall"] if r["recall"] is not None else -1.0)
        per_shape.append(
            {"shape": s, "reaches_at": None if first is None else first["label"],
             "best": best["recall"], "best_at": best["label"]}
        )  # fmt: skip
    return {
        "target_recall": target_recall,
        "point": None if every is None else every[1],
        "shapes": per_shape,
    }


@dataclass
class ShapeSweepResult:
    captured: str
    target_recall: float
    k: int  # --k: what the shapes' LIMITs replace
    shapes: list[Shape] = field(default_factory=list)
    sweeps: dict[int, SweepResult] = field(default_factory=dict)  # shape -> its sweep
    finds: dict[int, dict] = field(default_factory=dict)  # shape -> its find
    rows: list[dict] = field(default_factory=list)  # per shape and point
    points: list[dict] = field(default_factory=list)  # per point: weighted recall, worst shape
    at: dict | None = None  # the point the shapes are shown at
    verdict: dict | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def shown(self) -> list[dict]:
        """The shapes' rows at the point shown."""
        if self.at is None:
            return []
        return [r for r in self.rows if r["point"] == self.at["point"]]

    def as_dict(self) -> dict:
        from ...testset.query_source import CAPTURED

        return {
            "captured": self.captured,
            "target_recall": self.target_recall,
            "k": self.k,
            "queries_label": CAPTURED,
            "at": self.at,
            "shapes": self.shown,
            "weighted_recall": None if self.at is None else self.at["weighted_recall"],
            "verdict": self.verdict,
            "points": self.points,
            "rows": self.rows,  # every shape at every point
            "finds": {str(s): f for s, f in self.finds.items()},
            "sweeps": {str(s): r.name for s, r in self.sweeps.items()},
            # points measured now, and reused from earlier sweeps or kept in these
            "measured": sum(r.measured for r in self.sweeps.values()),
            "reused": sum(r.reused + r.kept for r in self.sweeps.values()),
            "warnings": self.warnings,
        }


def run_shapes(
    database: Database,
    cfg: SweepConfig,
    *,
    on_shape: Callable[[int, int, Shape, str], Any] | None = None,
    on_warning: Callable[..., Any] | None = None,
    **callbacks: Any,
) -> ShapeSweepResult:
    """Sweep every shape of ``cfg.queries``' captured set (see the module's docstring);
    ``on_shape(index, count, shape, step)`` before each shape's sweep (step: sweep | confirm);
    ``callbacks`` go to :func:`.runner.run_sweep`."""
    src: Any = cfg.queries
    name = getattr(src, "captured", None)
    if name is None or getattr(src, "where", None) is not None:
        raise InputError(
            f"a sweep per shape takes {param('captured')} SET", field=param("captured")
        )
    with database.connect() as conn:
        shapes = shapes_of(conn, name)
        _preflight(database, conn, cfg, name, shapes)
    out = ShapeSweepResult(name, cfg.target_recall, cfg.k, shapes)
    warn = once(out.warnings, on_warning)
    for sh in shapes:
        if sh.k is not None and sh.k != cfg.k:
            warn(
                f"shape {sh.shape}: measured at recall@{sh.k}, its LIMIT (the application's K), "
                f"not at {param('k')} {cfg.k}"
            )

    def sweep_of(i: int, sh: Shape, step: str, **changes: Any) -> SweepResult:
        if on_shape:
            on_shape(i + 1, len(shapes), sh, step)
        return run_sweep(database, _shape_config(cfg, sh, step, **changes), on_warning=warn,
                         **callbacks)  # fmt: skip

    for i, sh in enumerate(shapes):
        out.sweeps[sh.shape] = res = sweep_of(i, sh, "sweep")
        if res.finds:
            out.finds[sh.shape] = res.finds[0]
    values = _confirm_values(out.finds)
    if cfg.find and values:
        grid = (f"{cfg.find}={','.join(str(v) for v in values)}",)
        for i, sh in enumerate(shapes):
            out.sweeps[sh.shape] = sweep_of(
                i, sh, "confirm", find=None, find_max=None, find_min=None, params=grid
            )
    _combine(database, out)
    return out


def _preflight(
    database: Database, conn: Any, cfg: SweepConfig, name: str, shapes: list[Shape]
) -> None:
    """Every shape's target, its statement run once on the table (planned, nothing fetched):
    refused before any sweep stores anything."""
    from ...targets import statement, targets

    if cfg.build:
        raise InputError(
            f"{param('captured')} measures each shape on the index you have: not with "
            f"{param('build')}",
            field=param("build"),
        )
    base = targets.load(conn, cfg.target)
    conn.rollback()
    checked = [shape_target(conn, base, name, sh.shape) for sh in shapes]
    with database.connect(results=False, read_only=True) as kb:
        for sh, tg in zip(shapes, checked, strict=True):
            try:
                statement.check(kb, tg)
            except InputError as exc:
                raise InputError(
                    f"captured set '{name}' shape {sh.shape} ({short(sh.statement, 60)}): "
                    f"{exc.detail.removeprefix(param('statement') + ': ')}",
                    field=param("captured"),
                ) from None


def _shape_config(cfg: SweepConfig, sh: Shape, step: str, **changes: Any) -> SweepConfig:
    name = None
    if cfg.name:
        name = f"{cfg.name}.s{sh.shape}" + ("" if step == "sweep" else f"/{step}")
    return replace(
        cfg,
        shape=sh.shape,
        k=sh.k or cfg.k,
        queries=replace(cfg.queries, shape=sh.shape),
        name=name,
        **changes,
    )


def _confirm_values(finds: dict[int, dict]) -> list[int]:
    """The largest value a shape found, and the best value of each shape that found none."""
    found = [int(f["value"]) for f in finds.values() if f.get("reached")]
    bests = {int(f["best"][0]) for f in finds.values() if not f.get("reached") and f.get("best")}
    return sorted(({max(found)} if found else set()) | bests)


def _combine(database: Database, out: ShapeSweepResult) -> None:
    """Rows per shape and point (recall, its 95 % half-width, p95), the weighted recall per
    point, the verdict and the point shown."""
    share = {s.shape: s for s in out.shapes}
    with database.connect() as conn:
        for number, res in out.sweeps.items():
            for m in res.operating_points.points:
                margin = conn.execute(
                    "SELECT m.margin95 FROM pgeval.sweep_point_recall_margin(%s, %s, %s) m",
                    (res.sweep_id, m.point, res.k),
                ).fetchone()
                sh = share[number]
                out.rows.append(
                    {"shape": number, "statement": sh.statement, "share": sh.share,
                     "queries": sh.queries, "sent": sh.sent, "k": res.k, "point": m.point,
                     "label": m.label, "settings": m.settings, "recall": m.recall,
                     "margin95": None if margin is None else margin[0], "p95_ms": m.p95_ms,
                     "reached": reaches(m.recall, out.target_recall), "sweep": res.name}
                )  # fmt: skip
        conn.rollback()
    for point, label in sorted({(r["point"], r["label"]) for r in out.rows}):
        mine = [r for r in out.rows if r["point"] == point]
        whole = len(mine) == len(out.shapes) and all(r["recall"] is not None for r in mine)
        worst = min(mine, key=lambda r: r["recall"] if r["recall"] is not None else -1.0)
        out.points.append(
            {"point": point, "label": label, "settings": mine[0]["settings"],
             "weighted_recall": sum(r["recall"] * r["share"] for r in mine) if whole else None,
             "worst_shape": worst["shape"], "worst_recall": worst["recall"]}
        )  # fmt: skip
    out.verdict = verdict(out.rows, out.target_recall)
    if not out.points:
        return
    chosen = next((p for p in out.points if p["label"] == out.verdict["point"]), None)
    why = "every shape reaches the target here first"
    if chosen is None:
        chosen = max(out.points, key=lambda p: (p["worst_recall"] or 0.0, -p["point"]))
        why = "no point reaches the target in every shape: the point with the best worst shape"
    out.at = {**chosen, "why": why}


def short(statement: str, width: int) -> str:
    """The statement on one line within ``width`` characters: whole if it fits, else what
    tells shapes apart (what follows ``FROM table``: the filters, ORDER BY, LIMIT), cut in its
    middle if still too long (``…`` where cut)."""
    import re

    flat = " ".join(statement.split())
    if len(flat) <= width:
        return flat
    tail = re.sub(r"(?is)^select\s.*?\sfrom\s+\S+\s+", "… ", flat, count=1)
    if len(tail) <= width:
        return tail
    half = (width - 1) // 2
    return tail[:half] + "…" + tail[len(tail) - (width - 1 - half) :]
