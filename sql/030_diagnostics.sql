-- Acceptance levels and flagged queries (METRICS.md "Acceptance levels", "Diagnostics").

CREATE OR REPLACE FUNCTION pgeval.acceptance_thresholds()
RETURNS TABLE (measure text, excellent double precision, good double precision,
               pass double precision)
LANGUAGE sql IMMUTABLE AS $$
    VALUES ('recall@3', 0.70, 0.60, 0.50),
           ('recall@5', 0.80, 0.70, 0.60),
           ('recall@10', 0.90, 0.80, 0.70),
           ('mrr@20', 0.80, 0.70, 0.60),
           ('ndcg@5', 0.85, 0.75, 0.65),
           ('ndcg@10', 0.80, 0.70, 0.60)
$$;

-- Level of a value: excellent / good / pass / fail, or NULL for a measure without thresholds.
-- p_domain_discount (0 to 0.10) lowers every threshold by that fraction (specialised domains).
CREATE OR REPLACE FUNCTION pgeval.acceptance(p_measure text, p_value double precision,
                                             p_domain_discount double precision DEFAULT 0)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    t record;
    f double precision := 1 - coalesce(p_domain_discount, 0);
BEGIN
    IF p_domain_discount < 0 OR p_domain_discount > 0.10 THEN
        RAISE EXCEPTION 'domain_discount must be between 0 and 0.10, got %', p_domain_discount
            USING ERRCODE = '22023';
    END IF;
    SELECT * INTO t FROM pgeval.acceptance_thresholds() a WHERE a.measure = p_measure;
    IF NOT FOUND OR p_value IS NULL THEN
        RETURN NULL;
    END IF;
    -- a small tolerance so that 0.7 computed as 0.69999999 still reaches 0.70
    RETURN CASE WHEN pgeval.reaches(p_value, t.excellent * f) THEN 'excellent'
                WHEN pgeval.reaches(p_value, t.good * f) THEN 'good'
                WHEN pgeval.reaches(p_value, t.pass * f) THEN 'pass'
                ELSE 'fail' END;
END
$$;

-- Queries to inspect: low recall (Recall@K < 0.3, K = the largest recall cut-off asked for,
-- default 10) and poor ranking (nDCG@10 < 0.5).
CREATE OR REPLACE FUNCTION pgeval.flagged(p_run bigint,
                                          p_measures text[] DEFAULT pgeval.default_measures(),
                                          p_rel integer DEFAULT 1,
                                          p_judged_only boolean DEFAULT false)
RETURNS TABLE (query_id text, flag text, measure text, value double precision)
LANGUAGE sql STABLE AS $$
    WITH kr AS (SELECT coalesce(max(k), 10) AS k FROM pgeval.measure_spec(p_measures)
                 WHERE name = 'recall'),
    pq AS (SELECT * FROM pgeval.per_query(p_run,
                    ARRAY['recall@' || (SELECT k FROM kr), 'ndcg@10'], p_rel, p_judged_only))
    SELECT pq.query_id,
           CASE WHEN pq.measure = 'ndcg@10' THEN 'poor_ranking' ELSE 'low_recall' END,
           pq.measure, pq.value
      FROM pq
     WHERE (pq.measure = 'ndcg@10' AND pq.value < 0.5)
        OR (pq.measure <> 'ndcg@10' AND pq.value < 0.3)
     ORDER BY 2, pq.value, pq.query_id COLLATE "C"
$$;
