-- Judging the pool's holes (docs/judging.md): which chunks of an experiment's top K carry no
-- judgement, and how a model judge's proposed grades agree with the human ones.
--
--   SELECT * FROM pgeval.pool((SELECT experiment_id FROM pgeval.experiment WHERE name = 'e1'), 10)
--    WHERE grade IS NULL;
--   SELECT * FROM pgeval.judge_confusion(1, 'openai:gpt-4o-mini');
--   SELECT pgeval.judge_kappa(1, 'openai:gpt-4o-mini');

-- The chunks among the first p_depth of every ranked list of every run of the experiment (every
-- stage, every repetition), one row per query and chunk: its grade in the runs' test set (NULL:
-- not judged, a hole of the pool), its best rank and where it was seen ('stage:rank', a stage's
-- best rank over its repetitions, best first); in the test set's query order, then best rank,
-- then chunk id (byte order).
CREATE OR REPLACE FUNCTION pgeval.pool(p_experiment bigint, p_depth integer)
RETURNS TABLE (query_id text, chunk_id text, grade smallint, best_rank integer, seen_at text[])
LANGUAGE sql STABLE AS $$
    WITH seen AS (
        SELECT r.testset_id, l.query_id, u.chunk_id, r.stage, min(u.rank)::integer AS rank
          FROM pgeval.run r
          JOIN pgeval.result_list l USING (run_id)
         CROSS JOIN LATERAL unnest(l.chunk_ids[1:p_depth]) WITH ORDINALITY AS u(chunk_id, rank)
         WHERE r.experiment_id = p_experiment
         GROUP BY 1, 2, 3, 4)
    SELECT s.query_id, s.chunk_id, j.grade, min(s.rank),
           array_agg(s.stage || ':' || s.rank ORDER BY s.rank, s.stage COLLATE "C")
      FROM seen s
      JOIN pgeval.query q ON q.testset_id = s.testset_id AND q.query_id = s.query_id
      LEFT JOIN pgeval.qrel j ON j.testset_id = s.testset_id AND j.query_id = s.query_id
                             AND j.chunk_id = s.chunk_id
     GROUP BY s.query_id, s.chunk_id, j.grade, q.position
     ORDER BY q.position, min(s.rank), s.chunk_id COLLATE "C"
$$;

-- How the model judge p_judge graded the chunks the test set's people graded: one row per
-- (human grade, model grade) pair that occurs, with its count.
CREATE OR REPLACE FUNCTION pgeval.judge_confusion(p_testset bigint, p_judge text)
RETURNS TABLE (human smallint, model smallint, n bigint)
LANGUAGE sql STABLE AS $$
    SELECT j.grade, m.grade, count(*)
      FROM pgeval.model_grade m
      JOIN pgeval.qrel j ON j.testset_id = m.testset_id AND j.query_id = m.query_id
                        AND j.chunk_id = m.chunk_id AND j.source = 'human'
     WHERE m.testset_id = p_testset AND m.judge = p_judge
     GROUP BY 1, 2
     ORDER BY 1, 2
$$;

-- Cohen's kappa (unweighted) of the model judge against the human grades over the chunks both
-- graded: (p_o - p_e) / (1 - p_e), p_o the share of equal grades, p_e the share expected by
-- chance from each side's grade frequencies. NULL when no chunk was graded by both, or when
-- p_e = 1 (both sides gave one and the same grade throughout).
CREATE OR REPLACE FUNCTION pgeval.judge_kappa(p_testset bigint, p_judge text)
RETURNS double precision
LANGUAGE sql STABLE AS $$
    WITH c AS (SELECT * FROM pgeval.judge_confusion(p_testset, p_judge)),
         t AS (SELECT sum(n)::float8 AS total,
                      coalesce(sum(n) FILTER (WHERE human = model), 0)::float8 AS agree FROM c),
         h AS (SELECT human AS g, sum(n)::float8 AS a FROM c GROUP BY 1),
         m AS (SELECT model AS g, sum(n)::float8 AS b FROM c GROUP BY 1),
         e AS (SELECT coalesce(sum(h.a * m.b), 0) AS chance FROM h JOIN m USING (g))
    SELECT CASE WHEN t.total IS NULL OR e.chance = t.total * t.total THEN NULL
                ELSE (t.agree / t.total - e.chance / (t.total * t.total))
                     / (1 - e.chance / (t.total * t.total)) END
      FROM t, e
$$;
