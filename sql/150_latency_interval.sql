-- The p95 latency with its 95 % interval (issue "What the application gets": latency beyond its
-- noise). Distribution-free: for n latencies sorted, the 95th percentile's interval is the pair
-- of order statistics at ranks n*0.95 -/+ 1.96*sqrt(n*0.95*0.05) (the binomial count of
-- latencies under the true p95), clamped to 1..n. No resampling: the same latencies give the
-- same interval.
CREATE OR REPLACE FUNCTION pgeval.p95_interval(p_latencies double precision[])
RETURNS TABLE (low double precision, high double precision, n integer)
LANGUAGE sql IMMUTABLE AS $$
    WITH s AS (SELECT array_agg(x ORDER BY x) AS v, count(*)::int AS n
                 FROM unnest(p_latencies) x WHERE x IS NOT NULL),
    r AS (SELECT s.v, s.n, 1.96 * sqrt(s.n * 0.95 * 0.05) AS half FROM s)
    SELECT r.v[greatest(1, floor(r.n * 0.95 - r.half)::int)],
           r.v[least(r.n, ceil(r.n * 0.95 + r.half)::int + 1)],
           r.n
      FROM r WHERE r.n > 0
$$;

-- One sweep point's p95 interval: pgeval.p95_interval over its latencies pooled over its
-- repetitions (as pgeval.sweep_summary pools them for the p95 itself); no row without timings.
CREATE OR REPLACE FUNCTION pgeval.sweep_point_p95_interval(p_sweep bigint, p_point integer)
RETURNS TABLE (low double precision, high double precision, n integer)
LANGUAGE sql STABLE AS $$
    SELECT i.low, i.high, i.n
      FROM (SELECT array_agg(t.latency_ms) AS lat
              FROM pgeval.sweep_point sp JOIN pgeval.query_timing t ON t.run_id = sp.run_id
             WHERE sp.sweep_id = p_sweep AND sp.point = p_point) l
     CROSS JOIN LATERAL pgeval.p95_interval(l.lat) i
     WHERE l.lat IS NOT NULL
$$;
