-- The distribution of index recall, not only its mean (METRICS.md "Index recall"): per ANN stage
-- of an experiment, the per-query index recall's minimum, 5th and 10th percentiles and the
-- queries at 0, and per query the exact neighbours the index missed. A stage-report reads them
-- per stage, a sweep per point (a point is an experiment; its repetitions pooled).

-- Per ANN stage (label): each query's index recall (pgeval.index_recall_per_query: hits / denom),
-- averaged over the repetitions first (all when p_repetition is NULL) as
-- pgeval.sweep_point_recall_margin does, then: queries, the minimum, p5 and p10 by the
-- nearest-rank rule (pgeval.nearest_rank), the number of queries at 0 and their ids (byte order).
CREATE OR REPLACE FUNCTION pgeval.index_recall_distribution(p_experiment bigint,
                                                            p_k integer DEFAULT 10,
                                                            p_repetition integer DEFAULT NULL)
RETURNS TABLE (label text, queries bigint, recall_min double precision, p5 double precision,
               p10 double precision, at_zero bigint, zero_queries text[])
LANGUAGE sql STABLE AS $$
    WITH s AS (SELECT * FROM pgeval.experiment_stages(p_experiment, p_repetition)),
    pq AS (SELECT s.label, pq.query_id, avg(pq.hits::float8 / pq.denom) AS recall
             FROM pgeval.index_recall_per_query(p_experiment, p_k, p_repetition) pq
             JOIN s ON s.run_id = pq.run_id
            GROUP BY s.label, pq.query_id)
    SELECT pq.label, count(*), min(pq.recall),
           pgeval.nearest_rank(array_agg(pq.recall), 0.05),
           pgeval.nearest_rank(array_agg(pq.recall), 0.10),
           count(*) FILTER (WHERE pq.recall = 0),
           coalesce(array_agg(pq.query_id ORDER BY pq.query_id COLLATE "C")
                        FILTER (WHERE pq.recall = 0), '{}')
      FROM pq
     GROUP BY pq.label
$$;

-- Per ANN run and query: the exact neighbours the index missed, i.e. each chunk of the exact
-- stage's first K (of the same repetition; rank = its position in the exact list, distance =
-- the exact distance) that the ANN run's first K does not hold. A query whose recall counts a
-- chunk tied with the K-th exact distance in place of an exact neighbour (index recall's
-- tolerance) lists that neighbour here although its recall does not miss it.
CREATE OR REPLACE FUNCTION pgeval.index_recall_misses(p_experiment bigint,
                                                      p_k integer DEFAULT 10,
                                                      p_repetition integer DEFAULT NULL)
RETURNS TABLE (label text, run_id bigint, repetition integer, query_id text,
               exact_rank integer, chunk_id text, distance double precision)
LANGUAGE sql STABLE AS $$
    WITH s AS (SELECT * FROM pgeval.experiment_stages(p_experiment, p_repetition)),
    ex AS (SELECT DISTINCT ON (s.repetition) s.repetition, s.run_id
             FROM s WHERE s.role = 'exact' ORDER BY s.repetition, s."position")
    SELECT a.label, a.run_id, a.repetition, l.query_id, e.rank::integer, e.chunk_id, e.score
      FROM s a
      JOIN ex ON ex.repetition = a.repetition
      JOIN pgeval.result_list l ON l.run_id = ex.run_id
     CROSS JOIN LATERAL unnest(l.chunk_ids, l.scores) WITH ORDINALITY AS e(chunk_id, score, rank)
      LEFT JOIN pgeval.result_list al ON al.run_id = a.run_id AND al.query_id = l.query_id
     WHERE a.role = 'ann' AND p_k >= 1 AND e.rank <= p_k AND e.score IS NOT NULL
       AND NOT coalesce(e.chunk_id = ANY (al.chunk_ids[1:p_k]), false)
     ORDER BY a.repetition, a."position", l.query_id COLLATE "C", e.rank
$$;
