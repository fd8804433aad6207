"""Run an advise: one stored sweep per design x build (``sweep --build ... --find ...``: the index
built on a scratch copy, dropped afterwards), read back from the sweep's own rows, then the
recommendation (:mod:`.recommend`). A rerun reuses every stored point and builds nothing that
is not missing."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...core.errors import InputError, param
from . import recommend
from .plan import AdviseConfig, Design, designs, supported


@dataclass
class AdviseResult:
    target: str
    k: int
    target_recall: float
    budgets: dict
    designs: list[dict] = field(default_factory=list)
    recommendation: dict | None = None
    unmet: dict | None = None  # nothing meets R within the budgets: what binds, the closest
    skipped: dict = field(default_factory=dict)  # design -> why the server cannot build it
    settings: dict = field(default_factory=dict)  # --set: measured under, not recommended
    queries: dict | None = None
    testset: str | None = None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "k": self.k,
            "target_recall": self.target_recall,
            "budgets": self.budgets,
            "testset": self.testset,
            "queries": self.queries,
            "measured_under": self.settings,
            "skipped": self.skipped,
            "designs": self.designs,
            "recommendation": self.recommendation,
            "unmet": self.unmet,
            "warnings": self.warnings,
        }


def run_advise(database, cfg: AdviseConfig, *, on_design=None, on_warning=None, on_find=None):
    """Measure every design x build (``on_design(i, n, design, seconds_left)`` before each,
    ``on_find(design, point, recall)`` after each value a find tried) and recommend one."""
    from ...target import targets

    _check(cfg)
    with database.connect(results=False, autocommit=True) as kb:
        available, why_not = supported(kb)
        plan = designs(cfg, available, why_not)
    with database.connect() as conn:
        target = targets.load(conn, cfg.target)
    result = AdviseResult(
        cfg.target,
        cfg.k,
        cfg.target_recall,
        recommend.budgets(cfg),
        skipped={k: v for k, v in why_not.items() if not cfg.designs},
        settings=dict(cfg.settings),
    )

    def warn(message: str) -> None:
        if message not in result.warnings:
            result.warnings.append(message)
            if on_warning:
                on_warning(message)

    spent: list[float] = []
    for i, design in enumerate(plan):
        if on_design:
            left = None if not spent else sum(spent) / len(spent) * (len(plan) - i)
            on_design(i + 1, len(plan), design, left)
        t0 = time.monotonic()
        res = _sweep(database, cfg, design, warn, on_find)
        if res.measured:
            spent.append(time.monotonic() - t0)
        result.testset, result.queries = res.testset, res.queries
        result.designs.append(_row(design, res))
    with database.connect(results=False, autocommit=True) as kb:
        context = recommend.server_context(kb, target, cfg)
        for row in result.designs:
            recommend.describe(row, context, cfg)
        result.recommendation, result.unmet = recommend.choose(kb, target, result.designs, cfg)
    return result


def _check(cfg: AdviseConfig) -> None:
    if not 0 < cfg.target_recall <= 1:
        raise InputError(
            f"{param('target_recall')} must be in (0, 1], got {cfg.target_recall}",
            field=param("target_recall"),
        )
    for opt, value in (
        ("max_p95_ms", cfg.max_p95_ms),
        ("max_index_mb", cfg.max_index_mb),
        ("max_build_s", cfg.max_build_s),
    ):
        if value is not None and not value > 0:
            raise InputError(f"{param(opt)} must be above 0, got {value:g}", field=param(opt))


def _sweep(database, cfg: AdviseConfig, design: Design, warn, on_find):
    from ..sweep import SweepConfig, run_sweep

    scfg = SweepConfig(
        testset=cfg.testset,
        queries=cfg.queries,
        target=cfg.target,
        stage=design.kind,
        build=tuple(f"{k}={v}" for k, v in design.build.items()),
        settings={**cfg.settings, **design.fixed},
        k=cfg.k,
        depth=cfg.k,  # the application's LIMIT
        repeat=cfg.repeat,
        concurrency=cfg.concurrency,
        target_recall=cfg.target_recall,
        find=design.find,
        find_max=cfg.find_max,
        embedder=cfg.embedder,
        checksum=cfg.checksum,
        statement_timeout=cfg.statement_timeout,
        maintenance_work_mem=cfg.maintenance_work_mem,
        build_timeout_s=cfg.build_timeout_s,
        fresh=cfg.fresh,
    )
    return run_sweep(
        database,
        scfg,
        on_warning=warn,
        on_find=None if on_find is None else (lambda p, r: on_find(design, p, r)),
    )


def _row(design: Design, res) -> dict:
    """The design's figures at the cheapest setting reaching R (the sweep's own recommendation,
    pgeval.sweep_recommendation), else at the best its find tried."""
    found = res.finds[0]
    value = found["value"] if found["reached"] else (found["best"] or [None])[0]
    point = next(
        (p for p in res.points if (p["settings"] or {}).get(design.find) == str(value)), None
    )
    if found["reached"] and res.recommendation:
        point = next(p for p in res.points if p["point"] == res.recommendation["point"])
        value = int(point["settings"][design.find])
    point = point or {}
    return {
        "design": design.kind,
        "build": design.build,
        "setting": {design.find: value, **design.fixed},
        "recall": point.get("index_recall"),
        "p50_ms": point.get("p50_ms"),
        "p95_ms": point.get("p95_ms"),
        "p95_sd": point.get("p95_sd"),
        "p99_ms": point.get("p99_ms"),
        "qps": point.get("qps"),
        "rows": point.get("rows_mean"),
        "index_bytes": point.get("index_bytes"),
        "build_ms": point.get("build_ms"),
        "reached": bool(found["reached"]),
        "sweep": res.name,
        "point": point.get("label"),
        # repetitions of points: measured now, reused from other sweeps, kept from this one
        "measured": res.measured,
        "reused": res.reused,
        "kept": res.kept,
        "find_path": found["path"],
        # every value the find measured: what the plot draws per design
        "points": [
            {
                "value": p["settings"].get(design.find),
                "recall": p["index_recall"],
                "p95_ms": p["p95_ms"],
            }
            for p in res.points
            if (p["build"] or {}) == design.build and p["settings"]
        ],
    }
