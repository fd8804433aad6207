-- Fusion of ranked lists (the merge stage), computed over stored runs in schema pgeval. One entry
-- per chunk and query; ranks 1..n by fused score descending, ties by chunk id ascending (byte
-- order: COLLATE "C", whatever the database's collation); cut at
-- p_depth (NULL: everything). p_input_depth (NULL: every stored row) cuts each input first;
-- p_input_depths, aligned with p_runs, cuts each input at its own depth (an element NULL, or the
-- array NULL: p_input_depth). Weights are aligned with p_runs (NULL: 1 each).
--
-- RRF (Cormack et al. 2009):  score(c) = sum over inputs of  w_i / (k + rank_i(c))
-- Score fusion:                score(c) = sum over inputs of  w_i * norm_i(c)
--   where an input's scores are first made higher-is-better (a run with "score": "distance"
--   is negated; one whose scores are ranks ("score": "rank") or whose direction is unknown (no
--   "score": a file imported without it) is refused) and normalised per query: minmax (s - min) / (max - min) (1 when all equal),
--   or zscore (s - mean) / stddev_pop (0 when all equal). A chunk an input did not return
--   contributes 0 under minmax (its worst value) and the input's lowest z-score for that query
--   under zscore (so that absence never beats presence); nothing when the input returned nothing
--   for the query.
-- Equal fused scores (docs/METRICS.md "Fusion"): each input's term is taken at 15 significant
-- digits (float8 -> numeric) and the terms are summed exactly in numeric, so the sum does not
-- depend on the order the plan feeds them in; the fused score is that sum rounded to 12
-- significant digits (pgeval.fusion_score), and ranks compare that score, then the chunk id.
-- Sums equal in exact arithmetic (1/45 by two different sets of RRF terms) are one float
-- rounding step apart at most, far below the 12th digit: they are equal, and the chunk id decides.

CREATE OR REPLACE FUNCTION pgeval.fusion_check(p_runs bigint[], p_weights double precision[],
                                               p_k double precision, p_depth integer,
                                               p_method text)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    missing bigint;
BEGIN
    IF p_runs IS NULL OR cardinality(p_runs) = 0 THEN
        RAISE EXCEPTION 'fusion needs at least one input run' USING ERRCODE = '22023';
    END IF;
    IF p_weights IS NOT NULL AND cardinality(p_weights) <> cardinality(p_runs) THEN
        RAISE EXCEPTION '% weights for % input runs', cardinality(p_weights), cardinality(p_runs)
            USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_weights) w WHERE w IS NULL OR w < 0 OR w = 'NaN') THEN
        RAISE EXCEPTION 'fusion weights must be >= 0' USING ERRCODE = '22023';
    END IF;
    IF p_k IS NULL OR p_k < 0 THEN
        RAISE EXCEPTION 'RRF k must be >= 0, got %', p_k USING ERRCODE = '22023';
    END IF;
    IF p_depth IS NOT NULL AND p_depth < 1 THEN
        RAISE EXCEPTION 'fusion depth must be >= 1, got %', p_depth USING ERRCODE = '22023';
    END IF;
    IF p_method NOT IN ('rrf', 'minmax', 'zscore') THEN
        RAISE EXCEPTION 'unknown fusion method "%" (rrf, minmax or zscore)', p_method
            USING ERRCODE = '22023';
    END IF;
    SELECT u.r INTO missing FROM unnest(p_runs) u(r)
     WHERE NOT EXISTS (SELECT 1 FROM pgeval.run r WHERE r.run_id = u.r) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'no run with id %', missing USING ERRCODE = '22023';
    END IF;
    IF p_method <> 'rrf' THEN
        SELECT r.run_id INTO missing FROM pgeval.result r
         WHERE r.run_id = ANY(p_runs) AND r.score IS NULL LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run % has results without a score: % fusion needs scores (use rrf)',
                (SELECT name FROM pgeval.run WHERE run_id = missing), p_method
                USING ERRCODE = '22023';
        END IF;
        SELECT r.run_id INTO missing FROM pgeval.run r
         WHERE r.run_id = ANY(p_runs)
           AND coalesce(r.params->>'score', '') NOT IN ('distance', 'similarity') LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run %: % fusion needs scores of a known direction, %', (SELECT name
                FROM pgeval.run WHERE run_id = missing), p_method,
                CASE WHEN (SELECT params->>'score' FROM pgeval.run WHERE run_id = missing) = 'rank'
                     THEN 'and its scores are ranks (a TREC export of it wrote -rank): use rrf'
                     ELSE 'and its direction is unknown (imported without --score): import it '
                          'again with --score distance or --score similarity, or use rrf' END
                USING ERRCODE = '22023';
        END IF;
    END IF;
    RETURN true;
END
$$;

-- Per-input depths: aligned with the inputs, each >= 1 (NULL: that input's every stored row).
CREATE OR REPLACE FUNCTION pgeval.input_depth_check(p_runs bigint[], p_input_depth integer,
                                                    p_input_depths integer[])
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_input_depths IS NOT NULL AND cardinality(p_input_depths) <> cardinality(p_runs) THEN
        RAISE EXCEPTION '% input depths for % input runs', cardinality(p_input_depths),
            cardinality(p_runs) USING ERRCODE = '22023';
    END IF;
    IF p_input_depth < 1 OR EXISTS (SELECT 1 FROM unnest(p_input_depths) d WHERE d < 1) THEN
        RAISE EXCEPTION 'input depth must be >= 1' USING ERRCODE = '22023';
    END IF;
    RETURN true;
END
$$;

-- A fused score from the exact (numeric) sum of its input terms: rounded to 12 significant
-- digits, as double precision (0 stays 0).
CREATE OR REPLACE FUNCTION pgeval.fusion_score(p_sum numeric)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_sum = 0 THEN 0.0::float8
                ELSE round(p_sum, 11 - floor(log(abs(p_sum)::float8))::integer)::float8 END
$$;

CREATE OR REPLACE FUNCTION pgeval.fuse_rrf(p_runs bigint[],
                                           p_weights double precision[] DEFAULT NULL,
                                           p_k double precision DEFAULT 60,
                                           p_depth integer DEFAULT NULL,
                                           p_input_depth integer DEFAULT NULL,
                                           p_input_depths integer[] DEFAULT NULL)
RETURNS TABLE (query_id text, rank integer, chunk_id text, score double precision)
LANGUAGE sql STABLE AS $$
    WITH inp AS (SELECT u.run_id, coalesce(p_weights[u.i], 1.0)::float8 AS w,
                        coalesce(p_input_depths[u.i], p_input_depth, 2147483647) AS d
                   FROM unnest(p_runs) WITH ORDINALITY AS u(run_id, i)
                  WHERE pgeval.fusion_check(p_runs, p_weights, p_k, p_depth, 'rrf')
                    AND pgeval.input_depth_check(p_runs, p_input_depth, p_input_depths)),
    fused AS (SELECT l.query_id, r.chunk_id,
                     pgeval.fusion_score(sum((inp.w / (p_k + r.rank))::numeric)) AS score
                FROM inp JOIN pgeval.result_list l ON l.run_id = inp.run_id
               CROSS JOIN LATERAL unnest(l.chunk_ids[:inp.d]) WITH ORDINALITY AS r(chunk_id, rank)
               GROUP BY l.query_id, r.chunk_id),
    ranked AS (SELECT f.query_id, f.chunk_id, f.score,
                      row_number() OVER (PARTITION BY f.query_id
                                         ORDER BY f.score DESC, f.chunk_id COLLATE "C")::integer AS rank
                 FROM fused f)
    SELECT x.query_id, x.rank, x.chunk_id, x.score FROM ranked x
     WHERE p_depth IS NULL OR x.rank <= p_depth
     ORDER BY x.query_id COLLATE "C", x.rank
$$;

CREATE OR REPLACE FUNCTION pgeval.fuse_scores(p_runs bigint[],
                                              p_weights double precision[] DEFAULT NULL,
                                              p_method text DEFAULT 'minmax',
                                              p_depth integer DEFAULT NULL,
                                              p_input_depth integer DEFAULT NULL,
                                              p_input_depths integer[] DEFAULT NULL)
RETURNS TABLE (query_id text, rank integer, chunk_id text, score double precision)
LANGUAGE sql STABLE AS $$
    WITH inp AS (SELECT u.run_id, coalesce(p_weights[u.i], 1.0)::float8 AS w,
                        coalesce(p_input_depths[u.i], p_input_depth, 2147483647) AS d,
                        coalesce(run.params->>'score' = 'distance', false) AS is_distance
                   FROM unnest(p_runs) WITH ORDINALITY AS u(run_id, i)
                   JOIN pgeval.run run ON run.run_id = u.run_id
                  WHERE pgeval.fusion_check(p_runs, p_weights, 0, p_depth,
                                            CASE WHEN p_method = 'rrf' THEN 'rrf (use fuse_rrf)'
                                                 ELSE p_method END)
                    AND pgeval.input_depth_check(p_runs, p_input_depth, p_input_depths)),
    s AS (SELECT inp.run_id, l.query_id, r.chunk_id,
                 CASE WHEN inp.is_distance THEN -r.score ELSE r.score END AS v
            FROM inp JOIN pgeval.result_list l ON l.run_id = inp.run_id
           CROSS JOIN LATERAL unnest(l.chunk_ids[:inp.d], l.scores[:inp.d]) AS r(chunk_id, score)),
    st AS (SELECT s.run_id, s.query_id, min(s.v) AS lo, max(s.v) AS hi, avg(s.v) AS mu,
                  stddev_pop(s.v) AS sd
             FROM s GROUP BY s.run_id, s.query_id),
    norm AS (SELECT s.run_id, s.query_id, s.chunk_id,
                    CASE WHEN p_method = 'minmax'
                         THEN CASE WHEN st.hi > st.lo THEN (s.v - st.lo) / (st.hi - st.lo)
                                   ELSE 1.0 END
                         ELSE CASE WHEN st.sd > 0 THEN (s.v - st.mu) / st.sd ELSE 0.0 END
                    END AS nv
               FROM s JOIN st ON st.run_id = s.run_id AND st.query_id = s.query_id),
    floor_ AS (SELECT n.run_id, n.query_id, min(n.nv) AS lo FROM norm n
                GROUP BY n.run_id, n.query_id),
    chunks AS (SELECT DISTINCT n.query_id, n.chunk_id FROM norm n),
    fused AS (SELECT c.query_id, c.chunk_id,
                     pgeval.fusion_score(sum((inp.w * coalesce(n.nv, CASE WHEN p_method = 'zscore'
                                                                    THEN f.lo END, 0.0))::numeric))
                         AS score
                FROM chunks c CROSS JOIN inp
                LEFT JOIN norm n ON n.run_id = inp.run_id AND n.query_id = c.query_id
                                AND n.chunk_id = c.chunk_id
                LEFT JOIN floor_ f ON f.run_id = inp.run_id AND f.query_id = c.query_id
               GROUP BY c.query_id, c.chunk_id),
    ranked AS (SELECT f.query_id, f.chunk_id, f.score,
                      row_number() OVER (PARTITION BY f.query_id
                                         ORDER BY f.score DESC, f.chunk_id COLLATE "C")::integer AS rank
                 FROM fused f)
    SELECT x.query_id, x.rank, x.chunk_id, x.score FROM ranked x
     WHERE p_depth IS NULL OR x.rank <= p_depth
     ORDER BY x.query_id COLLATE "C", x.rank
$$;
