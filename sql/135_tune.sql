-- Measures of ranked lists that are not stored (pgeval tune: every configuration of a merge or
-- a rerank, computed from the stored input lists and measured without being written).

-- The measures p_names[i]@p_ks[i] (pgeval.measure_spec's name and k; k NULL: rprec, map) of one
-- ranked list from its judged grades (pgeval.list_grades), for a valid query with p_n_rel chunks
-- of grade >= p_rel and ideal-DCG prefix sums p_ideal_dcg: the same gains
-- (pgeval.measure_gain), rank bounds (pgeval.measure_depth's) and divisors
-- (pgeval.measure_norm) as pgeval.per_query reads for a stored list.
CREATE OR REPLACE FUNCTION pgeval.list_measures(p_grades smallint[], p_n_rel integer,
                                                p_ideal_dcg double precision[], p_names text[],
                                                p_ks integer[], p_rel integer)
RETURNS double precision[] LANGUAGE sql STABLE PARALLEL SAFE AS $$
    WITH h AS (SELECT u.pos::integer AS rank, u.g AS grade,
                      CASE WHEN u.g >= p_rel
                           THEN count(*) FILTER (WHERE u.g >= p_rel) OVER (ORDER BY u.pos)
                      END::integer AS seen
                 FROM unnest(p_grades) WITH ORDINALITY AS u(g, pos)
                WHERE u.g > 0 OR (u.g = 0 AND 'judged' = ANY(p_names))),  -- (judged@K: 0 too)
    f AS (SELECT pgeval.first_relevant(p_grades, p_rel) AS first_rank)
    SELECT array_agg(coalesce(
               (SELECT sum(pgeval.measure_gain(m.name, h.rank, h.grade, p_rel, f.first_rank,
                                               h.seen))
                  FROM h
                 WHERE h.rank <= coalesce(m.k, CASE m.name WHEN 'rprec' THEN p_n_rel END,
                                          2147483647)), 0.0)
               / pgeval.measure_norm(m.name, m.k, p_n_rel, p_ideal_dcg) ORDER BY m.ord)
      FROM unnest(p_names, p_ks) WITH ORDINALITY AS m(name, k, ord) CROSS JOIN f
$$;

-- A rerank run's lists as they would be with top_n = p_top_n (<= the run's own top_n): the
-- top p_top_n of its input run, ordered by the scores the reranker gave them in this run (best
-- first, ties by chunk id in byte order, as the stage ranks them); a candidate the run holds no
-- score for (unscored, or under its threshold) is left out, as the stage leaves it out. The
-- reranker is not called again: its score of a chunk does not depend on the other candidates.
CREATE OR REPLACE FUNCTION pgeval.rerank_top_n(p_run bigint, p_top_n integer)
RETURNS TABLE (query_id text, rank integer, chunk_id text, score double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    params jsonb;
BEGIN
    SELECT r.params INTO params FROM pgeval.run r WHERE r.run_id = p_run;
    IF NOT FOUND OR params->>'kind' IS DISTINCT FROM 'rerank' THEN
        RAISE EXCEPTION 'run % is not a rerank run', p_run USING ERRCODE = '22023';
    END IF;
    IF p_top_n IS NULL OR p_top_n < 1 OR p_top_n > (params->>'top_n')::integer THEN
        RAISE EXCEPTION 'top_n must be between 1 and %, the top_n the reranker scored, got %',
            params->>'top_n', p_top_n USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT i.query_id, (row_number() OVER (PARTITION BY i.query_id
                                          ORDER BY s.score DESC, i.chunk_id COLLATE "C"))::integer,
           i.chunk_id, s.score
      FROM pgeval.result i
      JOIN pgeval.result s ON s.run_id = p_run AND s.query_id = i.query_id
                          AND s.chunk_id = i.chunk_id
     WHERE i.run_id = (params->>'input_run')::bigint AND i.rank <= p_top_n;
END
$$;
