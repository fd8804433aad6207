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

-- One row per point of a sweep: means over the repetitions measured so far, their spread, the
-- latency percentiles pooled over the repetitions (p95_sd: the spread of each repetition's p95), and
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
          FROM m GROUP BY m.point),
    -- one definition of a point's percentiles: nearest rank over the latencies of all its
    -- repetitions pooled (as the stage report computes them); the mean of the repetitions' own
    -- percentiles only where a repetition's timings are gone (its run deleted)
    pooled AS (
        SELECT sp.point, count(DISTINCT sp.repetition) AS reps, array_agg(t.latency_ms) AS lat
          FROM sp JOIN pgeval.query_timing t ON t.run_id = sp.run_id
         GROUP BY sp.point),
    pct AS (
        SELECT a.point,
               CASE WHEN pl.reps = a.reps THEN pgeval.nearest_rank(pl.lat, 0.5) ELSE a.p50 END AS p50,
               CASE WHEN pl.reps = a.reps THEN pgeval.nearest_rank(pl.lat, 0.95) ELSE a.p95 END
                   AS p95,
               CASE WHEN pl.reps = a.reps THEN pgeval.nearest_rank(pl.lat, 0.99) ELSE a.p99 END
                   AS p99
          FROM agg a LEFT JOIN pooled pl ON pl.point = a.point)
    SELECT a.point, a.label, a.settings, a.build, a.reps, a.reused, a.ir, a.ir_sd, a.ir_min,
           a.ir_max, pct.p50, pct.p95, a.p95_sd, pct.p99, a.qps, a.qps_sd, a.rows_mean, a.rows_min,
           a.build_ms, a.index_bytes, mj.metrics, mj.metrics_sd, a.config_hash,
           a.ir IS NOT NULL AND pct.p95 IS NOT NULL AND NOT EXISTS (
               SELECT 1 FROM agg b JOIN pct pb ON pb.point = b.point
                WHERE b.point <> a.point AND b.ir IS NOT NULL AND pb.p95 IS NOT NULL
                  AND b.ir >= a.ir AND pb.p95 <= pct.p95 AND (b.ir > a.ir OR pb.p95 < pct.p95))
      FROM agg a JOIN pct ON pct.point = a.point LEFT JOIN mj ON mj.point = a.point
     ORDER BY a.point
$$;

-- How far a point's index recall may move with another sample of as many queries: each query's
-- index recall (pgeval.index_recall_per_query), averaged over the point's repetitions first (a
-- repetition runs the same queries again: not more of them); margin95 = 1.96 * sample stddev /
-- sqrt(queries), the half-width of the normal 95 % interval of the mean (an approximation: a
-- per-query recall takes K + 1 values). A rebuild of a random index (HNSW's levels, IVFFlat's
-- k-means sample) moves it too; docs/advise.md measures both.
CREATE OR REPLACE FUNCTION pgeval.sweep_point_recall_margin(p_sweep bigint, p_point integer,
                                                            p_k integer DEFAULT 10)
RETURNS TABLE (queries bigint, recall_sd double precision, margin95 double precision)
LANGUAGE sql STABLE AS $$
    WITH per_query AS (
        SELECT pq.query_id, avg(pq.hits::float8 / pq.denom) AS recall
          FROM pgeval.sweep_point sp
          JOIN pgeval.run r ON r.run_id = sp.run_id
         CROSS JOIN LATERAL pgeval.index_recall_per_query(r.experiment_id, p_k, r.repetition) pq
         WHERE sp.sweep_id = p_sweep AND sp.point = p_point AND pq.run_id = sp.run_id
         GROUP BY pq.query_id)
    SELECT count(*), stddev_samp(recall), 1.96 * stddev_samp(recall) / sqrt(count(*))
      FROM per_query
$$;

-- The points of several sweeps of one grid (one sweep per group of a target, `sweep --group-by`),
-- each as its worst group sees it: the lowest mean index recall, the highest mean p95 and spread.
-- A point counts only where every sweep measured it. With one sweep: that sweep's points.
CREATE OR REPLACE FUNCTION pgeval.sweep_worst_group(p_sweeps bigint[])
RETURNS TABLE (point integer, label text, settings jsonb, index_recall double precision,
               p95_ms double precision, p95_sd double precision)
LANGUAGE sql STABLE AS $$
    SELECT s.point, min(s.label), (array_agg(s.settings))[1], min(s.index_recall),
           max(s.p95_ms), max(s.p95_sd)
      FROM unnest(p_sweeps) u(sweep_id)
     CROSS JOIN LATERAL pgeval.sweep_summary(u.sweep_id) s
     GROUP BY s.point
    HAVING count(s.index_recall) = cardinality(p_sweeps)
       AND count(s.p95_ms) = cardinality(p_sweeps)
$$;

-- Per sweep of p_sweeps (one per group) and point: queries, mean index recall, mean p95, and the
-- short lists: the most queries of one repetition whose list held fewer rows than exact search
-- found (pgeval.index_recall's short_queries).
CREATE OR REPLACE FUNCTION pgeval.sweep_group_points(p_sweeps bigint[])
RETURNS TABLE (sweep_id bigint, point integer, label text, settings jsonb, queries integer,
               index_recall double precision, p95_ms double precision, short_queries bigint,
               plan_mode text, served_by text, served_at_limit text)
LANGUAGE sql STABLE AS $$
    SELECT u.sweep_id, s.point, s.label, s.settings,
           (SELECT max(sp.queries) FROM pgeval.sweep_point sp
             WHERE sp.sweep_id = u.sweep_id AND sp.point = s.point),
           s.index_recall, s.p95_ms,
           (SELECT max(ir.short_queries)
              FROM pgeval.sweep_point sp
              JOIN pgeval.sweep w ON w.sweep_id = sp.sweep_id
              JOIN pgeval.run r ON r.run_id = sp.run_id
             CROSS JOIN LATERAL pgeval.index_recall(r.experiment_id, w.k, r.repetition) ir
             WHERE sp.sweep_id = u.sweep_id AND sp.point = s.point AND ir.run_id = sp.run_id),
           -- the planner's own plan where it was measured (a group's sweep): its mode and what
           -- served the statement (the ANN index, or the path the planner took instead)
           (SELECT min(r.params -> 'plan' ->> 'mode') FROM pgeval.sweep_point sp
              JOIN pgeval.run r ON r.run_id = sp.run_id
             WHERE sp.sweep_id = u.sweep_id AND sp.point = s.point),
           (SELECT string_agg(DISTINCT r.params -> 'plan' ->> 'served_by', '; ')
              FROM pgeval.sweep_point sp JOIN pgeval.run r ON r.run_id = sp.run_id
             WHERE sp.sweep_id = u.sweep_id AND sp.point = s.point),
           -- the application's LIMIT K where the planner serves it otherwise than the LIMIT
           -- measured (a sampled row's K + 1): 'K: what serves it' (stages/planner_plan.py)
           (SELECT string_agg(DISTINCT (r.params -> 'plan' -> 'at_limit' ->> 'limit') || ': '
                              || (r.params -> 'plan' -> 'at_limit' ->> 'served_by'), '; ')
              FROM pgeval.sweep_point sp JOIN pgeval.run r ON r.run_id = sp.run_id
             WHERE sp.sweep_id = u.sweep_id AND sp.point = s.point)
      FROM unnest(p_sweeps) u(sweep_id)
     CROSS JOIN LATERAL pgeval.sweep_summary(u.sweep_id) s
$$;

-- The cheapest point whose mean index recall reaches p_target_recall; no row when none does.
-- Cost is the work the point's settings ask of the index (p_work: the stage kind's work settings,
-- most significant first, e.g. {hnsw.ef_search}; lower is cheaper, compared as numbers): measured
-- latency is noise around it, so it decides only between points of equal work (another
-- iterative_scan mode, another build), and only when the difference in mean p95 is larger than
-- the spread of either (else the first in grid order). Without work settings in the grid, the
-- lowest mean p95 (ties: higher recall, then grid order). why says which rule chose the point.
CREATE OR REPLACE FUNCTION pgeval.sweeps_recommendation(p_sweeps bigint[],
                                                        p_target_recall double precision,
                                                        p_work text[] DEFAULT '{}')
RETURNS TABLE (point integer, label text, index_recall double precision, p95_ms double precision,
               why text)
LANGUAGE sql STABLE AS $$
    WITH pts AS (SELECT * FROM pgeval.sweep_worst_group(p_sweeps)),
    ok AS (
        SELECT s.point, s.label, s.index_recall, s.p95_ms, coalesce(s.p95_sd, 0) AS sd,
               ARRAY(SELECT CASE WHEN s.settings->>u.w ~ '^\s*-?[0-9]+(\.[0-9]+)?\s*$'
                                 THEN (s.settings->>u.w)::numeric END
                       FROM unnest(coalesce(p_work, '{}')) WITH ORDINALITY u(w, o)
                      ORDER BY u.o) AS work,
               (SELECT string_agg(u.w || '=' || (s.settings->>u.w), ', ' ORDER BY u.o)
                  FROM unnest(coalesce(p_work, '{}')) WITH ORDINALITY u(w, o)
                 WHERE s.settings ? u.w) AS work_text
          FROM pts s
         WHERE pgeval.reaches(s.index_recall, p_target_recall) AND s.p95_ms IS NOT NULL),
    varies AS (SELECT coalesce(bool_or(ok.work_text IS NOT NULL), false) AS v FROM ok),
    least AS (SELECT ok.* FROM ok WHERE ok.work = (SELECT min(o2.work) FROM ok o2)),
    first_in_grid AS (SELECT * FROM least ORDER BY least.point LIMIT 1),
    fastest AS (SELECT * FROM least ORDER BY least.p95_ms, least.index_recall DESC, least.point
                LIMIT 1),
    by_work AS (
        SELECT CASE WHEN g.p95_ms - f.p95_ms > greatest(f.sd, g.sd) THEN f.point ELSE g.point END
                   AS point,
               (SELECT count(*) FROM least) AS equal_work,
               g.p95_ms - f.p95_ms > greatest(f.sd, g.sd) AS faster,
               g.work_text
          FROM first_in_grid g CROSS JOIN fastest f),
    by_latency AS (SELECT * FROM ok ORDER BY ok.p95_ms, ok.index_recall DESC, ok.point LIMIT 1),
    base AS (
    SELECT ok.point, ok.label, ok.index_recall, ok.p95_ms, ok.work,
           CASE WHEN (SELECT v FROM varies) THEN
               'least work: ' || coalesce(w.work_text, ok.label) || ' is the smallest setting '
               || 'reaching recall ' || p_target_recall
               || CASE WHEN cardinality(p_sweeps) > 1 THEN ' in every group' ELSE '' END
               || CASE WHEN w.equal_work > 1 AND w.faster
                       THEN '; of the points of equal work, the fastest by more than its p95 '
                            || 'spread'
                       WHEN w.equal_work > 1
                       THEN '; the points of equal work differ in p95 by less than its spread: '
                            || 'the first in the grid'
                       ELSE '' END
           ELSE 'lowest p95 of the points reaching recall ' || p_target_recall
                || CASE WHEN cardinality(p_sweeps) > 1 THEN ' in every group' ELSE '' END
                || ' (no work setting varies)' END AS why
      FROM ok LEFT JOIN by_work w ON true
     WHERE ok.point = CASE WHEN (SELECT v FROM varies) THEN w.point
                           ELSE (SELECT point FROM by_latency) END),
    -- never a point beaten beyond noise on both axes (one sweep, its points' p95 intervals,
    -- pgeval.sweep_point_p95_interval): a point reaching at least its recall whose whole p95
    -- interval lies under the chosen one's, in as many rounds, is recommended instead (the
    -- least work of those)
    iv AS (SELECT ok.point, i.low, i.high,
                  (SELECT count(*) FROM pgeval.sweep_point sp
                    WHERE sp.sweep_id = p_sweeps[1] AND sp.point = ok.point) AS reps
             FROM ok
            CROSS JOIN LATERAL pgeval.sweep_point_p95_interval(p_sweeps[1], ok.point) i
            WHERE cardinality(p_sweeps) = 1),
    dom AS (SELECT o.point, o.label, o.index_recall, o.p95_ms, bi.low AS b_low, oi.high AS o_high
              FROM base b JOIN iv bi ON bi.point = b.point
              JOIN ok o ON o.point <> b.point AND pgeval.reaches(o.index_recall, b.index_recall)
              -- (measured in as many rounds at least: a round measured at another time is
              -- another load, which no interval within a round covers)
              JOIN iv oi ON oi.point = o.point AND oi.high < bi.low AND oi.reps >= bi.reps
             ORDER BY o.work, o.p95_ms, o.point LIMIT 1)
    SELECT d.point, d.label, d.index_recall, d.p95_ms,
           b.label || ' reaches recall ' || p_target_recall || ' with less work but is beaten '
           || 'beyond noise on both axes by ' || d.label || ': recall ' || round(d.index_recall::numeric, 4)
           || ' >= ' || round(b.index_recall::numeric, 4) || ', p95 interval under '
           || round(d.o_high::numeric, 3) || ' ms against over ' || round(d.b_low::numeric, 3)
           || ' ms'
      FROM dom d CROSS JOIN base b
    UNION ALL
    SELECT b.point, b.label, b.index_recall, b.p95_ms, b.why FROM base b
     WHERE NOT EXISTS (SELECT 1 FROM dom)
$$;

-- One sweep's recommendation: pgeval.sweeps_recommendation of that sweep alone.
CREATE OR REPLACE FUNCTION pgeval.sweep_recommendation(p_sweep bigint,
                                                       p_target_recall double precision,
                                                       p_work text[] DEFAULT '{}')
RETURNS TABLE (point integer, label text, index_recall double precision, p95_ms double precision,
               why text)
LANGUAGE sql STABLE AS $$
    SELECT * FROM pgeval.sweeps_recommendation(ARRAY[p_sweep], p_target_recall, p_work)
$$;
