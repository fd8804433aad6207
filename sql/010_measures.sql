-- Measure names and cut-offs (METRICS.md). Applied by `pgeval init` on every install/upgrade.
-- A ranked measure is spelled name@K (recall@K, precision@K, hit@K, mrr@K, ndcg@K, map@K,
-- judged@K: the share of the first K with a judgement, grade 0 included) or, for
-- a family without a cut-off, name alone (rprec: R-precision, cut at the query's relevant count;
-- map: average precision over the whole list). map is spelled both ways: two rows below.

-- The registry (evaluator/measure/measures.py holds the same lists; tests/test_measures_registry.py
-- keeps them equal): the defaults, the ranked families with and without a cut-off, the largest K.
CREATE OR REPLACE FUNCTION pgeval.default_measures()
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY['recall@3', 'recall@5', 'recall@10', 'mrr@20', 'ndcg@5', 'ndcg@10',
                 'precision@3', 'precision@5', 'precision@10', 'hit@3', 'hit@5', 'hit@10']
$$;

CREATE OR REPLACE FUNCTION pgeval.measure_families()
RETURNS TABLE (family text, needs_cutoff boolean)
LANGUAGE sql IMMUTABLE PARALLEL SAFE ROWS 9 AS $$
    VALUES ('recall', true), ('mrr', true), ('ndcg', true), ('precision', true), ('hit', true),
           ('map', true), ('map', false), ('rprec', false), ('judged', true)
$$;

-- The ranked families spelled name@K.
CREATE OR REPLACE FUNCTION pgeval.ranked_measures()
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(f.family ORDER BY f.ord)
      FROM pgeval.measure_families() WITH ORDINALITY AS f(family, needs_cutoff, ord)
     WHERE f.needs_cutoff
$$;

-- How a measure with a cut-off is spelled, name@K (evaluator/measure/measures.py NAME_PATTERN, the
-- same rule: tests/test_measures_registry.py compares them).
CREATE OR REPLACE FUNCTION pgeval.measure_name_pattern()
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT '^([a-z_]+)@([1-9][0-9]{0,5})$'
$$;

CREATE OR REPLACE FUNCTION pgeval.max_cutoff()
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 100000
$$;

-- Parses and validates a list of measures; raises on an unknown name or a bad cut-off. k is
-- NULL for a measure without a cut-off (rprec, map).
-- PARALLEL SAFE (it only reads its argument): the metric queries that call it can run in
-- parallel workers.
CREATE OR REPLACE FUNCTION pgeval.measure_spec(p_measures text[])
RETURNS TABLE (ord integer, measure text, name text, k integer)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE ROWS 12 AS $$
DECLARE
    m text;
    i integer := 0;
    families text[] := pgeval.ranked_measures();
    uncut text[] := (SELECT array_agg(f.family) FROM pgeval.measure_families() f
                      WHERE NOT f.needs_cutoff);
    max_k integer := pgeval.max_cutoff();
    spelled text := pgeval.measure_name_pattern();
BEGIN
    IF p_measures IS NULL OR cardinality(p_measures) = 0 THEN
        RAISE EXCEPTION 'no measures given' USING ERRCODE = '22023';
    END IF;
    FOREACH m IN ARRAY p_measures LOOP
        i := i + 1;
        IF m = ANY (uncut) THEN
            ord := i; measure := m; name := m; k := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF m !~ spelled OR NOT split_part(m, '@', 1) = ANY (families)
           OR split_part(m, '@', 2)::integer > max_k THEN
            RAISE EXCEPTION 'unknown measure "%": use %@K with 1 <= K <= %, or %', m,
                array_to_string(families, '@K, '), max_k, array_to_string(uncut, ', ')
                USING ERRCODE = '22023';
        END IF;
        ord := i; measure := m; name := split_part(m, '@', 1); k := split_part(m, '@', 2)::integer;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Number of chunks of grade >= p_rel among a query's judged grades.
CREATE OR REPLACE FUNCTION pgeval.n_relevant(p_grades smallint[], p_rel integer)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT count(*)::integer FROM unnest(p_grades) AS g WHERE g >= p_rel
$$;

-- Recomputes what is derived from a test set's judgements (called by the loader; call it after
-- editing pgeval.qrel by hand): the per-query ideal-DCG prefix sums, the relevant counts
-- n_rel[r] = number of chunks of grade >= r, and the judged grade stored with every result row
-- of the test set's runs (pgeval.result_list.grades, which the metrics read).
-- IDCG@K = ideal_dcg[least(K, cardinality(ideal_dcg))]; gains 2^g - 1, discount 1/log2(i + 1).
CREATE OR REPLACE FUNCTION pgeval.refresh_ideal(p_testset bigint)
RETURNS void LANGUAGE sql AS $$
    UPDATE pgeval.query q
       SET grades_desc = coalesce(s.grades, '{}'), ideal_dcg = coalesce(s.cum, '{}'),
           n_rel = ARRAY[pgeval.n_relevant(s.grades, 1), pgeval.n_relevant(s.grades, 2),
                         pgeval.n_relevant(s.grades, 3)]
      FROM (SELECT q2.query_id, a.grades, a.cum
              FROM pgeval.query q2
              LEFT JOIN LATERAL (
                  SELECT array_agg(grade ORDER BY pos) AS grades, array_agg(cum ORDER BY pos) AS cum
                    FROM (SELECT grade, pos,
                                 sum(((1 << grade) - 1) * ln(2.0::float8) / ln(pos + 1.0::float8))
                                     OVER (ORDER BY pos) AS cum
                            FROM (SELECT j.grade, row_number() OVER (ORDER BY j.grade DESC) AS pos
                                    FROM pgeval.qrel j
                                   WHERE j.testset_id = p_testset AND j.query_id = q2.query_id
                                     AND j.grade > 0) ranked) c
              ) a ON true
             WHERE q2.testset_id = p_testset) s
     WHERE q.testset_id = p_testset AND q.query_id = s.query_id;
    WITH g AS (SELECT l.run_id, l.query_id,
                      (SELECT array_agg(j.grade ORDER BY u.pos)
                         FROM unnest(l.chunk_ids) WITH ORDINALITY AS u(chunk_id, pos)
                         LEFT JOIN pgeval.qrel j ON j.testset_id = p_testset
                               AND j.query_id = l.query_id AND j.chunk_id = u.chunk_id) AS grades
                 FROM pgeval.result_list l
                WHERE l.run_id IN (SELECT run_id FROM pgeval.run WHERE testset_id = p_testset))
    UPDATE pgeval.result_list l SET grades = g.grades
      FROM g
     WHERE l.run_id = g.run_id AND l.query_id = g.query_id
       AND g.grades IS DISTINCT FROM l.grades
$$;
