-- The stages of an experiment and the index's own loss (METRICS.md "Index recall").
--
-- An experiment's runs are rows of pgeval.run with experiment_id, stage (the kind: exact, hnsw,
-- ivfflat, diskann, bm25, merge, rerank, import, ...) and repetition. Their order is the order
-- of experiment.config->'stages' (strings, or objects with "name"/"stage"/"kind"); runs that the
-- list does not name follow in run_id order. The last stage of a repetition is the final stage.
-- A run's label is the middle of its name `{experiment}.{label}.{repetition}`, else its stage.

-- The part a stage plays: exact (brute force, the ceiling), ann (index scan storing the exact
-- distance: "score": "distance"), keyword, path (any other retrieval list, e.g. import), merge,
-- rerank. run.params->>'role' decides: every stage run records the role its kind has in
-- evaluator/kinds/registry.py (a new kind needs no change here), and an import may say it (an
-- imported list that is a rerank). The kinds below only read runs stored without a role (before
-- the registry recorded it); the kind is run.params->>'kind' when the pipeline named the stage
-- (`fast=hnsw`), else run.stage.
CREATE OR REPLACE FUNCTION pgeval.stage_role(p_stage text, p_params jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN p_params->>'role' IN ('exact', 'ann', 'keyword', 'path', 'merge', 'rerank')
            THEN p_params->>'role'
        WHEN kind = 'exact' THEN 'exact'
        WHEN kind IN ('merge', 'fusion') THEN 'merge'
        WHEN kind = 'rerank' THEN 'rerank'
        WHEN kind IN ('hnsw', 'ivfflat', 'diskann') THEN 'ann'
        WHEN kind IN ('bm25', 'fts', 'keyword') THEN 'keyword'
        WHEN p_params->>'score' = 'distance' AND kind <> 'import' THEN 'ann'
        ELSE 'path'
    END
      FROM (SELECT coalesce(p_params->>'kind', p_stage) AS kind) k
$$;

-- Runs of an experiment (all repetitions when p_repetition is NULL) with label, role, position
-- and whether the run is its repetition's final stage.
CREATE OR REPLACE FUNCTION pgeval.experiment_stages(p_experiment bigint,
                                                    p_repetition integer DEFAULT NULL)
RETURNS TABLE (run_id bigint, name text, label text, stage text, role text, repetition integer,
               "position" integer, depth integer, status text, params jsonb, is_final boolean)
LANGUAGE sql STABLE AS $$
    WITH e AS (SELECT experiment_id, name, config FROM pgeval.experiment
                WHERE experiment_id = p_experiment),
    cfg AS (SELECT o.ord::integer AS ord,
                   CASE jsonb_typeof(o.v) WHEN 'string' THEN o.v #>> '{}'
                        WHEN 'object' THEN coalesce(o.v->>'name', o.v->>'label', o.v->>'stage',
                                                    o.v->>'kind') END AS label
              FROM e CROSS JOIN LATERAL jsonb_array_elements(
                       CASE jsonb_typeof(e.config->'stages') WHEN 'array' THEN e.config->'stages'
                            ELSE '[]'::jsonb END) WITH ORDINALITY AS o(v, ord)),
    r AS (SELECT r.run_id, r.name, r.stage, r.repetition, r.depth, r.status, r.params,
                 CASE WHEN left(r.name, length(e.name) + 1) = e.name || '.'
                           AND right(r.name, length(r.repetition::text) + 1) = '.' || r.repetition
                           AND length(r.name) > length(e.name) + length(r.repetition::text) + 2
                      THEN substr(r.name, length(e.name) + 2,
                                  length(r.name) - length(e.name) - length(r.repetition::text) - 2)
                      ELSE r.stage END AS label
            FROM pgeval.run r JOIN e USING (experiment_id)
           WHERE p_repetition IS NULL OR r.repetition = p_repetition),
    o AS (SELECT r.*,
                 row_number() OVER (PARTITION BY r.repetition
                                    ORDER BY coalesce((SELECT min(c.ord) FROM cfg c
                                                        WHERE c.label IN (r.label, r.stage)),
                                                      1000000), r.run_id)::integer AS pos
            FROM r)
    SELECT o.run_id, o.name, o.label, o.stage, pgeval.stage_role(o.stage, o.params), o.repetition,
           o.pos, o.depth, o.status, o.params,
           o.pos = max(o.pos) OVER (PARTITION BY o.repetition)
      FROM o
     ORDER BY o.repetition, o.pos
$$;

-- The rule of index recall for one query (METRICS.md "Index recall"), in two pieces every
-- caller shares (pgeval.index_recall_per_query below, pgeval.evaluate_query_recall and
-- pgeval.evaluate_recall of sql/230_evaluate_query_recall.sql and sql/240_evaluate_recall.sql):
-- n = min(K, exact rows with a distance) and d_K = the largest of the K smallest exact distances.
CREATE OR REPLACE FUNCTION pgeval.kth_distance(p_scores double precision[], p_k integer)
RETURNS TABLE (n bigint, d_k double precision)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT count(*), max(x.score)
      FROM (SELECT u.score FROM unnest(p_scores) AS u(score)
             WHERE u.score IS NOT NULL ORDER BY u.score LIMIT p_k) x
$$;

-- hits: the rows of a ranked list within its first K whose distance is within the K-th exact one,
-- dist(c) <= d_K + eps, eps = 1e-6 * max(1, |d_K|) (ties with the K-th neighbour count); got:
-- the rows of the list within K. dist(c) is the list's own score when p_distance (it stored the
-- exact distance), else the exact list's score of the same chunk (a row exact search did not
-- return is a miss).
CREATE OR REPLACE FUNCTION pgeval.list_hits(p_ids text[], p_scores double precision[],
                                            p_exact_ids text[], p_exact_scores double precision[],
                                            p_d_k double precision, p_k integer,
                                            p_distance boolean DEFAULT true)
RETURNS TABLE (hits bigint, got bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT count(*) FILTER (WHERE coalesce(CASE WHEN p_distance THEN r.score END, xr.score)
                                  <= p_d_k + 1e-6 * greatest(1.0, abs(p_d_k))),
           -- (the rows of the list within K: ranks 1, 2, ... each at least once)
           coalesce(max(r.rank), 0)
      FROM unnest(p_ids, p_scores) WITH ORDINALITY AS r(chunk_id, score, rank)
      LEFT JOIN unnest(p_exact_ids, p_exact_scores) AS xr(chunk_id, score)
             ON xr.chunk_id = r.chunk_id
     WHERE r.rank <= p_k
$$;

-- Index recall@K of every ANN run of an experiment against the exact stage of the same
-- repetition (all repetitions when p_repetition is NULL):
--   per query: |{c in the run's first K : dist(c) <= d_K + eps}| / K, d_K = the K-th smallest
--   exact distance of the query, eps = 1e-6 * max(1, |d_K|) (ties with the K-th neighbour count);
--   rows the run did not return count as misses; averaged over every query with results in the
--   exact stage (a query the ANN run missed entirely scores 0).
-- dist(c) is the exact distance the vector stage stored in result.score ("score": "distance");
-- where a run stored no score, or scores that are not distances (a live service's vector node,
-- "score": "similarity"), the exact stage's distance of the same chunk is used.
-- Edge case: when exact search itself returned n < K rows for a query (a filtered table that
-- holds fewer than K chunks), d_K is its largest distance and the denominator is n.
-- Per ANN run and query: hits (the numerator above), denom (min(K, n)), got (rows the run
-- returned within its first K): pgeval.index_recall averages hits / denom over the queries, and
-- pgeval.sweep_point_recall_margin reads its spread.
CREATE OR REPLACE FUNCTION pgeval.index_recall_per_query(p_experiment bigint,
                                                         p_k integer DEFAULT 10,
                                                         p_repetition integer DEFAULT 1)
RETURNS TABLE (run_id bigint, repetition integer, query_id text, hits bigint, denom bigint,
               got bigint, exact_run_id bigint)
LANGUAGE sql STABLE AS $$
    -- (read from each query's ranked list, pgeval.result_list, unnested as the view
    -- pgeval.result unnests it: the exact list once per query, each ANN list once per query)
    WITH s AS (SELECT * FROM pgeval.experiment_stages(p_experiment, p_repetition)),
    ex AS (SELECT DISTINCT ON (s.repetition) s.repetition, s.run_id
             FROM s WHERE s.role = 'exact' ORDER BY s.repetition, s."position"),
    -- per query: n = min(K, rows with a distance), d_K = the largest of the K smallest
    dk AS (SELECT ex.repetition, ex.run_id AS exact_run, l.query_id, l.chunk_ids, l.scores,
                  l.grades, t.n, t.d_k
             FROM ex
             JOIN pgeval.result_list l ON l.run_id = ex.run_id
            CROSS JOIN LATERAL pgeval.kth_distance(l.scores, p_k) t
            WHERE t.n > 0)
    SELECT a.run_id, a.repetition, dk.query_id, h.hits, dk.n, h.got, dk.exact_run
      FROM s a JOIN dk ON dk.repetition = a.repetition
     -- (a query the ANN run returned nothing for: no list, NULL arrays, no hits)
      LEFT JOIN pgeval.result_list al ON al.run_id = a.run_id AND al.query_id = dk.query_id
     CROSS JOIN LATERAL pgeval.list_hits(al.chunk_ids, al.scores, dk.chunk_ids, dk.scores, dk.d_k,
                                         p_k, coalesce(a.params->>'score', 'distance') = 'distance') h
     WHERE a.role = 'ann' AND p_k >= 1
$$;

CREATE OR REPLACE FUNCTION pgeval.index_recall(p_experiment bigint, p_k integer DEFAULT 10,
                                               p_repetition integer DEFAULT 1)
RETURNS TABLE (run_id bigint, name text, label text, stage text, repetition integer,
               k integer, queries bigint, index_recall double precision, short_queries bigint,
               exact_run_id bigint)
LANGUAGE sql STABLE AS $$
    -- (per query once: inlined, the planner would run it again for each stage of the experiment)
    WITH pq AS MATERIALIZED (
        SELECT * FROM pgeval.index_recall_per_query(p_experiment, p_k, p_repetition))
    SELECT a.run_id, a.name, a.label, a.stage, a.repetition, p_k,
           count(pq.query_id), avg(pq.hits::float8 / pq.denom),
           count(*) FILTER (WHERE pq.got < pq.denom), min(pq.exact_run_id)
      FROM pgeval.experiment_stages(p_experiment, p_repetition) a
      JOIN pq ON pq.run_id = a.run_id
     GROUP BY a.run_id, a.name, a.label, a.stage, a.repetition, a."position"
     ORDER BY a.repetition, a."position"
$$;
