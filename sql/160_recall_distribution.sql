-- The distribution of index recall, not only its mean (METRICS.md "Index recall"): per ANN stage
-- of an experiment, the per-query index recall's minimum, 5th and 10th percentiles and the
-- queries at 0, and per query the exact neighbours the index missed. A stage-report reads them
-- per stage, a sweep per point (a point is an experiment; its repetitions pooled).

-- The tail of per-query recall values p_recall (p_queries: their query ids, aligned): queries, the
-- minimum, p5 and p10 by the nearest-rank rule (pgeval.nearest_rank), the number at 0 and their
-- ids in byte order. The one rule for a stage (pgeval.index_recall_distribution) and a sweep
-- point (pgeval.sweep_recall_distribution).
CREATE OR REPLACE FUNCTION pgeval.recall_tail(p_recall double precision[], p_queries text[])
RETURNS TABLE (queries bigint, recall_min double precision, p5 double precision,
               p10 double precision, at_zero bigint, zero_queries text[])
LANGUAGE sql IMMUTABLE AS $$
    SELECT cardinality(p_recall)::bigint,
           (SELECT min(v) FROM unnest(p_recall) AS v),
           pgeval.nearest_rank(p_recall, 0.05), pgeval.nearest_rank(p_recall, 0.10),
           (SELECT count(*) FROM unnest(p_recall) AS v WHERE v = 0),
           coalesce((SELECT array_agg(u.q ORDER BY u.q COLLATE "C")
                       FROM unnest(p_recall, p_queries) AS u(v, q) WHERE u.v = 0), '{}')
$$;

-- Per ANN stage (label): each query's index recall (pgeval.index_recall_per_query: hits / denom),
-- averaged over the repetitions first (all when p_repetition is NULL) as
-- pgeval.sweep_point_recall_margin does, then its tail (pgeval.recall_tail).
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
            GROUP BY s.label, pq.query_id),
    g AS (SELECT pq.label, array_agg(pq.recall) AS recall, array_agg(pq.query_id) AS ids
            FROM pq GROUP BY pq.label)
    SELECT g.label, t.* FROM g CROSS JOIN LATERAL pgeval.recall_tail(g.recall, g.ids) t
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

-- The experiments and repetitions of a sweep's point runs, with the sweep's K: what the two
-- functions below measure, each (experiment, repetition) once for all the points it holds.
CREATE OR REPLACE FUNCTION pgeval.sweep_measured(p_sweep bigint)
RETURNS TABLE (experiment_id bigint, repetition integer, k integer)
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT r.experiment_id, r.repetition, w.k
      FROM pgeval.sweep_point sp
      JOIN pgeval.run r ON r.run_id = sp.run_id
      JOIN pgeval.sweep w ON w.sweep_id = sp.sweep_id
     WHERE sp.sweep_id = p_sweep AND r.status = 'complete'
$$;

-- Per point of a sweep: the tail of its per-query index recall@K (K: the sweep's), each query
-- averaged over the point's repetitions first (as pgeval.sweep_point_recall_margin).
CREATE OR REPLACE FUNCTION pgeval.sweep_recall_distribution(p_sweep bigint)
RETURNS TABLE (point integer, queries bigint, recall_min double precision, p5 double precision,
               p10 double precision, at_zero bigint, zero_queries text[])
LANGUAGE sql STABLE AS $$
    WITH pq AS MATERIALIZED (
        SELECT pq.* FROM pgeval.sweep_measured(p_sweep) m
         CROSS JOIN LATERAL pgeval.index_recall_per_query(m.experiment_id, m.k, m.repetition) pq),
    per AS (SELECT sp.point, pq.query_id, avg(pq.hits::float8 / pq.denom) AS recall
              FROM pgeval.sweep_point sp JOIN pq ON pq.run_id = sp.run_id
             WHERE sp.sweep_id = p_sweep
             GROUP BY sp.point, pq.query_id),
    g AS (SELECT per.point, array_agg(per.recall) AS recall, array_agg(per.query_id) AS ids
            FROM per GROUP BY per.point)
    SELECT g.point, t.* FROM g CROSS JOIN LATERAL pgeval.recall_tail(g.recall, g.ids) t
     ORDER BY g.point
$$;

-- Per point, repetition and query of a sweep: the exact neighbours the point's index missed
-- (pgeval.index_recall_misses at the sweep's K).
CREATE OR REPLACE FUNCTION pgeval.sweep_recall_misses(p_sweep bigint)
RETURNS TABLE (point integer, repetition integer, query_id text, exact_rank integer,
               chunk_id text, distance double precision)
LANGUAGE sql STABLE AS $$
    SELECT sp.point, sp.repetition, x.query_id, x.exact_rank, x.chunk_id, x.distance
      FROM pgeval.sweep_measured(p_sweep) m
     CROSS JOIN LATERAL pgeval.index_recall_misses(m.experiment_id, m.k, m.repetition) x
      JOIN pgeval.sweep_point sp ON sp.sweep_id = p_sweep AND sp.run_id = x.run_id
     ORDER BY sp.point, sp.repetition, x.query_id COLLATE "C", x.exact_rank
$$;
