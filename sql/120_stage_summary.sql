-- Side by side: the stages of an experiment (what `pgeval stage-report` shows above the loss
-- attribution). Repetitions: each repetition is a full run; a stage's value is the mean of its
-- repetitions' values, with their spread (METRICS.md "System-level values").

-- Judgement-based metrics of every stage (pgeval.summary of each run), mean over repetitions
-- (all when p_repetition is NULL) with min, max and sample standard deviation; p_judged_only:
-- each list measured on its judged chunks only (trec_eval's -J).
CREATE OR REPLACE FUNCTION pgeval.stage_summary(p_experiment bigint,
                                                p_measures text[] DEFAULT pgeval.default_measures(),
                                                p_rel integer DEFAULT 1,
                                                p_repetition integer DEFAULT NULL,
                                                p_judged_only boolean DEFAULT false)
RETURNS TABLE (label text, stage text, role text, "position" integer, measure text, ord integer,
               value double precision, value_min double precision, value_max double precision,
               value_stddev double precision, repetitions bigint, n_valid bigint)
LANGUAGE sql STABLE AS $$
    SELECT s.label, min(s.stage), min(s.role), min(s."position"), m.measure, m.ord,
           avg(m.value), min(m.value), max(m.value), stddev_samp(m.value), count(*),
           max(m.n_valid)
      FROM pgeval.experiment_stages(p_experiment, p_repetition) s
     CROSS JOIN LATERAL pgeval.summary(s.run_id, p_measures, p_rel, p_judged_only) m
     GROUP BY s.label, m.measure, m.ord
     ORDER BY min(s."position"), m.ord
$$;

-- Index recall@K per ANN stage, mean over repetitions with the spread.
CREATE OR REPLACE FUNCTION pgeval.index_recall_summary(p_experiment bigint,
                                                       p_k integer DEFAULT 10,
                                                       p_repetition integer DEFAULT NULL)
RETURNS TABLE (label text, k integer, index_recall double precision, recall_min double precision,
               recall_max double precision, queries bigint, short_queries bigint,
               repetitions bigint)
LANGUAGE sql STABLE AS $$
    SELECT ir.label, p_k, avg(ir.index_recall), min(ir.index_recall), max(ir.index_recall),
           max(ir.queries), max(ir.short_queries), count(*)
      FROM pgeval.index_recall(p_experiment, p_k, p_repetition) ir
     GROUP BY ir.label
$$;

-- Latency and rows returned per stage, the timings of its repetitions pooled (all when
-- p_repetition is NULL). Percentiles by the nearest-rank method (pgeval.nearest_rank: sort
-- ascending, element ceil(p * n), 1-based), one per entry of p_fractions, of latency_ms (the run's
-- timing boundary) and of server_ms where recorded. rows_* are pgeval.query_timing.rows_returned
-- (what the statement returned) where the stage timed its queries, else the stored results per
-- query; short_queries counts the queries that returned fewer rows than the stage's depth.
CREATE OR REPLACE FUNCTION pgeval.stage_latency(p_experiment bigint,
                                                p_repetition integer DEFAULT NULL,
                                                p_fractions double precision[]
                                                    DEFAULT '{0.5,0.95,0.99}')
RETURNS TABLE (label text, "position" integer, timing_boundary text, timed_queries bigint,
               latency_ms double precision[], server_ms double precision[],
               queries bigint, rows_mean double precision, rows_min integer, rows_max integer,
               short_queries bigint, depth integer)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH s AS (SELECT * FROM pgeval.experiment_stages(p_experiment, p_repetition)),
    t AS (SELECT s.label, array_agg(qt.latency_ms) AS lat, array_agg(qt.server_ms) AS srv,
                 count(*) AS n
            FROM s JOIN pgeval.query_timing qt ON qt.run_id = s.run_id
           GROUP BY s.label),
    per_query AS (
        SELECT s.label, s.depth, qt.rows_returned AS n_rows
          FROM s JOIN pgeval.query_timing qt ON qt.run_id = s.run_id
        UNION ALL
        SELECT s.label, s.depth, count(*)::integer
          FROM s JOIN pgeval.result res ON res.run_id = s.run_id
         WHERE NOT EXISTS (SELECT 1 FROM pgeval.query_timing x WHERE x.run_id = s.run_id)
         GROUP BY s.run_id, s.label, s.depth, res.query_id),
    rows_ AS (SELECT pq.label, count(*) AS n_q, avg(pq.n_rows) AS mean_rows,
                     min(pq.n_rows) AS min_rows, max(pq.n_rows) AS max_rows,
                     count(*) FILTER (WHERE pq.n_rows < pq.depth) AS short
                FROM per_query pq GROUP BY pq.label),
    st AS (SELECT s.label, min(s."position") AS pos, min(r.timing_boundary) AS boundary,
                  max(s.depth) AS depth
             FROM s JOIN pgeval.run r ON r.run_id = s.run_id
            GROUP BY s.label)
    SELECT st.label, st.pos, st.boundary, coalesce(t.n, 0),
           CASE WHEN t.n > 0 THEN ARRAY(SELECT pgeval.nearest_rank(t.lat, f)
                                          FROM unnest(p_fractions) WITH ORDINALITY u(f, i)
                                         ORDER BY u.i) END,
           CASE WHEN t.n > 0 AND EXISTS (SELECT 1 FROM unnest(t.srv) v WHERE v IS NOT NULL)
                THEN ARRAY(SELECT pgeval.nearest_rank(t.srv, f)
                             FROM unnest(p_fractions) WITH ORDINALITY u(f, i) ORDER BY u.i) END,
           coalesce(rows_.n_q, 0), rows_.mean_rows::float8, rows_.min_rows, rows_.max_rows,
           coalesce(rows_.short, 0), st.depth
      FROM st
      LEFT JOIN t ON t.label = st.label
      LEFT JOIN rows_ ON rows_.label = st.label
     ORDER BY st.pos;
END
$$;
