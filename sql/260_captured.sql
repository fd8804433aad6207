-- The application's own queries, captured from the server log by `pgeval queries capture`
-- (evaluator/captured/), as SQL reads them (docs/queries.md):
--
--   SELECT * FROM pgeval.captured_shapes('app-week-49');
--   SELECT * FROM pgeval.evaluate_recall(
--       (SELECT statement FROM pgeval.captured_shapes('app-week-49') WHERE shape = 1),
--       (SELECT queries_sql FROM pgeval.captured_shapes('app-week-49') WHERE shape = 1),
--       '{"hnsw.ef_search": [20, 40, 80]}');
--   SELECT * FROM pgeval.evaluate_captured('app-week-49', '{"hnsw.ef_search": [20, 40, 80]}');
--
-- A shape is the statement as the application sent it, with parameters in place of its literals:
-- $1 the query vector, $2, $3 ... its other values in the application's order (a tenant, a
-- LIMIT), which pgeval.captured_queries yields as the columns p2, p3 ... after the vector.

-- Each captured query of a set (one shape's: p_shape), its vector in pgvector's text form; with
-- p_window, only those sent within p_window of the set's newest (`--window`, the rule of
-- evaluator/testset/query_source.from_captured).
CREATE OR REPLACE FUNCTION pgeval.captured_queries(p_set text, p_shape integer DEFAULT NULL,
                                                   p_window interval DEFAULT NULL)
RETURNS TABLE (query_id text, vector text, params text[], shape integer, sent integer,
               last_seen timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT q.query_id, '[' || array_to_string(q.vector, ',') || ']', q.params, q.shape, q.sent,
           q.last_seen
      FROM pgeval.captured_set c JOIN pgeval.captured_query q USING (set_id)
     WHERE c.name = p_set AND (p_shape IS NULL OR q.shape = p_shape)
       AND (p_window IS NULL OR q.last_seen >= (SELECT max(n.last_seen)
                                                  FROM pgeval.captured_query n
                                                 WHERE n.set_id = c.set_id) - p_window)
     ORDER BY q.query_id COLLATE "C"
$$;

-- Each shape of a set: its statement, LIMIT, queries and searches sent, and queries_sql, the
-- queries statement of pgeval.evaluate_recall that measures it as the application sent it. With
-- p_window, queries and queries_sql are those sent within p_window of the set's newest; sent and
-- share stay the whole set's (as `pgeval watch --captured SET --window W` weighs its shapes).
CREATE OR REPLACE FUNCTION pgeval.captured_shapes(p_set text, p_window interval DEFAULT NULL)
RETURNS TABLE (shape integer, statement text, operator text, k integer, params integer,
               queries bigint, sent bigint, share double precision, queries_sql text)
LANGUAGE sql STABLE AS $$
    WITH s AS (
        SELECT s.shape, s.statement, s.operator, s.k, s.params,
               (SELECT count(*) FROM pgeval.captured_queries(p_set, s.shape, p_window))
                   AS queries,
               (SELECT coalesce(sum(q.sent), 0) FROM pgeval.captured_query q
                 WHERE q.set_id = s.set_id AND q.shape = s.shape) AS sent
          FROM pgeval.captured_set c JOIN pgeval.captured_shape s USING (set_id)
         WHERE c.name = p_set)
    SELECT s.shape, s.statement, s.operator, s.k, s.params, s.queries, s.sent,
           s.sent::double precision / nullif(sum(s.sent) OVER (), 0),
           format('SELECT query_id, vector%s FROM pgeval.captured_queries(%L, %s%s)',
                  (SELECT string_agg(format(', params[%s] AS p%s', i, i + 1), '' ORDER BY i)
                     FROM generate_series(1, s.params) i), p_set, s.shape,
                  CASE WHEN p_window IS NOT NULL THEN format(', %L::interval', p_window)
                       ELSE '' END)
      FROM s ORDER BY s.shape
$$;

-- Every shape of a set measured as the application sent it (pgeval.evaluate_recall, one sweep
-- per shape named <name>.s<shape>), with each shape's share of the searches sent, and per
-- point the recall weighted by that share over all shapes (weighted_recall: NULL until every
-- shape has the point).
CREATE OR REPLACE FUNCTION pgeval.evaluate_captured(p_set text,
                                                    settings jsonb DEFAULT '{}',
                                                    name text DEFAULT NULL,
                                                    replace boolean DEFAULT false,
                                                    target_recall double precision DEFAULT 0.95,
                                                    timeout_ms integer DEFAULT 600000)
RETURNS TABLE (shape integer, share double precision, sweep text, point integer, label text,
               at_k integer, recall double precision, margin95 double precision,
               p95_ms double precision, n_queries integer, index_type text,
               weighted_recall double precision)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
#variable_conflict use_column
DECLARE
    sh record;
    base text := coalesce(name, 'captured-' || p_set || '-'
                          || to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYYMMDD-HH24MISS'));
    found_any boolean := false;
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS pg_temp.captured_points (
        shape integer, share double precision, sweep text, point integer, label text,
        at_k integer, recall double precision, margin95 double precision,
        p95_ms double precision, n_queries integer, index_type text) ON COMMIT DROP;
    TRUNCATE pg_temp.captured_points;
    FOR sh IN SELECT * FROM pgeval.captured_shapes(p_set) LOOP
        found_any := true;
        INSERT INTO pg_temp.captured_points
        SELECT sh.shape, sh.share, e.sweep, e.point, e.label, e.at_k, e.recall, e.margin95,
               e.p95_ms, e.n_queries, e.index_type
          FROM pgeval.evaluate_recall(sh.statement, sh.queries_sql, settings,
                                      name => base || '.s' || sh.shape, replace => replace,
                                      target_recall => target_recall,
                                      timeout_ms => timeout_ms) e;
    END LOOP;
    IF NOT found_any THEN
        RAISE EXCEPTION 'pgeval.evaluate_captured: no captured set ''%'' (or it has no shape)',
            p_set USING ERRCODE = 'no_data_found';
    END IF;
    RETURN QUERY
    SELECT c.shape, c.share, c.sweep, c.point, c.label, c.at_k, c.recall, c.margin95, c.p95_ms,
           c.n_queries, c.index_type,
           CASE WHEN count(*) OVER (PARTITION BY c.point)
                     = (SELECT count(DISTINCT x.shape) FROM pg_temp.captured_points x)
                THEN sum(c.recall * c.share) OVER (PARTITION BY c.point) END
      FROM pg_temp.captured_points c ORDER BY c.point, c.shape;
END
$$;
