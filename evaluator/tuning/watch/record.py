"""A probe's row in pgeval.probe (migration 0009_probe) and its reading from pgeval.probe_history
(sql/210_probe.sql).

The row is written by one statement in one transaction once the probe is measured: its values
are copied on the server from pgeval.sweep_summary of the probe's one-point sweep, the index's
build identity and the data version from the point's run fingerprint; nothing is recomputed here.
An interrupted probe (Ctrl-C, kill -9) has written no row.
"""

from __future__ import annotations

import json
from typing import Any

from ...core.db import first_row

_INSERT = """
INSERT INTO pgeval.probe (target, group_key, stage, k, settings, query_source, queries, testset, recall,
                          p50_ms, p95_ms, p99_ms, rows_mean, timed_ms, table_rows, data_checksum,
                          index_name, index_build, index_state, table_stats, ground_truth, bounds,
                          wall_ms, sweep, config_hash)
SELECT %(target)s, %(group_key)s, %(stage)s, %(k)s, %(settings)s, %(query_source)s, t.queries, %(testset)s,
       s.index_recall, s.p50_ms, s.p95_ms, s.p99_ms, s.rows_mean, t.total_ms,
       (r.fingerprint -> 'data' ->> 'rows')::bigint, r.fingerprint -> 'data' ->> 'checksum',
       r.params ->> 'index',
       jsonb_build_object('oid', ix -> 'build' -> 'oid', 'filenode', ix -> 'build' -> 'filenode',
                          'method', ix -> 'method', 'options', ix -> 'options'),
       ix -> 'state', %(table_stats)s, %(ground_truth)s, %(bounds)s,
       %(wall_ms)s, %(sweep)s, s.config_hash
  FROM pgeval.sweep_summary(%(sweep_id)s) s
  JOIN pgeval.sweep_point sp ON sp.sweep_id = %(sweep_id)s AND sp.point = s.point
                            AND sp.repetition = 1
  JOIN pgeval.run r ON r.run_id = sp.run_id
  CROSS JOIN LATERAL (SELECT r.fingerprint -> 'indexes' -> (r.params ->> 'index') AS ix) i
  CROSS JOIN LATERAL pgeval.run_throughput(r.run_id) t
 WHERE s.point = 1
RETURNING probe_id, target, group_key, stage, k, settings, query_source, via, index_name,
          index_build
"""

# pgeval.probe_history's window (each probe against its build's first) is computed over the
# rows its filter leaves: the row's window partition named by its columns (which the planner
# pushes into the view: the same values) makes that a read of one index build's probes of one
# series, not of every probe ever made
_READ_SERIES = """
SELECT * FROM pgeval.probe_history
 WHERE probe_id = %s AND target = %s AND group_key IS NOT DISTINCT FROM %s AND stage = %s
   AND k = %s AND settings = %s AND query_source = %s AND via = %s
   AND index_name IS NOT DISTINCT FROM %s AND index_build IS NOT DISTINCT FROM %s
"""


def insert(results: Any, *, sweep_id: int, **values: Any) -> dict:
    """Write the probe's row and read it back from pgeval.probe_history, in one transaction;
    ``since``: per bound crossed, the time it has been crossed since (pgeval.probe_crossed_since).
    """
    params = {key: json.dumps(v) if isinstance(v, dict | list) else v for key, v in values.items()}
    with results.transaction():
        row = results.execute(_INSERT, {**params, "sweep_id": sweep_id}).fetchone()
        if row is None:
            from ...core.errors import PgevalError

            raise PgevalError("the probe measured nothing: no point in its sweep")
        history = read(results, row[0], series=row[1:])
    if not results.autocommit:
        results.commit()
    return history


def read(results: Any, probe_id: int, *, series: Any = None) -> dict:
    """The probe's row of pgeval.probe_history; ``series``: its (target, group_key, stage, k,
    settings, query_source, via, index_name, index_build) as stored: the view's window computed
    over its partition only."""
    if series is None:
        out = first_row(
            results, "SELECT * FROM pgeval.probe_history WHERE probe_id = %s", (probe_id,)
        )
    else:
        from psycopg.types.json import Jsonb

        values = [Jsonb(v) if isinstance(v, dict | list) else v for v in series]
        out = first_row(results, _READ_SERIES, (probe_id, *values))
    assert out is not None  # (the probe just recorded)
    out["since"] = {
        bound: results.execute(
            "SELECT pgeval.probe_crossed_since(%s, %s)", (probe_id, bound)
        ).fetchone()[0]
        for bound in out["crossed"] or []
    }
    return out


def set_advice(results: Any, probe_id: int, advice: dict) -> None:
    """The remedy measured after the row was written (its own transaction: the row is whole
    without it)."""
    with results.transaction():
        results.execute(
            "UPDATE pgeval.probe SET advice = %s WHERE probe_id = %s",
            (json.dumps(advice), probe_id),
        )
    if not results.autocommit:
        results.commit()


_FORGET = """
WITH old AS (
    SELECT t.testset_id, t.name, t.content_hash
      FROM pgeval.testset t
     WHERE t.source_format = 'queries' AND t.name <> %(current)s
       AND t.name IN (SELECT p.testset FROM pgeval.probe p
                       WHERE p.sweep = %(series)s AND p.testset IS NOT NULL)
       AND NOT EXISTS (SELECT 1 FROM pgeval.experiment e
                        WHERE e.testset_id = t.testset_id AND e.name <> ALL (%(ours)s))
       AND NOT EXISTS (SELECT 1 FROM pgeval.sweep s
                        WHERE s.testset_id = t.testset_id AND s.name <> ALL (%(ours)s))
       AND NOT EXISTS (SELECT 1 FROM pgeval.run r
                        WHERE r.testset_id = t.testset_id AND r.experiment_id IS NULL)
), gt AS (
    DELETE FROM pgeval.ground_truth g USING old
     WHERE g.target = %(target)s AND g.spec ->> 'queries' = old.content_hash
)
DELETE FROM pgeval.testset t USING old WHERE t.testset_id = old.testset_id RETURNING t.name
"""


def forget_old_queries(results: Any, *, series: str, target: str, current: str | None) -> list[str]:
    """The query sets earlier probes of this series drew, and their ground truths, once the
    sample moved on with the table (a sampled query set is stored per content: without this, an
    hourly probe of a changing table would keep one per data change). A query set another
    experiment, sweep or run uses is kept. Returns the names deleted."""
    if current is None:
        return []
    with results.transaction():
        names = [
            r[0]
            for r in results.execute(
                _FORGET,
                {
                    "current": current,
                    "series": series,
                    "target": target,
                    "ours": [series, f"{series}-remedy"],
                },
            ).fetchall()
        ]
    if not results.autocommit:
        results.commit()
    return names


def delete(results: Any, probe_ids: list[int]) -> int:
    """The rows ``probe_ids`` deleted (one transaction): a watch of groups of which one failed
    records none (tuning/watch/groups.py). Returns the rows deleted."""
    with results.transaction():
        n = results.execute(
            "DELETE FROM pgeval.probe WHERE probe_id = ANY(%s)", (list(probe_ids),)
        ).rowcount
    if not results.autocommit:
        results.commit()
    return int(n)
