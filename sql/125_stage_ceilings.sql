-- Ceilings and headroom per stage (docs/stage-report.md "Ceilings and headroom"): what a perfect
-- ordering of a stage's candidates would reach, what a higher ANN setting changes, and which of
-- them leaves the most to gain. The loss attribution (sql/110) says where relevant chunks were
-- lost; this says what changing a stage can win back, each figure measured on the stored lists.

-- A list holding the judged grades p_grades in their best order (grade descending: the
-- judgements' own ranking, the pool's oracle), as pgeval.judged_hits gives a ranked list: each
-- judged-relevant entry (grade > 0) with its rank, its grade, the rank of the first chunk of
-- grade >= p_rel (1, when there is one: in that order it comes first) and seen (the chunks of
-- grade >= p_rel at or above it: its rank, since they all come first). Unjudged entries (NULL)
-- and grade 0 add nothing to any measure and are left out. A single SELECT: inlined where it is
-- called, no function call per list.
CREATE OR REPLACE FUNCTION pgeval.oracle_ranks(p_grades smallint[], p_rel integer)
RETURNS TABLE (rank integer, grade smallint, first_rank integer, seen integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT o.rank, o.grade, CASE WHEN o.top >= p_rel THEN 1 END,
           CASE WHEN o.grade >= p_rel THEN o.rank END
      FROM (SELECT u.g AS grade, row_number() OVER (ORDER BY u.g DESC)::integer AS rank,
                   max(u.g) OVER () AS top
              FROM unnest(p_grades) AS u(g) WHERE u.g > 0) o
$$;

-- The gain of measure p_name@p_k (pgeval.measure_gain) summed over the oracle order of p_grades:
-- the numerator of the ceiling, to be divided by pgeval.measure_norm (rank bound: K, rprec's R,
-- map without a cut-off: every rank, as pgeval.measure_depth).
CREATE OR REPLACE FUNCTION pgeval.oracle_gain(p_name text, p_k integer, p_grades smallint[],
                                              p_rel integer, p_n_rel integer)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(pgeval.measure_gain(p_name, o.rank, o.grade, p_rel, o.first_rank,
                                            o.seen)), 0)
      FROM pgeval.oracle_ranks(p_grades, p_rel) o
     WHERE o.rank <= coalesce(p_k, CASE p_name WHEN 'rprec' THEN p_n_rel ELSE 2147483647 END)
$$;

-- The value of measure p_name@p_k for a list holding the judged grades p_grades in their best
-- order: the ceiling of a list whose candidates are reordered. p_n_rel, p_ideal_dcg: the query's
-- (pgeval.valid_queries).
CREATE OR REPLACE FUNCTION pgeval.oracle_value(p_name text, p_k integer, p_grades smallint[],
                                               p_rel integer, p_n_rel integer,
                                               p_ideal_dcg double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT pgeval.oracle_gain(p_name, p_k, p_grades, p_rel, p_n_rel)
           / pgeval.measure_norm(p_name, p_k, p_n_rel, p_ideal_dcg)
$$;

-- The gains of recall@p_k and ndcg@p_k (in that order) summed over the oracle order of p_grades,
-- as one array (NULL sums: no judged-relevant entry): the numerators the set-based ceilings
-- below divide by pgeval.measure_norm. A single SELECT returning a set: inlined where it is
-- called (LATERAL), no function call per list.
CREATE OR REPLACE FUNCTION pgeval.oracle_gains(p_grades smallint[], p_rel integer, p_k integer)
RETURNS TABLE (gain double precision[]) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY[sum(pgeval.measure_gain('recall', o.rank, o.grade, p_rel, o.first_rank,
                                         o.seen)),
                 sum(pgeval.measure_gain('ndcg', o.rank, o.grade, p_rel, o.first_rank, o.seen))]
      FROM pgeval.oracle_ranks(p_grades, p_rel) o
     WHERE o.rank <= p_k
$$;

-- Per stage (mean over repetitions; all when p_repetition is NULL): recall@K and nDCG@K as
-- ranked (pgeval.summary; p_judged_only: on the judged chunks only), the ceiling (the same
-- measure of the stage's whole stored list ordered by the judgements: pgeval.oracle_value, mean
-- over valid queries, a query without a list counting 0), the headroom (ceiling - actual) and
-- judged@K of the stage's lists.
CREATE OR REPLACE FUNCTION pgeval.stage_ceilings(p_experiment bigint, p_k integer DEFAULT 10,
                                                 p_rel integer DEFAULT 1,
                                                 p_repetition integer DEFAULT NULL,
                                                 p_judged_only boolean DEFAULT false)
RETURNS TABLE (label text, stage text, role text, "position" integer, measure text, ord integer,
               ceiling double precision, actual double precision, headroom double precision,
               judged double precision, repetitions bigint)
LANGUAGE sql STABLE AS $$
    WITH s AS (SELECT * FROM pgeval.experiment_stages(p_experiment, p_repetition) es
                WHERE pgeval.loss_check(p_k, p_rel)),
    m AS (SELECT * FROM (VALUES (1, 'recall'), (2, 'ndcg')) AS m(ord, name)),
    -- pgeval.oracle_value, set-based: the oracle order of each list once (pgeval.oracle_ranks
    -- inlined), not a function call per list and measure
    oracle AS (
        SELECT s.run_id, m.ord,
               sum(coalesce(x.gain[m.ord], 0)
                   / pgeval.measure_norm(m.name, p_k, v.n_rel, v.ideal_dcg)) / count(*) AS value
          FROM s
         CROSS JOIN LATERAL pgeval.valid_queries(s.run_id, p_rel) v
          LEFT JOIN pgeval.result_list l ON l.run_id = s.run_id AND l.query_id = v.query_id
          LEFT JOIN LATERAL pgeval.oracle_gains(l.grades, p_rel, p_k) x ON true
         CROSS JOIN m
         GROUP BY s.run_id, m.ord),
    ranked AS (
        SELECT s.run_id, a.ord, a.value
          FROM s CROSS JOIN LATERAL pgeval.summary(
                   s.run_id, ARRAY['recall@' || p_k, 'ndcg@' || p_k, 'judged@' || p_k], p_rel,
                   p_judged_only) a)
    SELECT s.label, min(s.stage), min(s.role), min(s."position"), m.name || '@' || p_k, m.ord,
           avg(o.value), avg(a.value), avg(o.value - a.value), avg(j.value), count(*)
      FROM s CROSS JOIN m
      JOIN oracle o ON o.run_id = s.run_id AND o.ord = m.ord
      JOIN ranked a ON a.run_id = s.run_id AND a.ord = m.ord
      JOIN ranked j ON j.run_id = s.run_id AND j.ord = 3
     GROUP BY s.label, m.name, m.ord
     ORDER BY min(s."position"), m.ord
$$;

-- The ANN stages against exact search and against a higher setting (mean over repetitions): for
-- every ANN stage, recall@K and nDCG@K of the exact stage of the same repetitions (against =
-- its label, kind 'exact') and of every stage of the same kind whose settings differ from this
-- one's only by larger numbers (kind 'setting': hnsw.ef_search 100 against 10), as ranked,
-- beside the ANN stage's own; cost = reference - actual, what the index loses to it.
CREATE OR REPLACE FUNCTION pgeval.index_cost(p_experiment bigint, p_k integer DEFAULT 10,
                                             p_rel integer DEFAULT 1,
                                             p_repetition integer DEFAULT NULL,
                                             p_judged_only boolean DEFAULT false)
RETURNS TABLE (label text, kind text, against text, settings jsonb, measure text, ord integer,
               reference double precision, actual double precision, cost double precision)
LANGUAGE sql STABLE AS $$
    WITH s AS (SELECT es.*, coalesce(es.params->'settings', '{}'::jsonb) AS settings
                 FROM pgeval.experiment_stages(p_experiment, p_repetition) es
                WHERE pgeval.loss_check(p_k, p_rel)),
    v AS (SELECT s.run_id, a.measure, a.ord, a.value
            FROM s CROSS JOIN LATERAL pgeval.summary(
                     s.run_id, ARRAY['recall@' || p_k, 'ndcg@' || p_k], p_rel, p_judged_only) a
           WHERE s.role IN ('ann', 'exact')),
    pairs AS (
        SELECT a.run_id, b.run_id AS ref_id, a.label, 'exact' AS kind, b.label AS against,
               b.settings
          FROM s a JOIN s b ON b.repetition = a.repetition AND b.role = 'exact'
         WHERE a.role = 'ann'
        UNION ALL
        SELECT a.run_id, b.run_id, a.label, 'setting', b.label, b.settings
          FROM s a JOIN s b ON b.repetition = a.repetition AND b.stage = a.stage
                           AND b.label <> a.label AND b.role = 'ann'
         WHERE a.role = 'ann'
           -- the same keys, and every value that differs is a larger number
           AND (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(a.settings) k)
               IS NOT DISTINCT FROM
               (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(b.settings) k)
           AND a.settings <> b.settings
           AND NOT EXISTS (
               SELECT 1 FROM jsonb_each_text(b.settings) kv
                WHERE kv.value IS DISTINCT FROM a.settings->>kv.key
                  AND NOT (kv.value ~ '^[0-9]+(\.[0-9]+)?$'
                           AND a.settings->>kv.key ~ '^[0-9]+(\.[0-9]+)?$'
                           AND kv.value::numeric > (a.settings->>kv.key)::numeric)))
    SELECT p.label, p.kind, p.against, min(p.settings::text)::jsonb, x.measure, x.ord,
           avg(r.value), avg(x.value), avg(r.value - x.value)
      FROM pairs p
      JOIN v x ON x.run_id = p.run_id
      JOIN v r ON r.run_id = p.ref_id AND r.ord = x.ord
     GROUP BY p.label, p.kind, p.against, x.measure, x.ord
     ORDER BY p.label, p.kind, p.against, x.ord
$$;

-- The final stage's candidates and the chain's pool, ordered perfectly: per repetition and valid
-- query, pgeval.oracle_value of the grades of the candidates (the final stage's whole list and,
-- under a final rerank, what it was handed: its input's top M, pgeval.loss_chain) and of the
-- pool (every list of the chain, whole, exact search's aside); mean over valid queries, then
-- over repetitions. lists: the chain's lists.
CREATE OR REPLACE FUNCTION pgeval.pool_ceiling(p_experiment bigint, p_k integer DEFAULT 10,
                                               p_rel integer DEFAULT 1,
                                               p_repetition integer DEFAULT NULL)
RETURNS TABLE (measure text, ord integer, pool double precision, candidates double precision,
               lists text[])
LANGUAGE sql STABLE AS $$
    WITH reps AS (SELECT DISTINCT r.repetition FROM pgeval.run r
                   WHERE r.experiment_id = p_experiment
                     AND (p_repetition IS NULL OR r.repetition = p_repetition)),
    ch AS (SELECT c.* FROM reps CROSS JOIN LATERAL pgeval.loss_chain(p_experiment, p_k,
                                                                      reps.repetition) c
            WHERE c.link <> 'exact'),
    -- the links whose lists hold the final stage's candidates, and where each is cut
    cand AS (SELECT ch.repetition, ch.run_id,
                    CASE WHEN ch.link = 'final' THEN 2147483647 ELSE ch.cut END AS cut
               FROM ch
              WHERE ch.link = 'final'
                 OR (EXISTS (SELECT 1 FROM ch r WHERE r.repetition = ch.repetition
                                                  AND r.link = 'rerank')
                     AND (ch.link = 'merge'
                          OR (ch.link = 'path'
                              AND NOT EXISTS (SELECT 1 FROM ch x
                                               WHERE x.repetition = ch.repetition
                                                 AND x.link = 'merge'))))),
    m AS (SELECT * FROM (VALUES (1, 'recall'), (2, 'ndcg')) AS m(ord, name)),
    q AS (SELECT f.repetition, v.query_id, v.n_rel, v.ideal_dcg
            FROM (SELECT DISTINCT ON (ch.repetition) ch.repetition, ch.run_id FROM ch
                   WHERE ch.link = 'final') f
           CROSS JOIN LATERAL pgeval.valid_queries(f.run_id, p_rel) v),
    grades AS (
        SELECT q.repetition, q.query_id, q.n_rel, q.ideal_dcg,
               (SELECT array_agg(g.grade) FROM (
                    SELECT DISTINCT ON (res.chunk_id) res.grade
                      FROM ch JOIN pgeval.result res
                        ON res.run_id = ch.run_id AND res.query_id = q.query_id
                     WHERE ch.repetition = q.repetition
                     ORDER BY res.chunk_id) g) AS pool,
               (SELECT array_agg(g.grade) FROM (
                    SELECT DISTINCT ON (res.chunk_id) res.grade
                      FROM cand JOIN pgeval.result res
                        ON res.run_id = cand.run_id AND res.query_id = q.query_id
                       AND res.rank <= cand.cut
                     WHERE cand.repetition = q.repetition
                     ORDER BY res.chunk_id) g) AS candidates
          FROM q),
    -- pgeval.oracle_value, set-based as in pgeval.stage_ceilings
    per_rep AS (
        SELECT g.repetition, m.name, m.ord,
               avg(coalesce(xp.gain[m.ord], 0)
                   / pgeval.measure_norm(m.name, p_k, g.n_rel, g.ideal_dcg)) AS pool,
               avg(coalesce(xc.gain[m.ord], 0)
                   / pgeval.measure_norm(m.name, p_k, g.n_rel, g.ideal_dcg)) AS candidates
          FROM grades g
          LEFT JOIN LATERAL pgeval.oracle_gains(g.pool, p_rel, p_k) xp ON true
          LEFT JOIN LATERAL pgeval.oracle_gains(g.candidates, p_rel, p_k) xc ON true
         CROSS JOIN m
         GROUP BY g.repetition, m.name, m.ord)
    SELECT r.name || '@' || p_k, r.ord, avg(r.pool), avg(r.candidates),
           (SELECT array_agg(DISTINCT ch.label) FROM ch)
      FROM per_rep r GROUP BY r.name, r.ord ORDER BY r.ord
$$;

-- Where the headroom is, one row per (kind, stage, measure), the largest first: reorder (the
-- final stage's candidates ordered perfectly, pgeval.pool_ceiling, against the final stage as
-- ranked: recovered by a rerank), reach (the chain's pool ordered perfectly, against the final
-- stage's candidates ordered perfectly: recovered by handing on more candidates, or another
-- path) and index (an ANN stage against exact search, or against a higher setting of the
-- experiment: recovered by the setting). largest marks the rows of the headroom that is largest
-- on nDCG@K (then recall@K), when it is above 0.
CREATE OR REPLACE FUNCTION pgeval.stage_headroom(p_experiment bigint, p_k integer DEFAULT 10,
                                                 p_rel integer DEFAULT 1,
                                                 p_repetition integer DEFAULT NULL,
                                                 p_judged_only boolean DEFAULT false)
RETURNS TABLE (kind text, label text, against text, measure text, ceiling double precision,
               actual double precision, headroom double precision, largest boolean)
LANGUAGE sql STABLE AS $$
    WITH fin AS (SELECT DISTINCT es.label FROM pgeval.experiment_stages(p_experiment,
                                                                        p_repetition) es
                  WHERE es.is_final),
    c AS (SELECT * FROM pgeval.stage_ceilings(p_experiment, p_k, p_rel, p_repetition,
                                              p_judged_only)),
    p AS (SELECT * FROM pgeval.pool_ceiling(p_experiment, p_k, p_rel, p_repetition)),
    rows_ AS (
        SELECT 'reorder' AS kind, c.label, NULL::text AS against, c.measure, c.ord,
               p.candidates AS ceiling, c.actual
          FROM c JOIN fin ON fin.label = c.label JOIN p ON p.ord = c.ord
        UNION ALL
        SELECT 'reach', (SELECT string_agg(fin.label, ',') FROM fin),
               array_to_string(p.lists, ' + '), p.measure, p.ord, p.pool, p.candidates
          FROM p
        UNION ALL
        SELECT 'index', i.label, i.against, i.measure, i.ord, i.reference, i.actual
          FROM pgeval.index_cost(p_experiment, p_k, p_rel, p_repetition, p_judged_only) i),
    ranked AS (
        SELECT r.*, r.ceiling - r.actual AS headroom,
               dense_rank() OVER (ORDER BY (SELECT x.ceiling - x.actual FROM rows_ x
                                             WHERE x.kind = r.kind AND x.label = r.label
                                               AND x.against IS NOT DISTINCT FROM r.against
                                               AND x.ord = 2) DESC NULLS LAST,
                                           (SELECT x.ceiling - x.actual FROM rows_ x
                                             WHERE x.kind = r.kind AND x.label = r.label
                                               AND x.against IS NOT DISTINCT FROM r.against
                                               AND x.ord = 1) DESC NULLS LAST,
                                           r.kind, r.label, r.against) AS place
          FROM rows_ r)
    SELECT r.kind, r.label, r.against, r.measure, r.ceiling, r.actual, r.headroom,
           r.place = 1 AND max(r.headroom) OVER (PARTITION BY r.place) > 1e-9
      FROM ranked r
     ORDER BY r.place, r.ord
$$;
