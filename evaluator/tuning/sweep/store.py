"""pgeval.sweep and pgeval.sweep_point: open (or resume) a sweep, find points already measured
under the same config hash, record measured points and fill in their values from the SQL API
(pgeval.index_recall, pgeval.summary, pgeval.run_latency, pgeval.run_throughput)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ...core.db import first_row
from ...core.errors import Conflict, NotFound, param
from .changed import archive, changed_line, changes, configuration_change, restore

# the sweep's identity: a resumed sweep must agree on these
IDENTITY = ("testset_id", "target", "stage", "grid", "settings", "k", "depth", "concurrency")


@dataclass
class SweepRow:
    sweep_id: int
    name: str
    experiment_id: int
    resumed: bool
    # the configuration changed since the sweep of this name was measured: its points were kept
    # as sweep ``previous["sweep"]``, and this one line says what changed
    previous: dict | None = None


def _commit(conn: Any) -> None:
    if not conn.autocommit:
        conn.commit()


def open_sweep(
    conn: Any,
    *,
    name: str,
    testset_id: int,
    target: str,
    stage: str,
    grid: dict,
    settings: dict,
    k: int,
    depth: int,
    repeat: int,
    concurrency: int,
    target_recall: float,
    fresh: bool,
    experiment_config: dict,
    fingerprint: dict,
    config_hash: str,
) -> SweepRow:
    """Create the sweep and its experiment, or resume the sweep of that name (``fresh``: delete
    it and its runs first)."""
    want = dict(zip(IDENTITY, (testset_id, target, stage, grid, settings, k, depth, concurrency)))
    row, previous = _existing(conn, name, want, fresh, fingerprint, config_hash)
    experiment = (name, testset_id, target, experiment_config, fingerprint, config_hash)
    if row is not None:
        return _resume(conn, row, name, repeat, target_recall, experiment)
    exp_id = _experiment(conn, *experiment)
    jsonb = {"grid": json.dumps(grid), "settings": json.dumps(settings)}
    more = {"name": name, "experiment_id": exp_id, "repeat": repeat, "target_recall": target_recall}
    sweep_id = _insert(conn, "sweep", {**want, **jsonb, **more}, returning="sweep_id")
    _commit(conn)
    return SweepRow(sweep_id, name, exp_id, False, previous)


def _existing(
    conn: Any, name: str, want: dict, fresh: bool, fingerprint: dict, config_hash: str
) -> Any:
    """(the row of the sweep of this name to resume, else None; the earlier sweep's record when
    its configuration changed and its points were archived): ``fresh`` deletes it; another
    identity refuses; one that measured nothing under another configuration is deleted."""
    row = conn.execute(
        "SELECT sweep_id, experiment_id, testset_id, target, stage, grid, "
        "settings, k, depth, concurrency FROM pgeval.sweep WHERE name = %s",
        (name,),
    ).fetchone()
    if row is not None and fresh:
        _delete(conn, row)
        row = None
    changed = None  # the fingerprint the sweep of this name was measured under, when another
    if row is not None:
        have = dict(zip(IDENTITY, row[2:]))
        differ = [key for key in IDENTITY if have[key] != want[key]]
        if differ:
            raise Conflict(
                f"a sweep named '{name}' exists with another {', '.join(differ)} "
                f"(choose another {param('name')}, or {param('fresh', True)} to replace it)"
            )
        if row[1] is not None:
            changed = configuration_change(conn, row[1], config_hash)
    if row is None or changed is None:
        return row, None
    if not _has_points(conn, row[0]):
        # it measured nothing (refused, say, by the plan check): no configuration to keep
        _delete(conn, row)
        return None, None
    # a data change, a VACUUM, another server: the earlier points become history
    archived = archive(conn, row[0], row[1], name)
    found = changes(changed, fingerprint)
    return None, {
        "sweep": archived,
        "changes": found,
        "message": changed_line(name, archived, found),
    }


@contextmanager
def discarded_when_empty(conn: Any, row: SweepRow) -> Iterator[None]:
    """A sweep this command created, gone when the block fails before it stored a point
    (refused, failed, interrupted): its row, experiment and exact runs deleted and the earlier
    sweep it archived (a configuration changed) named again as it was, so that `pgeval run
    list` and the sweep names read as before the command. A resumed sweep stays."""
    try:
        yield
    except BaseException:
        if not row.resumed:
            try:
                if conn.info.transaction_status != 0:
                    conn.rollback()
                if not _has_points(conn, row.sweep_id):
                    _delete(conn, (row.sweep_id, row.experiment_id))
                    if row.previous is not None:
                        restore(conn, row.previous["sweep"], row.name)
                    _commit(conn)
            except Exception:  # noqa: BLE001 - the sweep's own error is the one to raise
                pass
        raise


def _delete(conn: Any, row: Any) -> None:
    conn.execute("DELETE FROM pgeval.experiment WHERE experiment_id = %s", (row[1],))
    conn.execute("DELETE FROM pgeval.sweep WHERE sweep_id = %s", (row[0],))


def _resume(
    conn: Any, row: Any, name: str, repeat: int, target_recall: float, experiment: tuple
) -> SweepRow:
    """The sweep of this name, running again (its experiment created when it had none)."""
    exp_id = row[1]
    if exp_id is None:
        exp_id = _experiment(conn, *experiment)
    conn.execute(
        "UPDATE pgeval.sweep SET status = 'running', repeat = greatest(repeat, %s), "
        "target_recall = %s, experiment_id = %s, finished_at = NULL "
        "WHERE sweep_id = %s",
        (repeat, target_recall, exp_id, row[0]),
    )
    conn.execute(
        "UPDATE pgeval.experiment SET status = 'running', finished_at = NULL "
        "WHERE experiment_id = %s",
        (exp_id,),
    )
    _commit(conn)
    return SweepRow(row[0], name, exp_id, True)


def _has_points(conn: Any, sweep_id: int) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM pgeval.sweep_point WHERE sweep_id = %s LIMIT 1", (sweep_id,)
        ).fetchone()
        is not None
    )


def _experiment(
    conn: Any,
    name: str,
    testset_id: Any,
    target: Any,
    config: Any,
    fingerprint: Any,
    config_hash: Any,
) -> int:
    if conn.execute("SELECT 1 FROM pgeval.experiment WHERE name = %s", (name,)).fetchone():
        raise Conflict(
            f"an experiment named '{name}' exists that is not a sweep (choose another {param('name')})"
        )
    return conn.execute(
        "INSERT INTO pgeval.experiment (name, testset_id, target, config, config_hash, "
        "fingerprint) VALUES (%s, %s, %s, %s, %s, %s) RETURNING experiment_id",
        (name, testset_id, target, json.dumps(config), config_hash, json.dumps(fingerprint)),
    ).fetchone()[0]


def measured(conn: Any, sweep_id: int) -> dict[tuple[int, int], str]:
    """(point, repetition) -> config hash of the points this sweep already holds."""
    return {
        (p, r): h
        for p, r, h in conn.execute(
            "SELECT point, repetition, config_hash FROM pgeval.sweep_point WHERE sweep_id = %s",
            (sweep_id,),
        ).fetchall()
    }


def find_elsewhere(conn: Any, sweep_id: int, config_hash: str, repetition: int) -> dict | None:
    """A point measured by another sweep under the same config hash and repetition."""
    return first_row(
        conn,
        "SELECT sp.* FROM pgeval.sweep_point sp JOIN pgeval.run r USING (run_id) "
        "WHERE sp.config_hash = %s AND sp.repetition = %s AND sp.sweep_id <> %s "
        "AND r.status = 'complete' ORDER BY sp.reused_from IS NOT NULL, sp.measured_at DESC, "
        "sp.run_id DESC LIMIT 1",
        (config_hash, repetition, sweep_id),
    )


VALUES = (
    "run_id",
    "index_recall",
    "metrics",
    "queries",
    "rows_mean",
    "rows_min",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "qps",
    "concurrency",
    "build_ms",
    "index_bytes",
    "measured_at",
)


def copy_point(conn: Any, sweep_id: int, point: Any, repetition: int, src: dict) -> None:
    """``point``'s repetition stored with the values measured in ``src`` (a stored point)."""
    _insert_point(
        conn,
        sweep_id,
        point,
        repetition,
        config_hash=src["config_hash"],
        reused_from=src["reused_from"] or src["sweep_id"],
        **{
            c: json.dumps(src[c]) if c == "metrics" and src[c] is not None else src[c]
            for c in VALUES
        },
    )


def insert_point(
    conn: Any,
    sweep_id: int,
    point: Any,
    repetition: int,
    config_hash: str,
    run_id: int,
    *,
    concurrency: int = 1,
    qps: float | None = None,
    build: dict | None = None,
) -> None:
    build = build or {}
    _insert_point(
        conn,
        sweep_id,
        point,
        repetition,
        config_hash=config_hash,
        run_id=run_id,
        concurrency=concurrency,
        qps=qps,
        build_ms=build.get("build_ms"),
        index_bytes=build.get("index_bytes"),
    )


def _insert_point(conn: Any, sweep_id: int, point: Any, repetition: int, **values: Any) -> None:
    """One row of pgeval.sweep_point: ``point``'s repetition with ``values``, committed."""
    row = {
        "sweep_id": sweep_id,
        "point": point.number,
        "repetition": repetition,
        "label": point.label,
        "settings": json.dumps(point.settings),
        "build": json.dumps(point.build),
        **values,
    }
    _insert(conn, "sweep_point", row)
    _commit(conn)


def _insert(conn: Any, table: str, row: dict, returning: str | None = None) -> Any:
    """INSERT ``row`` (column -> value) into ``pgeval.table``; the ``returning`` column's value."""
    from psycopg import sql

    back = (
        sql.SQL("")
        if returning is None
        else sql.SQL(" RETURNING {}").format(sql.Identifier(returning))
    )
    cur = conn.execute(
        sql.SQL("INSERT INTO {} ({}) VALUES ({}){}").format(
            sql.Identifier("pgeval", table),
            sql.SQL(", ").join(map(sql.Identifier, row)),
            sql.SQL(", ").join(sql.Placeholder() * len(row)),
            back,
        ),
        list(row.values()),
    )
    return None if returning is None else cur.fetchone()[0]


def complete_run(conn: Any, experiment_id: int, name: str) -> int | None:
    row = conn.execute(
        "SELECT run_id, status FROM pgeval.run WHERE name = %s AND experiment_id = %s",
        (name, experiment_id),
    ).fetchone()
    if row is None:
        return None
    if row[1] != "complete":  # left by an interrupted sweep: measured again
        conn.execute("DELETE FROM pgeval.run WHERE run_id = %s", (row[0],))
        _commit(conn)
        return None
    return row[0]


def fill(conn: Any, sweep_id: int, k: int, measures: list[str]) -> int:
    """Compute the values of this sweep's points that have none yet; returns how many."""
    from ...measure import latency, metrics

    rows = conn.execute(
        "SELECT sp.point, sp.repetition, sp.run_id, r.experiment_id, r.repetition, sp.qps "
        "FROM pgeval.sweep_point sp JOIN pgeval.run r USING (run_id) "
        "WHERE sp.sweep_id = %s AND sp.metrics IS NULL AND r.status = 'complete'",
        (sweep_id,),
    ).fetchall()
    recall: dict[tuple[int, int], dict[int, float]] = {}
    for point, rep, run_id, exp_id, run_rep, qps in rows:
        key = (exp_id, run_rep)
        if key not in recall:
            recall[key] = {
                r[0]: r[1]
                for r in conn.execute(
                    "SELECT run_id, index_recall FROM pgeval.index_recall(%s, %s, %s)",
                    (exp_id, k, run_rep),
                ).fetchall()
            }
        values = metrics.summary(conn, run_id, measures) if measures else {}
        lat = latency.percentiles(conn, run_id)
        n, rows_mean, rows_min, _, single_qps = conn.execute(
            "SELECT * FROM pgeval.run_throughput(%s)", (run_id,)
        ).fetchone()
        conn.execute(
            "UPDATE pgeval.sweep_point SET index_recall = %s, metrics = %s, queries = %s, "
            "rows_mean = %s, rows_min = %s, p50_ms = %s, p95_ms = %s, p99_ms = %s, qps = %s "
            "WHERE sweep_id = %s AND point = %s AND repetition = %s",
            (
                recall[key].get(run_id),
                json.dumps(values),
                n,
                rows_mean,
                rows_min,
                lat.get("p50_ms"),
                lat.get("p95_ms"),
                lat.get("p99_ms"),
                qps if qps is not None else single_qps,
                sweep_id,
                point,
                rep,
            ),
        )
    _commit(conn)
    return len(rows)


def finish(conn: Any, sweep_id: int, experiment_id: int | None, status: str) -> None:
    if conn.info.transaction_status != 0:
        conn.rollback()
    conn.execute(
        "UPDATE pgeval.sweep SET status = %s, finished_at = now() WHERE sweep_id = %s",
        (status, sweep_id),
    )
    if experiment_id is not None:
        conn.execute(
            "UPDATE pgeval.experiment SET status = %s, finished_at = now() "
            "WHERE experiment_id = %s",
            ("complete" if status == "complete" else "failed", experiment_id),
        )
    _commit(conn)


def resolve(conn: Any, name: str) -> dict:
    row = first_row(
        conn,
        "SELECT s.*, t.name AS testset FROM pgeval.sweep s "
        "JOIN pgeval.testset t USING (testset_id) WHERE s.name = %s",
        (name,),
    )
    if row is None:
        raise NotFound(f"no sweep named '{name}' (see `pgeval sweep --list`)")
    return row


# one sweep's points (pgeval.sweep_summary) with the index their runs' plans used, where the
# planner's own plan was measured (stages/planner_plan.py) its mode, what served it and what
# serves the application's LIMIT if otherwise, and the p95's interval (sweep_point_p95_interval)
def setting_interval(
    conn: Any, sweep_id: int, setting: str, target: float, k: int, points: list[int]
) -> dict:
    """The least value of ``setting`` among ``points`` reaching ``target``, with its 95 %
    interval over resamples of the queries (SQL's pgeval.sweep_setting_interval): ``low``,
    ``high`` (None: above every value measured), ``resamples``, ``unreached``."""
    row = conn.execute(
        "SELECT * FROM pgeval.sweep_setting_interval(%s, %s, %s, %s, %s)",
        (sweep_id, setting, target, k, points),
    ).fetchone()
    low, high, resamples, unreached = row
    return {
        "level": 0.95,
        "low": None if low is None else int(low),
        "high": None if high is None else int(high),
        "resamples": resamples,
        "unreached": unreached,
    }


def recommendation(
    conn: Any, sweep_id: int, target_recall: float, work: tuple[str, ...] = ()
) -> dict | None:
    """The point to recommend by pgeval.sweep_recommendation's cost rule: least work (``work``:
    the stage kind's work settings, most significant first), latency only between points of
    equal work and beyond its spread; ``why`` names the rule that chose it."""
    return first_row(
        conn,
        "SELECT * FROM pgeval.sweep_recommendation(%s, %s, %s)",
        (sweep_id, target_recall, list(work)),
    )
