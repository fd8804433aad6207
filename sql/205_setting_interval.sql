-- The least value of a work setting reaching a target recall, with its uncertainty (issue "What
-- the application gets": "ef_search 24, 95 % interval 18-33"). The queries of a sweep are a
-- sample of the application's: another sample of as many would move each point's mean recall,
-- and the curve is flat near the target, so a small move in recall is a large move in the
-- setting. A bootstrap over the queries answers how large: p_boot resamples of the sweep's
-- queries (with replacement, seeded by p_seed: the same call gives the same interval), each
-- point's mean of the per-query index recall already measured (pgeval.index_recall_per_query,
-- averaged over repetitions) on the resample, and per resample the least measured value of
-- p_setting whose mean reaches p_target (pgeval.reaches, as every target is judged). Returned:
-- the 2.5 % and 97.5 % nearest-rank percentiles of that value over the resamples (high is NULL
-- when more than 2.5 % of them reach at no measured value: above the largest measured), the
-- resamples, and how many reached at no measured value. Only the points named in p_points
-- (one find's; NULL: every point with the setting) count. The interval is over the values
-- measured: between two of them it cannot say more.
CREATE OR REPLACE FUNCTION pgeval.sweep_setting_interval(p_sweep bigint, p_setting text,
                                                         p_target double precision,
                                                         p_k integer DEFAULT 10,
                                                         p_points integer[] DEFAULT NULL,
                                                         p_boot integer DEFAULT 500,
                                                         p_seed double precision DEFAULT 0.5)
RETURNS TABLE (low numeric, high numeric, resamples integer, unreached integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM setseed(p_seed);
    RETURN QUERY
    WITH pts AS (
        SELECT sp.point, sp.run_id, (sp.settings ->> p_setting)::numeric AS v
          FROM pgeval.sweep_point sp
         WHERE sp.sweep_id = p_sweep AND sp.settings ? p_setting
           AND (p_points IS NULL OR sp.point = ANY (p_points))),
    exps AS (SELECT DISTINCT r.experiment_id, r.repetition
               FROM pts JOIN pgeval.run r ON r.run_id = pts.run_id),
    per_query AS MATERIALIZED (
        SELECT pts.v, pq.query_id, avg(pq.hits::float8 / pq.denom) AS recall
          FROM exps
         CROSS JOIN LATERAL pgeval.index_recall_per_query(exps.experiment_id, p_k,
                                                          exps.repetition) pq
          JOIN pts ON pts.run_id = pq.run_id
         GROUP BY pts.v, pq.query_id),
    qs AS MATERIALIZED (SELECT d.query_id, row_number() OVER (ORDER BY d.query_id COLLATE "C")::int AS i
             FROM (SELECT DISTINCT p.query_id FROM per_query p) d),
    n AS (SELECT count(*)::int AS q FROM qs),
    -- per value, its per-query recalls in query order (NULL where a query was not measured):
    -- each resample is then an array of query positions, its mean read off each value's array
    -- (no join of resamples to rows for the planner to misjudge)
    curves AS MATERIALIZED (
        SELECT vs.v, array_agg(p.recall ORDER BY qs.i) AS r
          FROM (SELECT DISTINCT p.v FROM per_query p) vs CROSS JOIN qs
          LEFT JOIN per_query p ON p.v = vs.v AND p.query_id = qs.query_id
         GROUP BY vs.v),
    draws AS MATERIALIZED (
        SELECT b, array_agg(1 + floor(random() * n.q)::int ORDER BY j) AS d
          FROM n, generate_series(1, p_boot) b, generate_series(1, n.q) j
         WHERE n.q > 0 GROUP BY b),
    means AS (SELECT d.b, c.v, (SELECT avg(c.r[x]) FROM unnest(d.d) x) AS recall
                FROM draws d CROSS JOIN curves c),
    least AS (SELECT m.b, min(m.v) FILTER (WHERE pgeval.reaches(m.recall, p_target)) AS v
                FROM means m GROUP BY m.b)
    SELECT nullif(percentile_disc(0.025) WITHIN GROUP (ORDER BY coalesce(l.v, 'Infinity')), 'Infinity'),
           nullif(percentile_disc(0.975) WITHIN GROUP (ORDER BY coalesce(l.v, 'Infinity')), 'Infinity'),
           count(*)::int, (count(*) FILTER (WHERE l.v IS NULL))::int
      FROM least l;
END
$$;
