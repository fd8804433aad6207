-- End-to-end answers (METRICS.md "End-to-end", issue 6) and latency percentiles (nearest rank).
-- Rows come from `pgeval answers import` (table pgeval.answer); everything below only reads them.
--
--   citation precision = cited references that are supported / cited references;
--                        0 when an answerable query cites nothing, 1 when an unanswerable one
--                        cites nothing.
--   answer correct     = an answerable query's answer contains every expected fact (a fact is a
--                        string, or an array of alternative strings of which one must appear);
--                        an unanswerable query's answer contains a refusal phrase.
-- Matching is containment after NFKC normalisation, lower-casing, straightened quotes and
-- collapsed white space. A test-set query with no imported answer scores 0 on both (like a query
-- missing from a run). An answerable query without expected facts cannot be judged: its
-- correctness is NULL, it is left out of answer accuracy and counted as `unjudged`.

-- Built-in refusal phrases (Chinese and English), in force while pgeval.refusal_phrase is empty.
CREATE OR REPLACE FUNCTION pgeval.default_refusal_phrases()
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY[
        '无法回答', '不能回答', '无法找到', '没有找到相关', '未找到相关', '没有相关信息',
        '没有提供相关', '未提供相关', '没有提及', '未提及', '我不知道', '无法确定',
        '知识库中没有', '资料中没有', '文档中没有', '无相关内容',
        'i don''t know', 'i do not know', 'cannot answer', 'can''t answer', 'unable to answer',
        'not able to answer', 'no relevant information', 'no information about',
        'does not contain information', 'do not contain information', 'not mentioned in',
        'insufficient information', 'not enough information'
    ]
$$;

-- The refusal phrases in force: the configured table, or the defaults when it is empty.
CREATE OR REPLACE FUNCTION pgeval.refusal_phrases()
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN EXISTS (SELECT 1 FROM pgeval.refusal_phrase)
                THEN (SELECT array_agg(phrase ORDER BY phrase) FROM pgeval.refusal_phrase)
                ELSE pgeval.default_refusal_phrases() END
$$;

-- The form both sides of every containment test are brought to before matching.
CREATE OR REPLACE FUNCTION pgeval.match_text(p_text text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT btrim(regexp_replace(lower(translate(normalize(coalesce(p_text, ''), NFKC),
                                                E'\u2018\u2019\u201C\u201D', '''''""')),
                                '\s+', ' ', 'g'))
$$;

CREATE OR REPLACE FUNCTION pgeval.is_refusal(p_answer text,
                                             p_phrases text[] DEFAULT NULL)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(coalesce(p_phrases, pgeval.refusal_phrases())) AS p
                    WHERE pgeval.match_text(p) <> ''
                      AND strpos(pgeval.match_text(p_answer), pgeval.match_text(p)) > 0)
$$;

-- One expected fact found in an (already normalised) answer: a string, or any of an array.
CREATE OR REPLACE FUNCTION pgeval.fact_found(p_answer_norm text, p_fact jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(p_fact)
        WHEN 'string' THEN strpos(p_answer_norm, pgeval.match_text(p_fact #>> '{}')) > 0
        WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements_text(p_fact) AS alt
                                   WHERE strpos(p_answer_norm, pgeval.match_text(alt)) > 0)
        ELSE false END
$$;

-- Per query of the run's test set (every query, answerable or not).
CREATE OR REPLACE FUNCTION pgeval.answer_per_query(p_run bigint, p_refusals text[] DEFAULT NULL)
RETURNS TABLE (query_id text, answerable boolean, answered boolean, n_cited integer,
               n_supported integer, citation_precision double precision, refused boolean,
               n_facts integer, facts_found integer, answer_correct double precision,
               latency_ms double precision)
LANGUAGE sql STABLE AS $$
    WITH r AS (SELECT testset_id FROM pgeval.run WHERE run_id = p_run),
    ph AS (SELECT coalesce(p_refusals, pgeval.refusal_phrases()) AS phrases),
    x AS (
        SELECT q.query_id, q.position, q.answerable, a.query_id IS NOT NULL AS answered,
               a.latency_ms,
               (SELECT count(DISTINCT c) FROM unnest(a.cited) c)::integer AS n_cited,
               (SELECT count(DISTINCT c) FROM unnest(a.cited) c
                 WHERE c = ANY (a.supported))::integer AS n_supported,
               a.query_id IS NOT NULL AND pgeval.is_refusal(a.answer, ph.phrases) AS refused,
               CASE WHEN jsonb_typeof(q.expected_facts) = 'array'
                    THEN jsonb_array_length(q.expected_facts) ELSE 0 END AS n_facts,
               (SELECT count(*) FROM jsonb_array_elements(
                        CASE WHEN jsonb_typeof(q.expected_facts) = 'array'
                             THEN q.expected_facts ELSE '[]' END) AS f
                 WHERE a.query_id IS NOT NULL
                   AND pgeval.fact_found(pgeval.match_text(a.answer), f))::integer AS facts_found
          FROM pgeval.query q
          JOIN r USING (testset_id)
          CROSS JOIN ph
          LEFT JOIN pgeval.answer a ON a.run_id = p_run AND a.query_id = q.query_id)
    SELECT x.query_id, x.answerable, x.answered, x.n_cited, x.n_supported,
           CASE WHEN NOT x.answered THEN 0.0
                WHEN x.n_cited = 0 THEN CASE WHEN x.answerable THEN 0.0 ELSE 1.0 END
                ELSE x.n_supported::float8 / x.n_cited END,
           x.refused, x.n_facts, x.facts_found,
           CASE WHEN NOT x.answered THEN 0.0
                WHEN NOT x.answerable THEN CASE WHEN x.refused THEN 1.0 ELSE 0.0 END
                WHEN x.n_facts = 0 THEN NULL
                WHEN x.facts_found = x.n_facts THEN 1.0 ELSE 0.0 END,
           x.latency_ms
      FROM x
     ORDER BY x.position
$$;

-- Per run: the means and the counts a report shows. The two metrics are NULL when the run has no
-- imported answer at all (the metric does not exist for it: a gate lists its rules as not
-- applicable).
CREATE OR REPLACE FUNCTION pgeval.answer_summary(p_run bigint, p_refusals text[] DEFAULT NULL)
RETURNS TABLE (queries bigint, answered bigint, no_answer bigint, answerable bigint,
               unanswerable bigint, unjudged bigint, refused bigint,
               citation_precision double precision, answer_accuracy double precision,
               answerable_accuracy double precision, unanswerable_accuracy double precision)
LANGUAGE sql STABLE AS $$
    WITH pq AS (SELECT * FROM pgeval.answer_per_query(p_run, p_refusals)),
    has AS (SELECT EXISTS (SELECT 1 FROM pgeval.answer a WHERE a.run_id = p_run) AS any_answer)
    SELECT count(*),
           count(*) FILTER (WHERE pq.answered),
           count(*) FILTER (WHERE NOT pq.answered),
           count(*) FILTER (WHERE pq.answerable),
           count(*) FILTER (WHERE NOT pq.answerable),
           count(*) FILTER (WHERE pq.answered AND pq.answer_correct IS NULL),
           count(*) FILTER (WHERE pq.refused),
           CASE WHEN has.any_answer THEN avg(pq.citation_precision) END,
           CASE WHEN has.any_answer THEN avg(pq.answer_correct) END,
           CASE WHEN has.any_answer THEN avg(pq.answer_correct) FILTER (WHERE pq.answerable) END,
           CASE WHEN has.any_answer THEN avg(pq.answer_correct) FILTER (WHERE NOT pq.answerable) END
      FROM pq CROSS JOIN has
     GROUP BY has.any_answer
$$;

-- A run's latency per query: its own pgeval.query_timing rows; for a merge without timings of its
-- own (its fusion is one set-based statement over stored lists), the end-to-end latency of the
-- pipeline it ends: per query, the sum of its inputs' latencies (the paths searched one after the
-- other, as pgeval times them; an application searching them in parallel waits for the slowest
-- only), for the queries every input timed; nothing when an input has no latency.
CREATE OR REPLACE FUNCTION pgeval.query_latency(p_run bigint)
RETURNS TABLE (query_id text, latency_ms double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    inputs bigint[];
BEGIN
    IF EXISTS (SELECT 1 FROM pgeval.query_timing t WHERE t.run_id = p_run) THEN
        RETURN QUERY SELECT t.query_id, t.latency_ms FROM pgeval.query_timing t
                      WHERE t.run_id = p_run;
        RETURN;
    END IF;
    SELECT array_agg(x::bigint) INTO inputs
      FROM pgeval.run r CROSS JOIN LATERAL jsonb_array_elements_text(r.params->'input_runs') x
     WHERE r.run_id = p_run AND jsonb_typeof(r.params->'input_runs') = 'array'
       AND pgeval.stage_role(r.stage, r.params) = 'merge';
    IF inputs IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT l.query_id, sum(l.latency_ms)
          FROM unnest(inputs) AS i(run_id) CROSS JOIN LATERAL pgeval.query_latency(i.run_id) l
         GROUP BY l.query_id
        HAVING count(*) = cardinality(inputs);
END
$$;

-- Latency percentiles of a run. p_source 'retrieval': pgeval.query_latency (the run's own timing
-- boundary; a merge's, the pipeline's end to end); 'answer': pgeval.answer.latency_ms (end to
-- end, when imported).
CREATE OR REPLACE FUNCTION pgeval.run_latency(p_run bigint,
                                              p_fractions double precision[]
                                                  DEFAULT '{0.5,0.95,0.99}',
                                              p_source text DEFAULT 'retrieval')
RETURNS TABLE (percentile double precision, latency_ms double precision, n bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    vals double precision[];
BEGIN
    IF p_source = 'retrieval' THEN
        SELECT array_agg(t.latency_ms) INTO vals FROM pgeval.query_latency(p_run) t;
    ELSIF p_source = 'answer' THEN
        SELECT array_agg(a.latency_ms) INTO vals FROM pgeval.answer a
         WHERE a.run_id = p_run AND a.latency_ms IS NOT NULL;
    ELSE
        RAISE EXCEPTION 'latency source must be retrieval or answer, got %', p_source
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT f, pgeval.nearest_rank(vals, f), coalesce(cardinality(vals), 0)::bigint
          FROM unnest(p_fractions) WITH ORDINALITY AS u(f, i)
         ORDER BY u.i;
END
$$;
