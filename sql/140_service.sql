-- Failed queries of live service stages (pgeval.query_failure, written by the service stage with
-- each query's progress row): per stage of an experiment (all repetitions when p_repetition is
-- NULL), the queries written, those that got no answer, counts by HTTP status ('no answer' for a
-- timeout or a connection error) and the first few failures with their message. A failed query
-- has no results: metrics count it as an empty list; this says how many there were and why.
CREATE OR REPLACE FUNCTION pgeval.stage_failures(p_experiment bigint,
                                                 p_repetition integer DEFAULT NULL,
                                                 p_examples integer DEFAULT 5)
RETURNS TABLE (label text, "position" integer, queries bigint, failed bigint, by_status jsonb,
               examples jsonb)
LANGUAGE sql STABLE AS $$
    WITH s AS (SELECT * FROM pgeval.experiment_stages(p_experiment, p_repetition)),
    f AS (SELECT s.label, s.repetition, f.query_id, f.status, f.message, f.attempts
            FROM s JOIN pgeval.query_failure f ON f.run_id = s.run_id),
    st AS (SELECT f.label, jsonb_object_agg(f.k, f.n) AS by_status
             FROM (SELECT f.label, coalesce(f.status::text, 'no answer') AS k, count(*) AS n
                     FROM f GROUP BY 1, 2) f GROUP BY f.label)
    SELECT s.label, min(s."position"),
           (SELECT count(*) FROM pgeval.run_progress p JOIN s x ON x.run_id = p.run_id
             WHERE x.label = s.label),
           (SELECT count(*) FROM f WHERE f.label = s.label),
           coalesce((SELECT st.by_status FROM st WHERE st.label = s.label), '{}'::jsonb),
           coalesce((SELECT jsonb_agg(jsonb_build_object('repetition', e.repetition,
                                                         'query_id', e.query_id,
                                                         'status', e.status,
                                                         'attempts', e.attempts,
                                                         'message', e.message)
                                      ORDER BY e.repetition, e.query_id)
                       FROM (SELECT * FROM f WHERE f.label = s.label
                              ORDER BY f.repetition, f.query_id LIMIT p_examples) e),
                    '[]'::jsonb)
      FROM s
     WHERE coalesce(s.params->>'kind', s.stage) = 'service'
     GROUP BY s.label
     ORDER BY min(s."position")
$$;
