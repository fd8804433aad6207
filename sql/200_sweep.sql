-- Parameter sweeps (`pgeval sweep`, tables pgeval.sweep / pgeval.sweep_point).
--
-- A point's values are measured per repetition (index recall from pgeval.index_recall, qrels
-- metrics from pgeval.summary, latency percentiles from pgeval.run_latency, throughput below);
-- a sweep reports, per point, the mean over its repetitions with the spread (sample standard
-- deviation, min, max), marks the Pareto front of recall against p95 latency, and recommends the
-- cheapest point that reaches the target recall.

-- Rows returned and single-client throughput of a run, from its per-query timings:
-- qps = timed queries / (sum of their latencies in seconds) — one client, back to back.
CREATE OR REPLACE FUNCTION pgeval.run_throughput(p_run bigint)
RETURNS TABLE (queries bigint, rows_mean double precision, rows_min integer,
               total_ms double precision, qps double precision)
LANGUAGE sql STABLE AS $$
    SELECT count(*), avg(t.rows_returned)::float8, min(t.rows_returned), sum(t.latency_ms),
           CASE WHEN sum(t.latency_ms) > 0 THEN count(*) * 1000.0 / sum(t.latency_ms) END
      FROM pgeval.query_timing t
     WHERE t.run_id = p_run
$$;

-- One row per point of a sweep: means over the repetitions measured so far, their spread, and
-- whether the point is on the Pareto front (no other point has index recall >= and p95 <= with
-- one of them strictly better). metrics / metrics_sd: measure -> mean / sample stddev.
CREATE OR REPLACE FUNCTION pgeval.sweep_summary(p_sweep bigint)
RETURNS TABLE (point integer, label text, settings jsonb, build jsonb, repetitions bigint,
               reused bigint, index_recall double precision, index_recall_sd double precision,
               index_recall_min double precision, index_recall_max double precision,
               p50_ms double precision, p95_ms double precision, p95_sd double precision,
               p99_ms double precision, qps double precision, qps_sd double precision,
               rows_mean double precision, rows_min integer, build_ms double precision,
               index_bytes bigint, metrics jsonb, metrics_sd jsonb, config_hash text,
               pareto boolean)
LANGUAGE sql STABLE AS $$
    WITH sp AS (SELECT * FROM pgeval.sweep_point s WHERE s.sweep_id = p_sweep),
    agg AS (
        SELECT sp.point, min(sp.label) AS label, (array_agg(sp.settings))[1] AS settings,
               (array_agg(sp.build))[1] AS build, count(*) AS reps,
               count(*) FILTER (WHERE sp.reused_from IS NOT NULL) AS reused,
               avg(sp.index_recall) AS ir, stddev_samp(sp.index_recall) AS ir_sd,
               min(sp.index_recall) AS ir_min, max(sp.index_recall) AS ir_max,
               avg(sp.p50_ms) AS p50, avg(sp.p95_ms) AS p95, stddev_samp(sp.p95_ms) AS p95_sd,
               avg(sp.p99_ms) AS p99, avg(sp.qps) AS qps, stddev_samp(sp.qps) AS qps_sd,
               avg(sp.rows_mean) AS rows_mean, min(sp.rows_min) AS rows_min,
               avg(sp.build_ms) AS build_ms, max(sp.index_bytes) AS index_bytes,
               min(sp.config_hash) AS config_hash
          FROM sp GROUP BY sp.point),
    m AS (
        SELECT sp.point, e.key, avg(e.value::float8) AS v, stddev_samp(e.value::float8) AS sd
          FROM sp CROSS JOIN LATERAL jsonb_each_text(coalesce(sp.metrics, '{}')) e
         GROUP BY sp.point, e.key),
    mj AS (
        SELECT m.point, jsonb_object_agg(m.key, m.v) AS metrics,
               jsonb_object_agg(m.key, m.sd) AS metrics_sd
          FROM m GROUP BY m.point)
    SELECT a.point, a.label, a.settings, a.build, a.reps, a.reused, a.ir, a.ir_sd, a.ir_min,
           a.ir_max, a.p50, a.p95, a.p95_sd, a.p99, a.qps, a.qps_sd, a.rows_mean, a.rows_min,
           a.build_ms, a.index_bytes, mj.metrics, mj.metrics_sd, a.config_hash,
           a.ir IS NOT NULL AND a.p95 IS NOT NULL AND NOT EXISTS (
               SELECT 1 FROM agg b
                WHERE b.point <> a.point AND b.ir IS NOT NULL AND b.p95 IS NOT NULL
                  AND b.ir >= a.ir AND b.p95 <= a.p95 AND (b.ir > a.ir OR b.p95 < a.p95))
      FROM agg a LEFT JOIN mj ON mj.point = a.point
     ORDER BY a.point
$$;

-- The cheapest point (lowest mean p95 latency; ties: higher recall, then grid order) whose mean
-- index recall reaches p_target_recall; no row when none does.
CREATE OR REPLACE FUNCTION pgeval.sweep_recommendation(p_sweep bigint,
                                                       p_target_recall double precision)
RETURNS TABLE (point integer, label text, index_recall double precision, p95_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT s.point, s.label, s.index_recall, s.p95_ms
      FROM pgeval.sweep_summary(p_sweep) s
     WHERE s.index_recall >= p_target_recall - 1e-12 AND s.p95_ms IS NOT NULL
     ORDER BY s.p95_ms, s.index_recall DESC, s.point
     LIMIT 1
$$;
