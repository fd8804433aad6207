-- The metric contract of METRICS.md, implemented once. Python only reads these functions.
--
-- Per query (valid queries only: at least one chunk of grade >= p_rel; a valid query missing
-- from the run scores 0 on every measure):
--   recall@K    = relevant in first K / all relevant chunks of the query
--   precision@K = relevant in first K / K
--   hit@K       = 1 if any relevant chunk in first K
--   mrr@K       = 1 / rank of the first relevant chunk if that rank <= K, else 0
--   ndcg@K      = sum_{i<=K} (2^g_i - 1)/log2(i+1) / IDCG@K (IDCG from the judged grades)
--
-- How: pgeval.cutoff_stats reads only judged chunks of grade > 0 at rank <= max K (each result
-- row carries its judged grade) and aggregates them once per (query, distinct K);
-- pgeval.measure_value turns those statistics into a value.
-- A (query, K) without any judged hit has no row: every measure is 0 there, so means are the
-- sum over rows divided by the number of valid queries.

-- Statistics of the first K results of each query, for every distinct K asked for.
CREATE OR REPLACE FUNCTION pgeval.cutoff_stats(p_run bigint, p_ks integer[], p_rel integer)
RETURNS TABLE (query_id text, k integer, n_hit bigint, first_rank integer,
               dcg double precision, n_rel integer, idcg double precision)
LANGUAGE sql STABLE AS $$
    -- result_list.rel_ranks / rel_grades: the positions of a list whose judged grade is > 0 and
    -- those grades (generated from result_list.grades, pgeval.result_fill_grades): a few numbers
    -- per list, no join with the judgements, chunk ids never read
    WITH r AS (SELECT testset_id FROM pgeval.run WHERE run_id = p_run),
    ks AS (SELECT DISTINCT x AS k FROM unnest(p_ks) x),
    v AS (SELECT q.query_id, q.n_rel[p_rel] AS n_rel, q.ideal_dcg FROM pgeval.query q
           WHERE q.testset_id = (SELECT testset_id FROM r) AND q.n_rel[p_rel] > 0),
    -- unnest in the target list (one ProjectSet node), not a function scan per list
    judged AS (SELECT l.query_id, unnest(l.rel_ranks) AS rank, unnest(l.rel_grades) AS grade
                 FROM pgeval.result_list l WHERE l.run_id = p_run),
    hit AS (SELECT * FROM judged WHERE judged.rank <= (SELECT max(k) FROM ks)),
    agg AS (SELECT hit.query_id, ks.k,
                   count(*) FILTER (WHERE hit.grade >= p_rel) AS n_hit,
                   min(hit.rank) FILTER (WHERE hit.grade >= p_rel) AS first_rank,
                   sum(((1 << hit.grade) - 1) * ln(2.0::float8) / ln(hit.rank + 1.0::float8)) AS dcg
              FROM hit JOIN ks ON hit.rank <= ks.k
             GROUP BY hit.query_id, ks.k)
    SELECT agg.query_id, agg.k, agg.n_hit, agg.first_rank, agg.dcg, v.n_rel,
           v.ideal_dcg[least(agg.k, cardinality(v.ideal_dcg))]
      FROM agg JOIN v ON v.query_id = agg.query_id
$$;

-- The value of one measure from the statistics of its cut-off (NULL statistics: nothing found).
CREATE OR REPLACE FUNCTION pgeval.measure_value(p_name text, p_k integer, p_n_hit bigint,
                                                p_first_rank integer, p_dcg double precision,
                                                p_n_rel integer, p_idcg double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_name
               WHEN 'recall'    THEN coalesce(p_n_hit, 0)::float8 / p_n_rel
               WHEN 'precision' THEN coalesce(p_n_hit, 0)::float8 / p_k
               WHEN 'hit'       THEN CASE WHEN coalesce(p_n_hit, 0) > 0 THEN 1.0 ELSE 0.0 END
               WHEN 'mrr'       THEN coalesce(1.0::float8 / p_first_rank, 0.0)
               WHEN 'ndcg'      THEN coalesce(p_dcg / p_idcg, 0.0)
           END
$$;

-- One row per (valid query, measure).
CREATE OR REPLACE FUNCTION pgeval.per_query(p_run bigint,
                                            p_measures text[] DEFAULT pgeval.default_measures(),
                                            p_rel integer DEFAULT 1)
RETURNS TABLE (query_id text, measure text, ord integer, value double precision)
LANGUAGE sql STABLE AS $$
    WITH m AS (SELECT * FROM pgeval.measure_spec(p_measures)),
    s AS (SELECT * FROM pgeval.cutoff_stats(p_run, (SELECT array_agg(DISTINCT m.k) FROM m), p_rel)),
    v AS (SELECT q.query_id, q.n_rel[p_rel] AS n_rel
            FROM pgeval.query q JOIN pgeval.run r USING (testset_id)
           WHERE r.run_id = p_run AND q.n_rel[p_rel] > 0)
    SELECT v.query_id, m.measure, m.ord,
           pgeval.measure_value(m.name, m.k, s.n_hit, s.first_rank, s.dcg, v.n_rel, s.idcg)
      FROM v CROSS JOIN m
      LEFT JOIN s ON s.query_id = v.query_id AND s.k = m.k
$$;

-- Per-run value: arithmetic mean over valid queries (n_valid of them; zeros need no rows).
CREATE OR REPLACE FUNCTION pgeval.summary(p_run bigint,
                                          p_measures text[] DEFAULT pgeval.default_measures(),
                                          p_rel integer DEFAULT 1)
RETURNS TABLE (measure text, ord integer, value double precision, n_valid bigint)
LANGUAGE sql STABLE AS $$
    WITH m AS (SELECT * FROM pgeval.measure_spec(p_measures)),
    nv AS (SELECT count(*) AS n FROM pgeval.query q JOIN pgeval.run r USING (testset_id)
            WHERE r.run_id = p_run AND q.n_rel[p_rel] > 0),
    s AS (SELECT * FROM pgeval.cutoff_stats(p_run, (SELECT array_agg(DISTINCT m.k) FROM m), p_rel)),
    tot AS (SELECT m.measure,
                   sum(pgeval.measure_value(m.name, m.k, s.n_hit, s.first_rank, s.dcg, s.n_rel,
                                            s.idcg)) AS total
              FROM m JOIN s ON s.k = m.k
             GROUP BY m.measure)
    SELECT m.measure, m.ord,
           CASE WHEN nv.n > 0 THEN coalesce(tot.total, 0) / nv.n END, nv.n
      FROM m CROSS JOIN nv LEFT JOIN tot ON tot.measure = m.measure
     ORDER BY m.ord
$$;

-- The counts every report shows (METRICS.md "System-level values").
--   valid: >= 1 chunk of grade >= p_rel; excluded: answerable but no relevant chunk judged;
--   unanswerable: declared unanswerable; no_result: valid queries absent from the run;
--   unanswerable_silent: unanswerable queries that returned nothing within p_min_score (no
--   threshold: nothing at all). The threshold follows the direction of the run's score: a
--   result counts as returned when its score is >= p_min_score, or, for a run whose scores are
--   distances (run.params "score" = "distance", or an order rule "distance ascending ...":
--   lower is better), when its distance is <= p_min_score. A result without a score never
--   passes a threshold.
CREATE OR REPLACE FUNCTION pgeval.run_counts(p_run bigint, p_rel integer DEFAULT 1,
                                             p_min_score double precision DEFAULT NULL)
RETURNS TABLE (queries bigint, valid bigint, excluded bigint, unanswerable bigint,
               no_result bigint, unanswerable_silent bigint)
LANGUAGE sql STABLE AS $$
    -- a query is present when it has a ranked list: one range scan of the primary key
    WITH present AS (SELECT x.query_id FROM pgeval.result_list x WHERE x.run_id = p_run),
    dir AS (SELECT coalesce(r.params->>'score' = 'distance', false)
                   OR starts_with(r.order_rule, 'distance ascending') AS lower_is_better
              FROM pgeval.run r WHERE r.run_id = p_run),
    q AS (SELECT q.query_id, q.answerable, q.n_rel[p_rel] > 0 AS valid,
                 p.query_id IS NOT NULL AS present
            FROM pgeval.query q JOIN pgeval.run r USING (testset_id)
            LEFT JOIN present p ON p.query_id = q.query_id
           WHERE r.run_id = p_run)
    SELECT count(*),
           count(*) FILTER (WHERE q.valid),
           count(*) FILTER (WHERE NOT q.valid AND q.answerable),
           count(*) FILTER (WHERE NOT q.answerable),
           count(*) FILTER (WHERE q.valid AND NOT q.present),
           count(*) FILTER (WHERE NOT q.answerable AND NOT EXISTS (
               SELECT 1 FROM pgeval.result_list x CROSS JOIN LATERAL unnest(x.scores) AS u(score)
                WHERE x.run_id = p_run AND x.query_id = q.query_id
                  AND (p_min_score IS NULL
                       OR CASE WHEN d.lower_is_better THEN u.score <= p_min_score
                               ELSE u.score >= p_min_score END)))
      FROM q CROSS JOIN dir d
$$;

-- Breakdown by query type tag: the mean of each measure over the valid queries carrying the tag.
CREATE OR REPLACE FUNCTION pgeval.by_type(p_run bigint,
                                          p_measures text[] DEFAULT pgeval.default_measures(),
                                          p_rel integer DEFAULT 1)
RETURNS TABLE (query_type text, measure text, ord integer, value double precision, n_valid bigint)
LANGUAGE sql STABLE AS $$
    SELECT t.query_type, pq.measure, pq.ord, avg(pq.value), count(*)
      FROM pgeval.per_query(p_run, p_measures, p_rel) pq
      JOIN pgeval.run r ON r.run_id = p_run
      JOIN pgeval.query q ON q.testset_id = r.testset_id AND q.query_id = pq.query_id
      CROSS JOIN LATERAL unnest(CASE WHEN cardinality(q.types) = 0 THEN ARRAY['(untyped)']
                                     ELSE q.types END) AS t(query_type)
     GROUP BY t.query_type, pq.measure, pq.ord
     ORDER BY t.query_type, pq.ord
$$;
