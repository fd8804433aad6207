-- The one percentile rule of pgeval's SQL API (latencies of runs, sweeps, stage reports).

-- Nearest-rank percentile (METRICS.md): sort ascending, take element ceil(p * n) (1-based), with
-- p * n computed exactly in numeric so that 0.07 * 100 is 7, not 7.000000000000001.
CREATE OR REPLACE FUNCTION pgeval.nearest_rank(p_values double precision[],
                                               p_fraction double precision)
RETURNS double precision LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    sorted double precision[];
BEGIN
    IF p_fraction IS NULL OR p_fraction <= 0 OR p_fraction > 1 THEN
        RAISE EXCEPTION 'percentile must be in (0, 1], got %', p_fraction USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(v ORDER BY v) INTO sorted FROM unnest(p_values) AS v WHERE v IS NOT NULL;
    IF sorted IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN sorted[greatest(1, ceil(p_fraction::numeric * cardinality(sorted)))::integer];
END
$$;
