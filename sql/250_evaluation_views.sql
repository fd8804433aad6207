-- Views a dashboard reads without a function signature (docs/sql.md "Views", beside
-- pgeval.probe_history in docs/watch.md): sweeps as `pgeval sweep` and pgeval.evaluate_recall
-- store them, experiments as `pgeval stage-report` shows them. Plain SQL over the stored rows
-- through the SQL API's own functions (no second definition of a measure); a role granted SELECT
-- on schema pgeval's tables and EXECUTE on its functions reads them. Filter on the leading
-- columns (sweep, target, experiment): every row is computed from the sweep's or experiment's
-- runs when read.

-- One row per point of every sweep: pgeval.sweep_summary (means over the repetitions, latency
-- percentiles pooled by nearest rank, the Pareto mark), the recall's 95 % margin
-- (pgeval.sweep_point_recall_margin at the sweep's K), the plan the point's runs recorded, and
-- who measured it (source: cli, or sql for pgeval.evaluate_recall).
CREATE OR REPLACE VIEW pgeval.sweep_point_history AS
SELECT w.sweep_id, w.name AS sweep, w.target, w.stage,
       -- a group's sweep (`sweep --group-by`, evaluate_recall's group_by): NAME/COLUMN=VALUE,
       -- its group as pgeval.probe_history gives it, {"COLUMN": "value"}
       (SELECT jsonb_build_object(g[1], g[2])
          FROM regexp_match(w.name, '/([^/=]+)=([^/]*)$') g) AS group_key,
       s.point, s.label, s.settings, w.settings AS sweep_settings, w.k,
       s.repetitions, s.index_recall AS recall, s.index_recall_sd AS recall_sd, m.margin95,
       s.p50_ms, s.p95_ms, s.p95_sd, s.p99_ms, s.qps, s.rows_mean, s.rows_min, m.queries,
       s.pareto, u.index, u.plan_mode, u.served_by, u.measured_at,
       CASE WHEN e.config ->> 'source' = 'pgeval.evaluate_recall' THEN 'sql' ELSE 'cli' END
           AS source,
       w.status, w.experiment_id
  FROM pgeval.sweep w
  LEFT JOIN pgeval.experiment e ON e.experiment_id = w.experiment_id
 CROSS JOIN LATERAL pgeval.sweep_summary(w.sweep_id) s
  LEFT JOIN LATERAL pgeval.sweep_point_recall_margin(w.sweep_id, s.point, w.k) m ON true
 CROSS JOIN LATERAL (
     SELECT min(r.params ->> 'index') AS index, min(r.params -> 'plan' ->> 'mode') AS plan_mode,
            string_agg(DISTINCT r.params -> 'plan' ->> 'served_by', '; ') AS served_by,
            max(sp.measured_at) AS measured_at
       FROM pgeval.sweep_point sp LEFT JOIN pgeval.run r ON r.run_id = sp.run_id
      WHERE sp.sweep_id = w.sweep_id AND sp.point = s.point) u;

COMMENT ON VIEW pgeval.sweep_point_history IS
    'One row per sweep point (pgeval sweep, pgeval.evaluate_recall): recall@k and its 95 % '
    'margin, p50/p95/p99, rows, plan, measured at (docs/sql.md)';

-- One row per experiment and stage: the stage report's measures (pgeval.index_recall_summary at
-- the experiment's K: its sweep's, else 10; pgeval.stage_latency; pgeval.stage_summary's
-- judgement metrics as {measure: mean}, NULL without judgements).
CREATE OR REPLACE VIEW pgeval.experiment_stage_history AS
SELECT x.experiment_id, x.name AS experiment, t.name AS testset, x.target, x.status,
       x.created_at, x.finished_at, s.label, s.stage, s.role, s."position", s.repetitions, kk.k,
       ir.index_recall, ir.recall_min AS index_recall_min, ir.recall_max AS index_recall_max,
       ir.short_queries AS index_recall_short_queries,
       lat.latency_ms[1] AS p50_ms, lat.latency_ms[2] AS p95_ms, lat.latency_ms[3] AS p99_ms,
       lat.timed_queries, lat.timing_boundary, lat.queries, lat.rows_mean, lat.rows_min,
       lat.rows_max, lat.short_queries, lat.depth, mj.metrics
  FROM pgeval.experiment x
  JOIN pgeval.testset t ON t.testset_id = x.testset_id
 CROSS JOIN LATERAL (SELECT coalesce((SELECT w.k FROM pgeval.sweep w
                                       WHERE w.experiment_id = x.experiment_id LIMIT 1), 10)
                                AS k) kk
 CROSS JOIN LATERAL (
     SELECT es.label, min(es.stage) AS stage, min(es.role) AS role,
            min(es."position") AS "position", count(*) AS repetitions
       FROM pgeval.experiment_stages(x.experiment_id) es GROUP BY es.label) s
  LEFT JOIN LATERAL (SELECT * FROM pgeval.index_recall_summary(x.experiment_id, kk.k) i
                      WHERE i.label = s.label) ir ON true
  LEFT JOIN LATERAL (SELECT * FROM pgeval.stage_latency(x.experiment_id) l
                      WHERE l.label = s.label) lat ON true
  LEFT JOIN LATERAL (
     SELECT jsonb_object_agg(ss.measure, ss.value) FILTER (WHERE ss.value IS NOT NULL)
                AS metrics
       FROM pgeval.stage_summary(x.experiment_id) ss WHERE ss.label = s.label) mj ON true;

COMMENT ON VIEW pgeval.experiment_stage_history IS
    'One row per experiment and stage: index recall@k, p50/p95/p99, rows returned, judgement '
    'metrics, as pgeval stage-report shows them (docs/sql.md)';
