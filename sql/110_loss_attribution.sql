-- Loss attribution (METRICS.md "Loss attribution"): every relevant chunk of every valid query
-- that is not in the final stage's top K is charged to the first link of the chain that does not
-- hold it.
--
-- The chain of one repetition, built from its final stage (the last in the experiment's order):
--   final = rerank: rerank (top K) <- its input, top M (M = params.top_n, else the run's depth,
--                   else K). The input is params.input (a label or stage), else the latest merge
--                   before it, else the latest retrieval path before it.
--   final = merge:  merge (top K).
--   merge (either case) <- the retrieval paths, each cut at its own depth D: params.inputs (labels
--                   or stages), else every earlier path (ann, keyword, other lists), the exact
--                   stage included only when it is the sole vector path.
--   no merge:       the single path (the rerank's input, or the final stage itself) is cut where it
--                   hands on: M under a rerank, K when it is final.
--   exact:          the exact stage of the same repetition, cut like the paths (its own D under a
--                   merge, the single path's cut otherwise). It splits "not retrieved" into index
--                   and reach only when the paths hold an ANN stage or exact search itself;
--                   otherwise the category is retrieval.
--
-- Categories, in chain order: index, reach (or retrieval), fusion, rerank; "kept" are the relevant
-- chunks in the final top K. A link the experiment lacks has no category.

CREATE OR REPLACE FUNCTION pgeval.loss_check(p_k integer, p_rel integer)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_k IS NULL OR p_k < 1 THEN
        RAISE EXCEPTION 'cut-off K must be >= 1, got %', p_k USING ERRCODE = '22023';
    END IF;
    IF p_rel IS NULL OR p_rel NOT BETWEEN 1 AND 3 THEN
        RAISE EXCEPTION 'relevance threshold must be 1, 2 or 3, got %', p_rel USING ERRCODE = '22023';
    END IF;
    RETURN true;
END
$$;

-- The links of the chain, one row per (repetition, run, link); link is final, rerank, merge,
-- path or exact; cut is the rank a chunk must reach to be held by that link.
CREATE OR REPLACE FUNCTION pgeval.loss_chain(p_experiment bigint, p_k integer DEFAULT 10,
                                             p_repetition integer DEFAULT 1)
RETURNS TABLE (repetition integer, run_id bigint, label text, stage text, role text, link text,
               cut integer)
LANGUAGE sql STABLE AS $$
    WITH s AS (SELECT * FROM pgeval.experiment_stages(p_experiment, p_repetition) es
                WHERE pgeval.loss_check(p_k, 1)),
    fin AS (SELECT * FROM s WHERE s.is_final),
    -- what a final rerank re-scored: params.input, else the latest merge, else the latest path
    inp AS (SELECT f.repetition,
                   (SELECT t.run_id FROM s t
                     WHERE t.repetition = f.repetition AND t."position" < f."position"
                       AND (t.role <> 'rerank' OR f.params->>'input' IN (t.label, t.stage))
                     ORDER BY coalesce(f.params->>'input' IN (t.label, t.stage), false) DESC,
                              t.role = 'merge' DESC, t.role = 'exact', t."position" DESC
                     LIMIT 1) AS run_id,
                   coalesce(CASE WHEN f.params->>'top_n' ~ '^[0-9]+$'
                                 THEN (f.params->>'top_n')::integer END, f.depth, p_k) AS m
              FROM fin f WHERE f.role = 'rerank'),
    -- per repetition: the merge link (if any) or the single path, and their cuts
    h AS (SELECT f.repetition, f.run_id AS final_id, i.run_id IS NOT NULL AS has_rerank,
                 CASE WHEN f.role = 'merge' THEN f.run_id
                      WHEN ti.role = 'merge' THEN ti.run_id END AS merge_id,
                 CASE WHEN f.role = 'merge' THEN p_k ELSE i.m END AS merge_cut,
                 CASE WHEN f.role = 'merge' OR ti.role = 'merge' THEN NULL
                      ELSE coalesce(i.run_id, f.run_id) END AS single_id,
                 CASE WHEN i.run_id IS NOT NULL THEN i.m ELSE p_k END AS single_cut
            FROM fin f
            LEFT JOIN inp i ON i.repetition = f.repetition
            LEFT JOIN s ti ON ti.run_id = i.run_id),
    mp AS (SELECT h.repetition, m."position",
                  CASE jsonb_typeof(m.params->'inputs') WHEN 'array' THEN m.params->'inputs' END
                      AS inputs
             FROM h JOIN s m ON m.run_id = h.merge_id),
    -- under a merge: its named inputs, else every earlier list (exact only when no ANN stage
    -- precedes the merge); without a merge: the single path
    paths AS (
        SELECT t.repetition, t.run_id, coalesce(t.depth, 2147483647) AS cut
          FROM mp JOIN s t ON t.repetition = mp.repetition AND t."position" < mp."position"
         WHERE t.role NOT IN ('merge', 'rerank')
           AND CASE WHEN EXISTS (SELECT 1 FROM s u
                                  WHERE u.repetition = mp.repetition
                                    AND u."position" < mp."position"
                                    AND mp.inputs ?| ARRAY[u.label, u.stage])
                    THEN mp.inputs ?| ARRAY[t.label, t.stage]
                    ELSE t.role <> 'exact'
                         OR NOT EXISTS (SELECT 1 FROM s u
                                         WHERE u.repetition = mp.repetition
                                           AND u."position" < mp."position" AND u.role = 'ann')
               END
        UNION ALL
        SELECT h.repetition, h.single_id, h.single_cut FROM h WHERE h.single_id IS NOT NULL),
    -- the exact stage, cut like the paths, where the paths hold a vector path
    ex AS (SELECT DISTINCT ON (t.repetition) t.repetition, t.run_id,
                  CASE WHEN h.merge_id IS NOT NULL THEN coalesce(t.depth, 2147483647)
                       ELSE h.single_cut END AS cut
             FROM s t JOIN h ON h.repetition = t.repetition
            WHERE t.role = 'exact'
              AND EXISTS (SELECT 1 FROM paths p JOIN s u ON u.run_id = p.run_id
                           WHERE p.repetition = t.repetition AND u.role IN ('ann', 'exact'))
            ORDER BY t.repetition, t."position"),
    links AS (
        SELECT h.repetition, h.final_id AS run_id, 'final' AS link, p_k AS cut, 1 AS ord FROM h
        UNION ALL
        SELECT h.repetition, h.final_id, 'rerank', p_k, 2 FROM h WHERE h.has_rerank
        UNION ALL
        SELECT h.repetition, h.merge_id, 'merge', h.merge_cut, 3 FROM h WHERE h.merge_id IS NOT NULL
        UNION ALL
        SELECT p.repetition, p.run_id, 'path', p.cut, 4 FROM paths p
        UNION ALL
        SELECT ex.repetition, ex.run_id, 'exact', ex.cut, 5 FROM ex)
    SELECT l.repetition, l.run_id, t.label, t.stage, t.role, l.link, l.cut
      FROM links l JOIN s t ON t.run_id = l.run_id
     ORDER BY l.repetition, l.ord, t."position"
$$;

-- The fate of every relevant chunk (grade >= p_rel) of every valid query: its category (kept,
-- index, reach, retrieval, fusion, rerank) and the ranks that decided it (NULL: not held by that
-- link within its cut). n_relevant is the query's number of relevant chunks.
CREATE OR REPLACE FUNCTION pgeval.chunk_fate(p_experiment bigint, p_k integer DEFAULT 10,
                                             p_repetition integer DEFAULT 1,
                                             p_rel integer DEFAULT 1)
RETURNS TABLE (repetition integer, query_id text, chunk_id text, grade smallint,
               n_relevant bigint, category text, final_rank integer, merge_rank integer,
               path_rank integer, exact_rank integer, paths text[])
LANGUAGE sql STABLE AS $$
    WITH ch AS (SELECT * FROM pgeval.loss_chain(p_experiment, p_k, p_repetition)
                 WHERE pgeval.loss_check(p_k, p_rel)),
    flags AS (SELECT ch.repetition, bool_or(ch.link = 'exact') AS split,
                     bool_or(ch.link = 'merge') AS has_merge, bool_or(ch.link = 'rerank') AS has_rerank
                FROM ch GROUP BY ch.repetition),
    rel AS (SELECT f.repetition, j.query_id, j.chunk_id, j.grade,
                   count(*) OVER (PARTITION BY f.repetition, j.query_id) AS n_rel
              FROM pgeval.experiment e
              JOIN pgeval.qrel j ON j.testset_id = e.testset_id
             CROSS JOIN flags f
             WHERE e.experiment_id = p_experiment AND j.grade >= p_rel),
    pos AS (SELECT rel.*, h.*
              FROM rel LEFT JOIN LATERAL (
                  SELECT min(res.rank) FILTER (WHERE ch.link = 'final') AS final_rank,
                         min(res.rank) FILTER (WHERE ch.link = 'merge') AS merge_rank,
                         min(res.rank) FILTER (WHERE ch.link = 'path') AS path_rank,
                         min(res.rank) FILTER (WHERE ch.link = 'exact') AS exact_rank,
                         array_agg(ch.label ORDER BY res.rank, ch.label)
                             FILTER (WHERE ch.link = 'path') AS paths
                    FROM ch JOIN pgeval.result res
                      ON res.run_id = ch.run_id AND res.query_id = rel.query_id
                     AND res.chunk_id = rel.chunk_id AND res.rank <= ch.cut
                   WHERE ch.repetition = rel.repetition) h ON true)
    SELECT p.repetition, p.query_id, p.chunk_id, p.grade, p.n_rel,
           CASE WHEN p.final_rank IS NOT NULL THEN 'kept'
                WHEN p.path_rank IS NULL THEN
                    CASE WHEN NOT f.split THEN 'retrieval'
                         WHEN p.exact_rank IS NOT NULL THEN 'index' ELSE 'reach' END
                WHEN f.has_merge AND p.merge_rank IS NULL THEN 'fusion'
                WHEN f.has_rerank THEN 'rerank'
                ELSE 'unattributed'   -- cannot happen for a consistent chain
           END,
           p.final_rank, p.merge_rank, p.path_rank, p.exact_rank, coalesce(p.paths, '{}')
      FROM pos p JOIN flags f ON f.repetition = p.repetition
     ORDER BY p.repetition, p.query_id COLLATE "C", p.chunk_id COLLATE "C"
$$;

-- Only the lost chunks: every relevant chunk of a valid query missing from the final top K.
CREATE OR REPLACE FUNCTION pgeval.loss_attribution(p_experiment bigint, p_k integer DEFAULT 10,
                                                   p_repetition integer DEFAULT 1,
                                                   p_rel integer DEFAULT 1)
RETURNS TABLE (repetition integer, query_id text, chunk_id text, grade smallint,
               category text, merge_rank integer, path_rank integer, exact_rank integer,
               paths text[])
LANGUAGE sql STABLE AS $$
    SELECT f.repetition, f.query_id, f.chunk_id, f.grade, f.category, f.merge_rank, f.path_rank,
           f.exact_rank, f.paths
      FROM pgeval.chunk_fate(p_experiment, p_k, p_repetition, p_rel) f
     WHERE f.category <> 'kept'
$$;

-- The categories a repetition's chain has, in chain order (kept last).
CREATE OR REPLACE FUNCTION pgeval.loss_categories(p_experiment bigint, p_k integer DEFAULT 10,
                                                  p_repetition integer DEFAULT 1)
RETURNS TABLE (repetition integer, category text, ord integer)
LANGUAGE sql STABLE AS $$
    SELECT f.repetition, c.category, c.ord
      FROM (SELECT ch.repetition, bool_or(ch.link = 'exact') AS split,
                   bool_or(ch.link = 'merge') AS has_merge,
                   bool_or(ch.link = 'rerank') AS has_rerank
              FROM pgeval.loss_chain(p_experiment, p_k, p_repetition) ch
             GROUP BY ch.repetition) f
     CROSS JOIN LATERAL (VALUES ('index', 1, f.split), ('reach', 2, f.split),
                                ('retrieval', 3, NOT f.split), ('fusion', 4, f.has_merge),
                                ('rerank', 5, f.has_rerank), ('kept', 6, true))
                        AS c(category, ord, present)
     WHERE c.present
     ORDER BY f.repetition, c.ord
$$;

-- Counts per category, their share of all relevant chunks, and Recall@K points: the count of a
-- query divided by its number of relevant chunks, averaged over valid queries. The points of the
-- categories plus those of "kept" (= the final stage's Recall@K) sum to 1.
-- p_repetition NULL: every repetition, each value the mean over ALL repetitions (a category that
-- a repetition's chain lacks counts 0 there; points_min and points_max give the spread). A share
-- is the category's chunks over the chunks of every category, counted over the same repetitions:
-- the shares sum to 1 by construction, even when the repetitions' chains differ.
CREATE OR REPLACE FUNCTION pgeval.loss_summary(p_experiment bigint, p_k integer DEFAULT 10,
                                               p_repetition integer DEFAULT 1,
                                               p_rel integer DEFAULT 1)
RETURNS TABLE (category text, ord integer, chunks double precision, share double precision,
               recall_points double precision, points_min double precision,
               points_max double precision, relevant double precision,
               valid_queries double precision, repetitions bigint)
LANGUAGE sql STABLE AS $$
    WITH f AS (SELECT *, 1.0::float8 / fate.n_relevant AS w
                 FROM pgeval.chunk_fate(p_experiment, p_k, p_repetition, p_rel) fate),
    tot AS (SELECT f.repetition, count(DISTINCT f.query_id) AS n_valid, count(*) AS n_chunks
              FROM f GROUP BY f.repetition),
    per_rep AS (
        SELECT c.repetition, c.category, c.ord, count(f.chunk_id) AS chunks,
               count(f.chunk_id)::float8 / tot.n_chunks AS share,
               coalesce(sum(f.w), 0) / tot.n_valid AS points, tot.n_chunks, tot.n_valid
          FROM pgeval.loss_categories(p_experiment, p_k, p_repetition) c
          JOIN tot ON tot.repetition = c.repetition
          LEFT JOIN f ON f.repetition = c.repetition AND f.category = c.category
         GROUP BY c.repetition, c.category, c.ord, tot.n_chunks, tot.n_valid),
    whole AS (SELECT (SELECT count(*) FROM tot) AS n_reps,
                     (SELECT sum(r.chunks) FROM per_rep r) AS n_counted,
                     (SELECT avg(tot.n_chunks) FROM tot) AS n_chunks,
                     (SELECT avg(tot.n_valid) FROM tot) AS n_valid)
    SELECT r.category, min(r.ord), sum(r.chunks)::float8 / w.n_reps,
           sum(r.chunks)::float8 / nullif(w.n_counted, 0), sum(r.points) / w.n_reps,
           CASE WHEN count(*) < w.n_reps THEN least(min(r.points), 0) ELSE min(r.points) END,
           max(r.points), w.n_chunks::float8, w.n_valid::float8, w.n_reps
      FROM per_rep r CROSS JOIN whole w
     GROUP BY r.category, w.n_reps, w.n_counted, w.n_chunks, w.n_valid
     ORDER BY min(r.ord)
$$;

-- The same by query type tag (a query counts under each of its tags; untyped under
-- "(untyped)"): points are averaged over the valid queries carrying the tag; means and shares
-- over all repetitions as in pgeval.loss_summary (the shares of a tag sum to 1).
CREATE OR REPLACE FUNCTION pgeval.loss_by_type(p_experiment bigint, p_k integer DEFAULT 10,
                                               p_repetition integer DEFAULT 1,
                                               p_rel integer DEFAULT 1)
RETURNS TABLE (query_type text, category text, ord integer, queries double precision,
               chunks double precision, share double precision, recall_points double precision)
LANGUAGE sql STABLE AS $$
    WITH f AS (SELECT fate.*, 1.0::float8 / fate.n_relevant AS w, t.query_type
                 FROM pgeval.chunk_fate(p_experiment, p_k, p_repetition, p_rel) fate
                 JOIN pgeval.experiment e ON e.experiment_id = p_experiment
                 JOIN pgeval.query q ON q.testset_id = e.testset_id AND q.query_id = fate.query_id
                CROSS JOIN LATERAL unnest(CASE WHEN cardinality(q.types) = 0
                                               THEN ARRAY['(untyped)'] ELSE q.types END)
                                   AS t(query_type)),
    tot AS (SELECT f.repetition, f.query_type, count(DISTINCT f.query_id) AS n_valid,
                   count(*) AS n_chunks
              FROM f GROUP BY f.repetition, f.query_type),
    per_rep AS (
        SELECT tot.repetition, tot.query_type, c.category, c.ord, tot.n_valid,
               count(f.chunk_id) AS chunks, count(f.chunk_id)::float8 / tot.n_chunks AS share,
               coalesce(sum(f.w), 0) / tot.n_valid AS points
          FROM tot
          JOIN pgeval.loss_categories(p_experiment, p_k, p_repetition) c
            ON c.repetition = tot.repetition
          LEFT JOIN f ON f.repetition = tot.repetition AND f.query_type = tot.query_type
                     AND f.category = c.category
         GROUP BY tot.repetition, tot.query_type, c.category, c.ord, tot.n_valid, tot.n_chunks),
    whole AS (SELECT r.query_type, count(DISTINCT r.repetition) AS n_reps,
                     sum(r.chunks) AS n_counted
                FROM per_rep r GROUP BY r.query_type)
    SELECT r.query_type, r.category, min(r.ord), avg(r.n_valid),
           sum(r.chunks)::float8 / w.n_reps, sum(r.chunks)::float8 / nullif(w.n_counted, 0),
           sum(r.points) / w.n_reps
      FROM per_rep r JOIN whole w ON w.query_type = r.query_type
     GROUP BY r.query_type, r.category, w.n_reps, w.n_counted
     ORDER BY r.query_type, min(r.ord)
$$;

-- The worst queries of one repetition (NULL: the first): lowest final Recall@K first, then most
-- chunks lost; with their lost chunks and the category of each.
CREATE OR REPLACE FUNCTION pgeval.loss_worst_queries(p_experiment bigint, p_k integer DEFAULT 10,
                                                     p_repetition integer DEFAULT 1,
                                                     p_rel integer DEFAULT 1,
                                                     p_limit integer DEFAULT 10)
RETURNS TABLE (query_id text, query_text text, types text[], n_relevant bigint, kept bigint,
               recall double precision, lost_index bigint, lost_reach bigint,
               lost_retrieval bigint, lost_fusion bigint, lost_rerank bigint, lost jsonb)
LANGUAGE sql STABLE AS $$
    WITH rep AS (SELECT coalesce(p_repetition, min(r.repetition)) AS repetition
                   FROM pgeval.run r WHERE r.experiment_id = p_experiment),
    f AS (SELECT fate.* FROM rep
            CROSS JOIN LATERAL pgeval.chunk_fate(p_experiment, p_k, rep.repetition, p_rel) fate)
    SELECT f.query_id, q.query_text, q.types, max(f.n_relevant),
           count(*) FILTER (WHERE f.category = 'kept'),
           count(*) FILTER (WHERE f.category = 'kept')::float8 / max(f.n_relevant),
           count(*) FILTER (WHERE f.category = 'index'),
           count(*) FILTER (WHERE f.category = 'reach'),
           count(*) FILTER (WHERE f.category = 'retrieval'),
           count(*) FILTER (WHERE f.category = 'fusion'),
           count(*) FILTER (WHERE f.category = 'rerank'),
           coalesce(jsonb_agg(jsonb_build_object('chunk_id', f.chunk_id, 'grade', f.grade,
                                                 'category', f.category,
                                                 'merge_rank', f.merge_rank,
                                                 'path_rank', f.path_rank,
                                                 'exact_rank', f.exact_rank)
                              ORDER BY f.grade DESC, f.chunk_id COLLATE "C")
                        FILTER (WHERE f.category <> 'kept'), '[]'::jsonb)
      FROM f
      JOIN pgeval.experiment e ON e.experiment_id = p_experiment
      JOIN pgeval.query q ON q.testset_id = e.testset_id AND q.query_id = f.query_id
     GROUP BY f.query_id, q.query_text, q.types
    HAVING count(*) FILTER (WHERE f.category <> 'kept') > 0
     ORDER BY 6, count(*) FILTER (WHERE f.category <> 'kept') DESC, f.query_id COLLATE "C"
     LIMIT p_limit
$$;
