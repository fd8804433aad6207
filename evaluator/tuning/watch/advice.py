"""What a probe says beyond its numbers: each bound crossed (and since when), what changed since the
first probe of the same index build, whether recall drifted while the build stayed the same, and
the remedy measured on the same queries (the smallest value of the work setting that reaches the
goal, found by `sweep --find`'s search; the exact ground truth is the probe's, reused) besides
``REINDEX INDEX CONCURRENTLY``. Every number comes from pgeval.probe_history."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timezone
from typing import TYPE_CHECKING, Any

from ...measure.operating_points import reaches

if TYPE_CHECKING:
    from ...core.db import Database
    from ..sweep import SweepConfig
    from ..sweep.session import Known
    from .config import WatchConfig


# a remedy measured on sampled rows through the index they are nodes of
SAMPLED = "; sampled rows: an upper bound for the application's queries"
# the server's counters of the table's writes since the build's first probe, and their words
COUNTED = (
    ("inserted_since_baseline", "inserted"),
    ("updated_since_baseline", "updated"),
    ("deleted_since_baseline", "deleted"),
)


def when(value: Any) -> str:
    """A time as people read it in a log line: ``2026-12-02 07:10:31 UTC``."""
    if value is None:
        return "?"
    if hasattr(value, "astimezone"):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return str(value)


def recall_goal(probe: dict) -> float | None:
    """The recall a remedy must reach when a recall bound was crossed (None: none was)."""
    crossed = set(probe.get("crossed") or [])
    bounds = probe.get("bounds") or {}
    goals = []
    if "min_recall" in crossed:
        goals.append(float(bounds["min_recall"]))
    if "max_drop" in crossed and probe.get("baseline_recall") is not None:
        goals.append(float(probe["baseline_recall"]) - float(bounds["max_drop"]))
    goal = max(goals, default=None)
    return None if goal is None or goal <= 0 else min(goal, 1.0)


def _n(value: Any) -> str:
    return f"{int(value):,}"


def changes(probe: dict) -> str | None:
    """The table's changes since the first probe of this index build, in words (None: this
    probe is that first one)."""
    if probe.get("baseline_at") is None or probe.get("baseline_at") == probe.get("probed_at"):
        return None
    parts = []
    if probe.get("rows_since_baseline"):
        parts.append(
            f"{int(probe['rows_since_baseline']):+,} rows ({_n(probe['baseline_rows'])} -> "
            f"{_n(probe['table_rows'])})"
        )
    counted = [f"{_n(probe[key])} {word}" for key, word in COUNTED if probe.get(key)]
    if counted:
        parts.append(", ".join(counted) + " (server counters)")
    what = "; ".join(parts) or "no row change"
    return (
        f"{what} since the first probe of "
        + (
            f"index build {probe['index_build_label']}"
            if probe.get("index_build_label")
            else "this series served without an ANN index"  # (the planner's plan: a btree)
        )
        + f" at {when(probe['baseline_at'])}"
    )


def crossed_lines(probe: dict) -> list[str]:
    """One line per bound crossed, naming it, its value, its limit and since when."""
    k, bounds, since = probe["k"], probe.get("bounds") or {}, probe.get("since") or {}
    lines = []
    for bound in probe.get("crossed") or []:
        if bound == "min_recall":
            text = f"recall@{k} {probe['recall']:.3f} < {bounds['min_recall']:g}"
        elif bound == "max_drop":
            text = (
                f"recall@{k} {probe['recall']:.3f} is {probe['recall_drop']:.3f} below "
                f"{probe['baseline_recall']:.3f}, the first probe of this index build "
                f"({when(probe['baseline_at'])}): more than --max-drop {bounds['max_drop']:g}"
            )
        else:
            text = f"p95 {probe['p95_ms']:.2f} ms > {bounds['max_p95_ms']:g} ms"
        lines.append(f"{text} since {when(since.get(bound))}")
    return lines


def drifted(probe: dict) -> bool:
    """Recall fell below the build's first probe while the build stayed and the table changed."""
    base, recall = probe.get("baseline_recall"), probe.get("recall")
    if base is None or recall is None or probe.get("baseline_at") == probe.get("probed_at"):
        return False
    changed = bool(probe.get("rows_since_baseline")) or any(probe.get(k) for k, _ in COUNTED)
    return not reaches(recall, base) and changed


def advice_lines(
    probe: dict, reindex: str | None, remedy: dict | None, rebuild: dict | None = None
) -> list[str]:
    out = []
    if drifted(probe):
        out.append(
            f"recall@{probe['k']} fell from {probe['baseline_recall']:.3f} to "
            f"{probe['recall']:.3f} with the index build unchanged while the table changed: "
            "the index no longer matches the data" + (f"; rebuild it: {reindex}" if reindex else "")
        )
    if remedy:
        out.append(remedy["line"])
    line = build_line(rebuild, probe) if reindex else None
    if line:
        out.append(line)
    return out


def reindex_statement(database: Database, probe: dict) -> str | None:
    """``REINDEX INDEX CONCURRENTLY schema.index`` for the probe's index (its oid, read on the
    knowledge base, printed as the server quotes it); None when it is gone."""
    oid = (probe.get("index_build") or {}).get("oid")
    if oid is None:
        return None
    with database.connect(results=False, read_only=True) as kb:
        row = kb.execute(
            "SELECT c.oid::regclass::text FROM pg_class c WHERE c.oid = %s", (int(oid),)
        ).fetchone()
        kb.rollback()
    return None if row is None else f"REINDEX INDEX CONCURRENTLY {row[0]};"


def remedy(
    database: Database,
    cfg: WatchConfig,
    sweep_cfg: SweepConfig,
    result: Any,
    goal: float,
    *,
    known: Known | None = None,
    on_warning: Callable[..., Any] | None = None,
) -> dict:
    """The smallest value of the work setting reaching ``goal`` on the probe's own queries,
    measured (bracketing then bisection, `sweep --find`'s search), and the rebuild statement."""
    from ...kinds import registry
    from ...testset.query_source import label
    from ..sweep.session import NOTHING_KNOWN, Callbacks, Session

    # the kind's first work setting is searched (hnsw-bq: bq.candidates), the probed value of
    # another kept fixed
    described = registry.kind(cfg.stage)
    setting = described.work_settings[0] if described is not None else result.setting
    fixed = {**sweep_cfg.settings, result.setting: result.value}
    found_cfg = replace(
        sweep_cfg,
        params=(),
        settings={k: v for k, v in fixed.items() if k.rpartition(":")[2] != setting},
        find=setting,
        find_max=cfg.remedy_max,
        target_recall=goal,
        name=f"{sweep_cfg.name}-remedy",
        fresh=True,
    )
    # (what the probe measured, known to its sweep, is known to this one: its data, its queries)
    calls = Callbacks(on_warning=on_warning)
    res = Session.run(database, found_cfg, known=known or NOTHING_KNOWN, callbacks=calls)
    found = res.finds[0] if res.finds else {}
    reindex = result.reindex
    k = cfg.k
    production = result.value if setting == result.setting else None
    out = {
        "goal": goal,
        "setting": setting,
        "production": production,
        "value": found.get("value"),
        "recall": found.get("recall"),
        "reached": bool(found.get("reached")),
        "tried": found.get("path") or [],
        "p95_ms": None,
        "reindex": reindex,
        "sweep": res.name,
        "queries": label(res.queries, held_out=not res.sampled),
    }
    if out["reached"]:
        point = res.operating_points.at(setting, out["value"])
        out["p95_ms"] = None if point is None else point.p95_ms
        p95 = "" if out["p95_ms"] is None else f", p95 {out['p95_ms']:.2f} ms"
        out["line"] = (
            f"measured on the same {result.probe.get('queries')} queries: "
            f"{setting}={out['value']} restores recall@{k} to {out['recall']:.3f} "
            f">= {goal:.3f}{p95} (production: {production or 'the stage default'})"
            + (SAMPLED if res.sampled else "")
        )
    else:
        best = found.get("best") or [None, None]
        others = [w for w in (described.work_settings if described else ()) if w != setting]
        out["line"] = (
            f"measured on the same {result.probe.get('queries')} queries: no {setting} "
            f"up to {found_cfg.find_max or 1000} reaches recall@{k} {goal:.3f} (best "
            f"{setting}={best[0]}: {(best[1] or 0):.3f}); what is left: "
            + (f"{', '.join(others)}, " if others else "")
            + "the index's build (`pgeval sweep --build`)"
            + (f", a rebuild ({reindex})" if reindex else "")
        )
    return out


_LAST_BUILD = """
SELECT s.name, sp.build_ms, sp.measured_at, (r.fingerprint -> 'data' ->> 'rows')::bigint
  FROM pgeval.sweep_point sp
  JOIN pgeval.sweep s USING (sweep_id)
  LEFT JOIN pgeval.run r ON r.run_id = sp.run_id
 WHERE s.target = %(target)s AND s.stage = %(stage)s AND sp.build_ms IS NOT NULL
   AND %(defaults)s::jsonb || sp.build = %(options)s::jsonb
 ORDER BY sp.measured_at DESC
 LIMIT 1
"""


def last_build(database: Database, probe: dict) -> dict | None:
    """The latest build sweep (`pgeval sweep --build`) of this target and stage that built the
    index's design (its options, defaults filled in): its build time and the rows it built on;
    None when no build sweep measured it."""
    import json

    from ...kinds import registry

    build = probe.get("index_build") or {}
    if not build.get("options") or not build.get("method"):
        return None
    defaults = registry.build_defaults(str(build["method"]))
    with database.connect() as results:
        row = results.execute(
            _LAST_BUILD,
            {
                "target": probe["target"],
                "stage": probe["stage"],
                "defaults": json.dumps({k: v for k, v in defaults.items() if v is not None}),
                "options": json.dumps(build["options"]),
            },
        ).fetchone()
        results.rollback()
    if row is None:
        return None
    return {"sweep": row[0], "build_ms": row[1], "measured_at": row[2], "rows": row[3]}


def build_line(found: dict | None, probe: dict) -> str | None:
    if not found:
        return None
    options = ", ".join(f"{k}={v}" for k, v in (probe["index_build"].get("options") or {}).items())
    rows = "" if found["rows"] is None else f" on {_n(found['rows'])} rows"
    now = probe.get("table_rows")
    return (
        f"the last build sweep built this design ({options}){rows} in "
        f"{found['build_ms'] / 1000:.2f} s (sweep {found['sweep']}, {when(found['measured_at'])})"
        + (f"; the table has {_n(now)} rows now" if now is not None else "")
    )
