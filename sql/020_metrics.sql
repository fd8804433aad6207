-- The metric contract of METRICS.md, implemented once. Python only reads these functions.
--
-- Per query (valid queries only: at least one chunk of grade >= p_rel; a valid query missing
-- from the run scores 0 on every measure):
--   recall@K    = relevant in first K / all relevant chunks of the query
--   precision@K = relevant in first K / K
--   hit@K       = 1 if any relevant chunk in first K
--   mrr@K       = 1 / rank of first relevant chunk if that rank <= K, else 0
--   ndcg@K      = sum_{i<=K} (2^g_i - 1)/log2(i+1) / IDCG@K (IDCG from the judged grades)
-- Only judged chunks with grade > 0 at rank <= max K are joined: everything else contributes 0.

CREATE OR REPLACE FUNCTION pgeval.per_query(p_run bigint,
                                            p_measures text[] DEFAULT pgeval.default_measures(),
                                            p_rel integer DEFAULT 1)
RETURNS TABLE (query_id text, measure text, ord integer, value double precision)
LANGUAGE sql STABLE AS $$
    WITH r AS (SELECT testset_id FROM pgeval.run WHERE run_id = p_run),
    m AS (SELECT * FROM pgeval.measure_spec(p_measures)),
    v AS (SELECT q.query_id, q.ideal_dcg, pgeval.n_relevant(q.grades_desc, p_rel) AS n_rel
            FROM pgeval.query q JOIN r USING (testset_id)),
    hit AS (SELECT res.query_id, res.rank, j.grade
              FROM pgeval.result res
              JOIN r ON true
              JOIN pgeval.qrel j ON j.testset_id = r.testset_id AND j.query_id = res.query_id
                                AND j.chunk_id = res.chunk_id
             WHERE res.run_id = p_run AND j.grade > 0
               AND res.rank <= (SELECT max(m.k) FROM m)),
    agg AS (SELECT hit.query_id, m.measure,
                   count(*) FILTER (WHERE hit.grade >= p_rel) AS n_hit,
                   min(hit.rank) FILTER (WHERE hit.grade >= p_rel) AS first_rank,
                   sum(((1 << hit.grade) - 1) * ln(2.0::float8) / ln(hit.rank + 1.0::float8)) AS dcg
              FROM hit JOIN m ON hit.rank <= m.k
             GROUP BY hit.query_id, m.measure)
    SELECT v.query_id, m.measure, m.ord,
           CASE m.name
               WHEN 'recall'    THEN coalesce(a.n_hit, 0)::float8 / v.n_rel
               WHEN 'precision' THEN coalesce(a.n_hit, 0)::float8 / m.k
               WHEN 'hit'       THEN CASE WHEN coalesce(a.n_hit, 0) > 0 THEN 1.0 ELSE 0.0 END
               WHEN 'mrr'       THEN coalesce(1.0::float8 / a.first_rank, 0.0)
               WHEN 'ndcg'      THEN coalesce(a.dcg, 0.0)
                                     / v.ideal_dcg[least(m.k, cardinality(v.ideal_dcg))]
           END
      FROM v CROSS JOIN m
      LEFT JOIN agg a ON a.query_id = v.query_id AND a.measure = m.measure
     WHERE v.n_rel > 0
$$;

-- Per-run value: arithmetic mean over valid queries.
CREATE OR REPLACE FUNCTION pgeval.summary(p_run bigint,
                                          p_measures text[] DEFAULT pgeval.default_measures(),
                                          p_rel integer DEFAULT 1)
RETURNS TABLE (measure text, ord integer, value double precision, n_valid bigint)
LANGUAGE sql STABLE AS $$
    SELECT m.measure, m.ord, avg(pq.value), count(pq.value)
      FROM pgeval.measure_spec(p_measures) m
      LEFT JOIN pgeval.per_query(p_run, p_measures, p_rel) pq ON pq.measure = m.measure
     GROUP BY m.measure, m.ord
     ORDER BY m.ord
$$;

-- The counts every report shows (METRICS.md "System-level values").
--   valid: >= 1 chunk of grade >= p_rel; excluded: answerable but no relevant chunk judged;
--   unanswerable: declared unanswerable; no_result: valid queries absent from the run;
--   unanswerable_silent: unanswerable queries that returned nothing with score >= p_min_score
--   (no threshold: nothing at all).
CREATE OR REPLACE FUNCTION pgeval.run_counts(p_run bigint, p_rel integer DEFAULT 1,
                                             p_min_score double precision DEFAULT NULL)
RETURNS TABLE (queries bigint, valid bigint, excluded bigint, unanswerable bigint,
               no_result bigint, unanswerable_silent bigint, results bigint)
LANGUAGE sql STABLE AS $$
    WITH r AS (SELECT testset_id FROM pgeval.run WHERE run_id = p_run),
    present AS (SELECT DISTINCT res.query_id FROM pgeval.result res WHERE res.run_id = p_run),
    answered AS (SELECT DISTINCT res.query_id FROM pgeval.result res
                  WHERE res.run_id = p_run AND (p_min_score IS NULL OR res.score >= p_min_score)),
    q AS (SELECT q.query_id, q.answerable, pgeval.n_relevant(q.grades_desc, p_rel) > 0 AS valid
            FROM pgeval.query q JOIN r USING (testset_id))
    SELECT count(*),
           count(*) FILTER (WHERE q.valid),
           count(*) FILTER (WHERE NOT q.valid AND q.answerable),
           count(*) FILTER (WHERE NOT q.answerable),
           count(*) FILTER (WHERE q.valid AND q.query_id NOT IN (SELECT query_id FROM present)),
           count(*) FILTER (WHERE NOT q.answerable AND q.query_id NOT IN (SELECT query_id FROM answered)),
           (SELECT count(*) FROM pgeval.result res WHERE res.run_id = p_run)
      FROM q
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
