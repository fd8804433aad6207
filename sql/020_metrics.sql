-- The metric contract of METRICS.md, implemented once. Python only reads these functions.
--
-- Per query (valid queries only: at least one chunk of grade >= p_rel; a valid query missing
-- from the run scores 0 on every measure):
--   recall@K    = relevant in first K / all relevant chunks of the query
--   precision@K = relevant in first K / K
--   hit@K       = 1 if any relevant chunk in first K
--   mrr@K       = 1 / rank of the first relevant chunk if that rank <= K, else 0
--   ndcg@K      = sum_{i<=K} (2^g_i - 1)/log2(i+1) / IDCG@K (IDCG from the judged grades)
--   rprec       = relevant in first R / R, R = the query's chunks of grade >= p_rel (no @K: the
--                 cut-off is R, per query)
--   map@K       = sum over the relevant chunks at rank i <= K of (relevant in first i) / i, divided
--                 by R (all relevant chunks of the query, retrieved or not: trec_eval's map_cut_K)
--   map         = the same over the whole list, no cut-off (trec_eval's map)
--   judged@K    = chunks with a judgement (grade 0 included) in first K / K: how much of what
--                 the other measures count as not relevant was judged so (ir_measures' Judged@K)
--
-- Judged only (p_judged_only, trec_eval's -J): the chunks without a judgement are taken out of
-- each list before it is measured, the chunks below them moving up; the divisors (relevant
-- chunks, ideal DCG) are the query's as always.
--
-- How: every measure is a sum over the judged chunks (grade > 0; for judged@K grade 0 too) in
-- the first K results (for rprec K is the query's R; map without a cut-off: the whole list),
--   value(query, name@K) = sum over those chunks of pgeval.measure_gain(...)
--                          / pgeval.measure_norm(name, K, query)
-- (the gain of a chunk depends on its rank and grade only, the divisor on the query and K), so
-- a query without a judged chunk in its first K scores 0 and needs no row. pgeval.per_query sums
-- the gains of each query and divides once; pgeval.summary sums gain / divisor over all chunks
-- of the run at once, without grouping by query (the same sum, in another order: equal to
-- 1e-15), and divides by the number of valid queries.

-- The rank of the first chunk of grade >= p_rel in a list's judged grades (NULL: none).
CREATE OR REPLACE FUNCTION pgeval.first_relevant(p_grades smallint[], p_rel integer)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT least(CASE WHEN p_rel <= 1 THEN array_position(p_grades, 1::smallint) END,
                 CASE WHEN p_rel <= 2 THEN array_position(p_grades, 2::smallint) END,
                 CASE WHEN p_rel <= 3 THEN array_position(p_grades, 3::smallint) END)
$$;

-- What a judged chunk at rank p_rank (grade p_grade > 0; 0 too for judged@K) adds to measure
-- p_name of its query, for every cut-off K >= p_rank; p_first: the rank of the query's first
-- chunk of grade >= p_rel; p_seen: the number of chunks of grade >= p_rel at rank <= p_rank (NULL when this chunk's grade
-- is below p_rel), so that p_seen / p_rank is the precision at this relevant rank (map).
CREATE OR REPLACE FUNCTION pgeval.measure_gain(p_name text, p_rank integer, p_grade smallint,
                                               p_rel integer, p_first integer, p_seen integer)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_name
               WHEN 'recall'    THEN CASE WHEN p_grade >= p_rel THEN 1.0::float8 ELSE 0.0 END
               WHEN 'precision' THEN CASE WHEN p_grade >= p_rel THEN 1.0::float8 ELSE 0.0 END
               WHEN 'rprec'     THEN CASE WHEN p_grade >= p_rel THEN 1.0::float8 ELSE 0.0 END
               WHEN 'hit'       THEN CASE WHEN p_rank = p_first THEN 1.0::float8 ELSE 0.0 END
               WHEN 'mrr'       THEN CASE WHEN p_rank = p_first THEN 1.0::float8 / p_rank
                                          ELSE 0.0 END
               WHEN 'ndcg'      THEN ((1 << p_grade) - 1) * ln(2.0::float8)
                                     / ln(p_rank + 1.0::float8)
               WHEN 'map'       THEN coalesce(p_seen::float8 / p_rank, 0.0)
               WHEN 'judged'    THEN 1.0::float8
           END
$$;

-- The divisor of measure p_name@p_k (p_k NULL for rprec) for a valid query with p_n_rel chunks of
-- grade >= p_rel and ideal-DCG prefix sums p_ideal_dcg (pgeval.query.ideal_dcg).
CREATE OR REPLACE FUNCTION pgeval.measure_norm(p_name text, p_k integer, p_n_rel integer,
                                               p_ideal_dcg double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_name
               WHEN 'recall'    THEN p_n_rel::float8
               WHEN 'rprec'     THEN p_n_rel::float8
               WHEN 'map'       THEN p_n_rel::float8
               WHEN 'precision' THEN p_k::float8
               WHEN 'judged'    THEN p_k::float8
               WHEN 'ndcg'      THEN p_ideal_dcg[least(p_k, cardinality(p_ideal_dcg))]
               ELSE 1.0::float8
           END
$$;

-- The valid queries of a run's test set (at least one chunk of grade >= p_rel), with what the
-- divisors need.
CREATE OR REPLACE FUNCTION pgeval.valid_queries(p_run bigint, p_rel integer)
RETURNS TABLE (query_id text, n_rel integer, ideal_dcg double precision[])
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT q.query_id, q.n_rel[p_rel], q.ideal_dcg
      FROM pgeval.query q
     WHERE q.testset_id = (SELECT r.testset_id FROM pgeval.run r WHERE r.run_id = p_run)
       AND q.n_rel[p_rel] > 0
$$;

-- Where the chunks of grade >= p_grade (2 or 3) begin in a list's rel_grades, which holds the
-- grades 1, then 2, then 3 (result_list.rel_grades); past the end when there are none.
CREATE OR REPLACE FUNCTION pgeval.grade_start(p_grades smallint[], p_grade integer)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_position(p_grades, p_grade::smallint),
                    array_position(p_grades, (p_grade + 1)::smallint), cardinality(p_grades) + 1)
$$;

-- A run's lists as the metrics read them: the judged grades by position and the judged-relevant
-- positions with their grades (result_list's generated columns); p_judged_only: the same of each
-- list with its unjudged positions taken out (trec_eval's -J), computed as the generated columns
-- are (migration 0005_storage). One branch runs: the other's filter is false once per call.
CREATE OR REPLACE FUNCTION pgeval.judged_lists(p_run bigint, p_judged_only boolean DEFAULT false)
RETURNS TABLE (query_id text, grades smallint[], rel_ranks integer[], rel_grades smallint[])
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT x.query_id, x.grades, x.rel_ranks, x.rel_grades
      FROM pgeval.result_list x WHERE x.run_id = p_run AND NOT p_judged_only
    UNION ALL
    SELECT x.query_id, c.g,
           array_positions(c.g, 1::smallint) || array_positions(c.g, 2::smallint)
           || array_positions(c.g, 3::smallint),
           array_fill(1::smallint, ARRAY[cardinality(array_positions(c.g, 1::smallint))])
           || array_fill(2::smallint, ARRAY[cardinality(array_positions(c.g, 2::smallint))])
           || array_fill(3::smallint, ARRAY[cardinality(array_positions(c.g, 3::smallint))])
      FROM pgeval.result_list x CROSS JOIN LATERAL (SELECT array_remove(x.grades, NULL)) c(g)
     WHERE x.run_id = p_run AND p_judged_only
$$;

-- The judged chunks (grade > 0; grade 0 too when judged@K is asked for) at rank <= the largest
-- cut-off of p_measures (with rprec: or <= the largest relevant count of the test set's queries;
-- with map: every rank), of a run's valid queries: rank, grade, the rank of the query's first
-- chunk of grade >= p_rel, the number of chunks of grade >= p_rel at rank <= this one (seen; NULL
-- for a chunk below p_rel), and the query's divisor inputs. Reads result_list.rel_ranks /
-- rel_grades (generated from result_list.grades) and grades once per list: chunk ids never read;
-- one pass, no grouping. seen is computed only when a measure reads it (map): the planner drops an
-- unread column, and the positions it reads with it. p_judged_only: each list's grades with the
-- unjudged positions taken out (array_remove of the NULLs), its ranks counted in what is left.
CREATE OR REPLACE FUNCTION pgeval.judged_hits(p_run bigint, p_measures text[], p_rel integer,
                                              p_judged_only boolean DEFAULT false)
RETURNS TABLE (query_id text, rank integer, grade smallint, first_rank integer, seen integer,
               n_rel integer, ideal_dcg double precision[])
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    -- seen: for each grade >= p_rel, the number of that grade's ranks that are <= the rank, by
    -- width_bucket's binary search in that grade's slice of rel_ranks (ascending within a grade);
    -- no sort, no subquery, the slices taken once per list
    SELECT j.query_id, j.rank, j.grade, j.first_rank,
           CASE WHEN j.grade >= p_rel THEN width_bucket(j.rank, j.at1) + width_bucket(j.rank, j.at2)
                                           + width_bucket(j.rank, j.at3) END,
           v.n_rel, v.ideal_dcg
      FROM (SELECT l.query_id, l.first_rank, l.at1, l.at2, l.at3, unnest(l.ranks) AS rank,
                   unnest(l.grades) AS grade
              -- OFFSET 0: the first relevant rank once per list, not once per unnested row
              FROM (SELECT x.query_id,
                           -- judged@K: the positions judged 0 first (their gain is 0 elsewhere)
                           CASE WHEN z.zeros THEN array_positions(x.grades, 0::smallint)
                                                  || x.rel_ranks
                                ELSE x.rel_ranks END AS ranks,
                           CASE WHEN z.zeros
                                THEN array_fill(0::smallint, ARRAY[cardinality(
                                         array_positions(x.grades, 0::smallint))]) || x.rel_grades
                                ELSE x.rel_grades END AS grades,
                           pgeval.first_relevant(x.grades, p_rel) AS first_rank,
                           CASE WHEN p_rel <= 1
                                THEN x.rel_ranks[:pgeval.grade_start(x.rel_grades, 2) - 1]
                                ELSE '{}' END AS at1,
                           CASE WHEN p_rel <= 2
                                THEN x.rel_ranks[pgeval.grade_start(x.rel_grades, 2)
                                                 :pgeval.grade_start(x.rel_grades, 3) - 1]
                                ELSE '{}' END AS at2,
                           x.rel_ranks[pgeval.grade_start(x.rel_grades, 3):] AS at3
                      FROM pgeval.judged_lists(p_run, p_judged_only) x
                     CROSS JOIN (SELECT coalesce(bool_or(m.name = 'judged'), false) AS zeros
                                   FROM pgeval.measure_spec(p_measures) m) z
                    OFFSET 0) l) j
      JOIN pgeval.valid_queries(p_run, p_rel) v ON v.query_id = j.query_id
     -- a bound on the rank alone (filtered below the join); each measure's own cut-off is
     -- applied by pgeval.measure_sums. rprec's bound: the largest relevant count of the test
     -- set; map without a cut-off: none
     WHERE j.rank <= (SELECT CASE WHEN bool_or(m.k IS NULL AND m.name = 'map') THEN 2147483647
                                  ELSE greatest(max(m.k), CASE WHEN bool_or(m.k IS NULL) THEN
                                           (SELECT max(q.n_rel[p_rel]) FROM pgeval.query q
                                             WHERE q.testset_id = (SELECT r.testset_id
                                                                     FROM pgeval.run r
                                                                    WHERE r.run_id = p_run))
                                       END) END
                        FROM pgeval.measure_spec(p_measures) m)
$$;

-- The rank bound of measure p_name@p_k in pgeval.measure_sums, as SQL over a row h of
-- pgeval.judged_hits: K; rprec: the query's relevant count; map without a cut-off: NULL (none).
CREATE OR REPLACE FUNCTION pgeval.measure_depth(p_name text, p_k integer)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(p_k::text, CASE p_name WHEN 'rprec' THEN 'h.n_rel' END)
$$;

-- The aggregates of the metric queries, one per measure of p_measures in their order, over the
-- rows h of pgeval.judged_hits (p_rel bound as $3): the sum of the gains of the chunks at
-- rank <= K (pgeval.measure_depth: rprec <= the query's relevant count, map every rank), each
-- divided by its query's divisor when
-- p_divided. Name and K are constants of the query, from pgeval.measure_spec, which has
-- validated them.
CREATE OR REPLACE FUNCTION pgeval.measure_sums(p_measures text[], p_divided boolean)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT string_agg(format('sum(pgeval.measure_gain(%L, h.rank, h.grade, $3, h.first_rank,'
                             ' h.seen)%s)%s', m.name,
                             CASE WHEN p_divided
                                  THEN format(' / pgeval.measure_norm(%L, %s, h.n_rel,'
                                              ' h.ideal_dcg)', m.name, coalesce(m.k::text, 'NULL'))
                                  ELSE '' END,
                             coalesce(' FILTER (WHERE h.rank <= ' || d.depth || ')', '')),
                      ', ' ORDER BY m.ord)
      FROM pgeval.measure_spec(p_measures) m
     CROSS JOIN LATERAL pgeval.measure_depth(m.name, m.k) AS d(depth)
$$;

-- One row per (valid query, measure): each query's gains summed in one pass (one aggregate per
-- measure, grouped by query), divided once by the query's divisor.
CREATE OR REPLACE FUNCTION pgeval.per_query(p_run bigint,
                                            p_measures text[] DEFAULT pgeval.default_measures(),
                                            p_rel integer DEFAULT 1,
                                            p_judged_only boolean DEFAULT false)
RETURNS TABLE (query_id text, measure text, ord integer, value double precision)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'WITH s AS (SELECT h.query_id, ARRAY[%s] AS gain
                      FROM pgeval.judged_hits($1, $2, $3, $4) h GROUP BY h.query_id)
         SELECT v.query_id, m.measure, m.ord,
                coalesce(s.gain[m.ord], 0.0)
                / pgeval.measure_norm(m.name, m.k, v.n_rel, v.ideal_dcg)
           FROM pgeval.valid_queries($1, $3) v
           LEFT JOIN s ON s.query_id = v.query_id
          CROSS JOIN pgeval.measure_spec($2) m', pgeval.measure_sums(p_measures, false))
        USING p_run, p_measures, p_rel, p_judged_only;
END
$$;

-- Per-run value: arithmetic mean over valid queries (n_valid of them; zeros need no rows): one
-- pass over the run's judged chunks, one aggregate per measure, no grouping by query, no row per
-- (chunk, measure).
CREATE OR REPLACE FUNCTION pgeval.summary(p_run bigint,
                                          p_measures text[] DEFAULT pgeval.default_measures(),
                                          p_rel integer DEFAULT 1,
                                          p_judged_only boolean DEFAULT false)
RETURNS TABLE (measure text, ord integer, value double precision, n_valid bigint)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'WITH tot AS (SELECT ARRAY[%s] AS total FROM pgeval.judged_hits($1, $2, $3, $4) h),
              nv AS (SELECT count(*) AS n FROM pgeval.valid_queries($1, $3))
         SELECT m.measure, m.ord, CASE WHEN nv.n > 0 THEN coalesce(tot.total[m.ord], 0) / nv.n END,
                nv.n
           FROM pgeval.measure_spec($2) m CROSS JOIN tot CROSS JOIN nv
          ORDER BY m.ord', pgeval.measure_sums(p_measures, true))
        USING p_run, p_measures, p_rel, p_judged_only;
END
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
            FROM pgeval.query q
            LEFT JOIN present p ON p.query_id = q.query_id
           -- the test set as a scalar: its queries are estimated as all of them, and the lists
           -- are hash-joined, not probed one index search per query
           WHERE q.testset_id = (SELECT r.testset_id FROM pgeval.run r WHERE r.run_id = p_run))
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
                                          p_rel integer DEFAULT 1,
                                          p_judged_only boolean DEFAULT false)
RETURNS TABLE (query_type text, measure text, ord integer, value double precision, n_valid bigint)
LANGUAGE sql STABLE AS $$
    SELECT t.query_type, pq.measure, pq.ord, avg(pq.value), count(*)
      FROM pgeval.per_query(p_run, p_measures, p_rel, p_judged_only) pq
      JOIN pgeval.run r ON r.run_id = p_run
      JOIN pgeval.query q ON q.testset_id = r.testset_id AND q.query_id = pq.query_id
      CROSS JOIN LATERAL unnest(CASE WHEN cardinality(q.types) = 0 THEN ARRAY['(untyped)']
                                     ELSE q.types END) AS t(query_type)
     GROUP BY t.query_type, pq.measure, pq.ord
     ORDER BY t.query_type, pq.ord
$$;
