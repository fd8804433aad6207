-- A probe run inside the database (`SELECT * FROM pgeval.run_probe('docs', 'hnsw')`), for pg_cron
-- where the knowledge base's table and pgeval's schema live in one database (docs/watch.md,
-- "From pg_cron"). `pgeval watch` (evaluator/tuning/watch/probe.py) stays the reference path; this
-- function measures the same thing the same way on the targets it accepts:
--
--   queries   the sample rule of `--sample-queries N [--seed S]` (evaluator/testset/query_source.py):
--             the first N rows (filters applied, vector not NULL) in the order of
--             hashtextextended(id::text COLLATE "C", seed), then id; a query is its row's vector,
--             and its own row is removed from both lists (every ANN statement fetches k + 1 rows)
--   setting   the first work setting of the stage in p_settings, else in the target's stored
--             settings, else the server's current value; applied with set_config(name, value,
--             true) (SET LOCAL) together with the target's other settings, and enable_seqscan=off
--             unless given (a small table would otherwise be scanned); the values the caller's
--             transaction had are put back before the function returns
--   exact     top k + 1 by the bare distance operator with enable_indexscan, enable_indexonlyscan
--             off and enable_seqscan on (the plan is checked to use no ANN index), one scan per
--             query; what recall needs of it (n and d_K per query) is kept in the row's
--             ground_truth and reused by the next SQL probe of the same queries on the same data
--             (content checksum) and target definition (the CLI's stored ground truth is its own)
--   ANN       the application's statement (SELECT id, dist ... ORDER BY <operator> LIMIT k + 1)
--             per query, its EXPLAIN checked to scan an index of the stage's access method, timed
--             with clock_timestamp() around EXECUTE; ranked by (distance, id) after the timing
--   recall    pgeval.index_recall's rule: per query |{c in the first k : dist(c) <= d_K + eps}| / n,
--             d_K the k-th smallest exact distance, eps = 1e-6 * max(1, |d_K|), n = min(k, exact
--             rows); averaged over the queries with exact rows
--   latency   p50/p95/p99 by pgeval.nearest_rank over the per-query times
--
-- and records one row of pgeval.probe with via = 'sql' (migration 0010_probe_via). Refused, with
-- the reason: stages other than hnsw, ivfflat and diskann (cast searches, as hnsw-halfvec, hnsw-bq
-- or ivfflat-halfvec; keyword, merge, rerank and service stages), targets with several rows per chunk (the CLI's
-- collapse and refetch), targets with a threshold, --group-by (one probe of the whole target),
-- targets searched by their own statement (`target add --statement`: `pgeval watch` times it).
--
-- With p_captured (and p_window), the queries are a captured set's instead, probed shape by
-- shape as the application sent them (pgeval.run_probe_captured, below): one row per shape.

-- The stage kinds pgeval.run_probe measures, as evaluator/kinds/registry.py describes them
-- (tests/test_watch_sql.py checks that they agree): the index's access method, the work settings
-- in the order the production setting is looked up, and the documented build option defaults
-- that complete an index's options in its build identity (evaluator/table/fingerprint.py).
CREATE OR REPLACE FUNCTION pgeval.probe_kinds()
RETURNS TABLE (kind text, index_method text, work_settings text[], build_defaults jsonb)
LANGUAGE sql IMMUTABLE AS $$
    VALUES ('hnsw', 'hnsw', ARRAY['hnsw.ef_search', 'hnsw.max_scan_tuples'],
            '{"m": "16", "ef_construction": "64"}'::jsonb),
           ('ivfflat', 'ivfflat', ARRAY['ivfflat.probes', 'ivfflat.max_probes'],
            '{"lists": "100"}'::jsonb),
           ('diskann', 'diskann',
            ARRAY['diskann.query_search_list_size', 'diskann.query_rescore'],
            '{"num_neighbors": "50", "search_list_size": "100", "max_alpha": "1.2",
              "storage_layout": "memory_optimized", "num_dimensions": "0"}'::jsonb)
$$;

-- The settings stage p_stage applies (evaluator/stages/gucs.scope): the unscoped ones, overlaid
-- by those scoped to it (STAGE:GUC); settings scoped to other stages are left out. Values as text.
CREATE OR REPLACE FUNCTION pgeval.probe_scope(p_settings jsonb, p_stage text)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_object_agg(y.name, y.value), '{}'::jsonb)
      FROM (SELECT DISTINCT ON (x.name) x.name, x.value
              FROM (SELECT e.key AS name, to_jsonb(e.value #>> '{}') AS value, 1 AS pri
                      FROM jsonb_each(coalesce(p_settings, '{}'::jsonb)) e
                     WHERE strpos(e.key, ':') = 0
                    UNION ALL
                    SELECT split_part(e.key, ':', 2), to_jsonb(e.value #>> '{}'), 0
                      FROM jsonb_each(coalesce(p_settings, '{}'::jsonb)) e
                     WHERE split_part(e.key, ':', 1) = p_stage AND strpos(e.key, ':') > 0) x
             ORDER BY x.name, x.pri) y
$$;

-- What a probe row keeps of the index it scanned and of its table (evaluator/tuning/watch/probe.py):
-- the index's build identity (oid and relfilenode change on a rebuild; its options completed by
-- the documented defaults p_defaults, evaluator/table/fingerprint.py), its size and the table's
-- dead tuples, and the server's row counters of the table.
CREATE OR REPLACE FUNCTION pgeval.probe_index_build(p_index oid, p_defaults jsonb)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('oid', c.oid::bigint,
                              'filenode', pg_relation_filenode(c.oid)::bigint,
                              'method', am.amname::text,
                              'options', p_defaults || coalesce(
                                  (SELECT jsonb_object_agg(split_part(o, '=', 1),
                                                           substr(o, strpos(o, '=') + 1))
                                     FROM unnest(c.reloptions) o), '{}'))
      FROM pg_class c JOIN pg_am am ON am.oid = c.relam
     WHERE c.oid = p_index
$$;

CREATE OR REPLACE FUNCTION pgeval.probe_index_state(p_index oid, p_rel oid)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('pages', pg_relation_size(p_index)
                                       / current_setting('block_size')::bigint,
                              'dead_tuples', coalesce(pg_stat_get_dead_tuples(p_rel), 0))
$$;

CREATE OR REPLACE FUNCTION pgeval.probe_table_stats(p_rel oid)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT jsonb_build_object(
                         'n_tup_ins', st.n_tup_ins, 'n_tup_upd', st.n_tup_upd,
                         'n_tup_del', st.n_tup_del, 'n_live_tup', st.n_live_tup,
                         'n_dead_tup', st.n_dead_tup,
                         'last_vacuum', greatest(st.last_vacuum::text, st.last_autovacuum::text))
                       FROM pg_stat_all_tables st WHERE st.relid = p_rel), '{}')
$$;

-- A recorded probe as pgeval.probe_history checks it against its bounds and its series: its
-- recall, p95, the bounds crossed and 'ok' or 'crossed ...' (a WARNING when one is crossed).
CREATE OR REPLACE FUNCTION pgeval.probe_outcome(p_probe_id bigint, OUT recall double precision,
                                                OUT p95_ms double precision, OUT crossed text[],
                                                OUT status text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    h record;
BEGIN
    SELECT ph.recall, ph.p95_ms, ph.crossed, ph.target, ph.stage, ph.k, ph.group_key INTO h
      FROM pgeval.probe_history ph WHERE ph.probe_id = p_probe_id;
    recall := h.recall;
    p95_ms := h.p95_ms;
    crossed := h.crossed;
    status := CASE WHEN cardinality(h.crossed) > 0
                   THEN 'crossed ' || array_to_string(h.crossed, ', ') ELSE 'ok' END;
    IF cardinality(h.crossed) > 0 THEN
        RAISE WARNING 'pgeval probe % of target ''%'' (%): recall@% % crossed %', p_probe_id,
            h.target, h.stage || coalesce(', shape ' || (h.group_key ->> 'shape'), ''), h.k,
            round(h.recall::numeric, 3), array_to_string(h.crossed, ', ');
    END IF;
END
$$;

-- pgeval.run_probe(..., p_captured => SET, p_window => W): the application's own searches, as
-- `pgeval watch --captured SET [--window W]` probes them (evaluator/tuning/watch/groups.py): one
-- probe per shape of the set that has queries (within W of the set's newest), each measured as
-- the application sent it by pgeval.evaluate_recall (its own statement, LIMIT and parameter
-- values, its exact twin the ground truth; stored as the sweep probe-sql-TARGET-STAGE-SET.sN,
-- replaced by the next probe, whose exact answer it reuses while the data is unchanged) at the
-- setting run_probe chose (enable_seqscan off unless given), each its own series (group_key
-- {"shape": "N"}). Recorded all or none (one statement). One row per shape: its share of the
-- searches sent, and on every row the recall weighted by the shares over the shapes probed and
-- the worst shape (lowest recall, then shape), as `pgeval watch` prints them.
CREATE OR REPLACE FUNCTION pgeval.run_probe_captured(p_target text, p_stage text, p_k integer,
                                                     p_captured text, p_window interval,
                                                     p_measured jsonb, p_method text,
                                                     p_defaults jsonb, p_rel oid, p_bounds jsonb)
RETURNS TABLE (probe_id bigint, recall double precision, p95_ms double precision,
               crossed text[], status text, shape integer, share double precision,
               weighted_recall double precision, worst_shape integer,
               worst_recall double precision)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    set_target text;
    sh record;
    e record;
    ix oid;
    t1 timestamptz;
    sweep_name text;
    new_id bigint;
    ids bigint[] := '{}';
    shapes integer[] := '{}';
    shares double precision[] := '{}';
BEGIN
    SELECT c.target INTO set_target FROM pgeval.captured_set c WHERE c.name = p_captured;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgeval.run_probe: no captured set ''%'' (`pgeval queries list` lists '
            'them)', p_captured USING ERRCODE = 'no_data_found';
    END IF;
    IF set_target <> p_target THEN
        RAISE EXCEPTION 'pgeval.run_probe: captured set ''%'' holds searches of target ''%'', '
            'not ''%''', p_captured, set_target, p_target USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR sh IN SELECT * FROM pgeval.captured_shapes(p_captured, p_window) c WHERE c.queries > 0
               ORDER BY c.shape LOOP
        t1 := clock_timestamp();
        sweep_name := format('probe-sql-%s-%s-%s.s%s', p_target, p_stage, p_captured, sh.shape);
        SELECT * INTO e
          FROM pgeval.evaluate_recall(sh.statement, sh.queries_sql,
                                      jsonb_build_object('enable_seqscan', 'off') || p_measured,
                                      k => coalesce(sh.k, p_k), name => sweep_name,
                                      target => p_target, replace => true) r;
        ix := (SELECT c.oid FROM pgeval.plan_indexes(e.plan) i
                 JOIN pg_class c ON c.relname = i.index_name
                 JOIN pg_index x ON x.indexrelid = c.oid AND x.indrelid = p_rel
                WHERE i.method = p_method LIMIT 1);
        IF ix IS NULL THEN
            RAISE EXCEPTION 'pgeval.run_probe: shape % of captured set ''%'' does not scan a % '
                'index of target ''%'' at % (%)', sh.shape, p_captured, p_method, p_target,
                p_measured, sh.statement USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        INSERT INTO pgeval.probe AS p (target, group_key, stage, k, settings, query_source,
                                       queries, recall, p50_ms, p95_ms, p99_ms, rows_mean,
                                       index_name, index_build, index_state, table_stats,
                                       ground_truth, bounds, wall_ms, via, sweep)
        VALUES (p_target, jsonb_build_object('shape', sh.shape::text), p_stage, e.at_k,
                p_measured,
                jsonb_build_object('kind', 'captured', 'captured', p_captured,
                                   'window', p_window::text, 'shape', sh.shape),
                e.n_queries, e.recall, e.p50_ms, e.p95_ms, e.p99_ms, e.rows_mean,
                (SELECT c.relname::text FROM pg_class c WHERE c.oid = ix),
                pgeval.probe_index_build(ix, p_defaults),
                pgeval.probe_index_state(ix, p_rel), pgeval.probe_table_stats(p_rel),
                jsonb_build_object('status', e.ground_truth, 'method', 'sql',
                                   'statement', sh.statement, 'sweep', sweep_name),
                p_bounds, extract(epoch FROM clock_timestamp() - t1) * 1000.0, 'sql',
                sweep_name)
        RETURNING p.probe_id INTO new_id;
        ids := ids || new_id;
        shapes := shapes || sh.shape;
        shares := shares || sh.share;
    END LOOP;
    IF cardinality(ids) = 0 THEN
        RAISE EXCEPTION 'pgeval.run_probe: captured set ''%'' has no query%', p_captured,
            CASE WHEN p_window IS NOT NULL
                 THEN format(' sent within %s of its newest', p_window) ELSE '' END
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN QUERY
    WITH o AS (
        SELECT u.id, u.shape, u.share, x.recall, x.p95_ms, x.crossed, x.status
          FROM unnest(ids, shapes, shares) u(id, shape, share)
         CROSS JOIN LATERAL pgeval.probe_outcome(u.id) x),
    w AS (
        SELECT sum(o.share * o.recall) / nullif(sum(o.share), 0) AS weighted,
               (SELECT o2.shape FROM o o2 ORDER BY o2.recall, o2.shape::text COLLATE "C"
                 LIMIT 1) AS worst
          FROM o)
    SELECT o.id, o.recall, o.p95_ms, o.crossed, o.status, o.shape, o.share, w.weighted, w.worst,
           (SELECT o3.recall FROM o o3 WHERE o3.shape = w.worst)
      FROM o CROSS JOIN w ORDER BY o.shape;
END
$$;

CREATE OR REPLACE FUNCTION pgeval.run_probe(p_target text,
                                            p_stage text,
                                            p_k integer DEFAULT 10,
                                            p_sample integer DEFAULT 100,
                                            p_seed integer DEFAULT 0,
                                            p_settings jsonb DEFAULT '{}',
                                            p_min_recall double precision DEFAULT NULL,
                                            p_max_drop double precision DEFAULT NULL,
                                            p_max_p95_ms double precision DEFAULT NULL,
                                            p_captured text DEFAULT NULL,
                                            p_window interval DEFAULT NULL)
RETURNS TABLE (probe_id bigint, recall double precision, p95_ms double precision,
               crossed text[], status text, shape integer, share double precision,
               weighted_recall double precision, worst_shape integer,
               worst_recall double precision)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    t0 timestamptz := clock_timestamp();
    spec jsonb;
    kind record;
    rel oid;
    tbl text;
    idx text;        -- the id as text in byte order
    vexpr text;      -- the vector expression the index serves
    dexpr text;      -- the bare distance operator expression, query $1
    wh text := '';   -- WHERE of the target's rows; filter values in $2 (text[])
    fvals text[] := '{}';
    parts text[] := '{}';
    f record;
    coltype text;
    vals text[];
    cond text;
    merged jsonb;
    measured jsonb;
    saved jsonb := '{}';
    s record;
    setting text;
    setting_value text;
    qids text[];
    qvecs vector[];
    exact_sql text;
    ann_sql text;
    plan jsonb;
    ix record;
    ids text[];
    dists double precision[];
    d_k double precision;
    n_exact integer;
    hits integer;
    t1 timestamptz;
    lat double precision[] := '{}';
    rows_back integer[] := '{}';
    per_query double precision[] := '{}';
    exact_n integer[] := '{}';
    exact_dk double precision[] := '{}';
    prior jsonb;
    gt_status text;
    i integer;
    data_rows bigint;
    checksum text;
    changes jsonb;  -- the change log's state (evaluator/table/change_log.py), when tracked
    idtype text;
    again jsonb;
    stats jsonb;
    bounds jsonb;
    new_id bigint;
    h record;
    guarded CONSTANT text[] := ARRAY['transaction_read_only', 'default_transaction_read_only',
        'transaction_isolation', 'default_transaction_isolation', 'transaction_deferrable',
        'default_transaction_deferrable', 'role', 'session_authorization'];
BEGIN
    -- ---- the request ------------------------------------------------------------------------
    SELECT t.spec INTO spec FROM pgeval.target t WHERE t.name = p_target;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgeval.run_probe: no target named ''%'' (see `pgeval target list`)',
            p_target USING ERRCODE = 'no_data_found';
    END IF;
    SELECT * INTO kind FROM pgeval.probe_kinds() k WHERE k.kind = p_stage;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgeval.run_probe measures stage hnsw, ivfflat or diskann, not ''%'': %',
            p_stage,
            -- a cast search is named after its access method's kind (hnsw-halfvec, hnsw-bq,
            -- ivfflat-halfvec: evaluator/kinds/registry.py; tests/test_watch_sql.py)
            CASE WHEN split_part(p_stage, '-', 1) IN (SELECT k.kind FROM pgeval.probe_kinds() k)
                 THEN 'a search of a cast column is probed by `pgeval watch` only'
                 ELSE 'a probe measures an ANN index against exact search (keyword, merge, '
                      'rerank and service stages are probed by no one; `pgeval watch` lists the '
                      'ANN stages)' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_k IS NULL OR p_k < 1 THEN
        RAISE EXCEPTION 'pgeval.run_probe: p_k must be >= 1, got %', p_k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_sample IS NULL OR p_sample < 1 THEN
        RAISE EXCEPTION 'pgeval.run_probe: p_sample must be >= 1, got %', p_sample
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_window IS NOT NULL AND p_captured IS NULL THEN
        RAISE EXCEPTION 'pgeval.run_probe: p_window goes with p_captured (the newest of a '
            'captured set)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_window <= interval '0' THEN
        RAISE EXCEPTION 'pgeval.run_probe: p_window must be a positive interval (1 hour, 7 '
            'days), got %', p_window USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_min_recall IS NOT NULL AND NOT p_min_recall BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'pgeval.run_probe: p_min_recall must be in [0, 1], got %', p_min_recall
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_drop IS NOT NULL AND NOT p_max_drop BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'pgeval.run_probe: p_max_drop must be in [0, 1], got %', p_max_drop
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_p95_ms IS NOT NULL AND NOT p_max_p95_ms > 0 THEN
        RAISE EXCEPTION 'pgeval.run_probe: p_max_p95_ms must be above 0, got %', p_max_p95_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(coalesce(p_settings, '{}'::jsonb)) <> 'object' THEN
        RAISE EXCEPTION 'pgeval.run_probe: p_settings must be a JSON object '
            '{"hnsw.ef_search": "100"}, got %', p_settings USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce((spec ->> 'unique_id')::boolean, false) THEN
        RAISE EXCEPTION 'pgeval.run_probe: target ''%'' has several rows per chunk (its id column '
            'is not unique): probe it with `pgeval watch`, which collapses them', p_target
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF spec -> 'threshold' IS NOT NULL AND jsonb_typeof(spec -> 'threshold') = 'object' THEN
        RAISE EXCEPTION 'pgeval.run_probe: target ''%'' has a threshold: probe it with '
            '`pgeval watch`', p_target USING ERRCODE = 'feature_not_supported';
    END IF;
    IF spec ->> 'statement' IS NOT NULL THEN
        RAISE EXCEPTION 'pgeval.run_probe: target ''%'' is searched by its own statement (target '
            'add --statement): probe it with `pgeval watch`, or measure the statement with '
            'pgeval.evaluate_recall', p_target USING ERRCODE = 'feature_not_supported';
    END IF;

    -- ---- the target's statement pieces (identifiers by %I, filter values bound as $2) --------
    rel := to_regclass(CASE WHEN spec ->> 'schema' IS NULL THEN format('%I', spec ->> 'table')
                            ELSE format('%I.%I', spec ->> 'schema', spec ->> 'table') END);
    IF rel IS NULL THEN
        RAISE EXCEPTION 'pgeval.run_probe: table ''%'' of target ''%'' does not exist',
            concat_ws('.', spec ->> 'schema', spec ->> 'table'), p_target
            USING ERRCODE = 'undefined_table';
    END IF;
    tbl := rel::regclass::text;
    IF coalesce(spec ->> 'vector_type', 'vector') NOT IN ('vector', 'halfvec')
       OR coalesce(spec ->> 'distance', 'cosine') NOT IN ('cosine', 'l2', 'ip') THEN
        RAISE EXCEPTION 'pgeval.run_probe: target ''%'' searches % by %: not a vector target',
            p_target, spec ->> 'vector_type', spec ->> 'distance'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    idx := format('(%I::text COLLATE "C")', spec ->> 'id_column');
    -- Target.vector_expr / query_expr: a dimension column casts both sides to type(N)
    vexpr := CASE WHEN spec ->> 'dimension_column' IS NOT NULL
                  THEN format('(%I)::%s(%s)', spec ->> 'vector_column', spec ->> 'vector_type',
                              (spec ->> 'dimension')::integer)
                  ELSE format('%I', spec ->> 'vector_column') END;
    dexpr := format('%s %s %s', vexpr,
                    CASE spec ->> 'distance' WHEN 'l2' THEN '<->' WHEN 'ip' THEN '<#>'
                         ELSE '<=>' END,
                    CASE WHEN coalesce(spec ->> 'vector_type', 'vector') = 'vector'
                              AND spec ->> 'dimension_column' IS NULL THEN '$1::vector'
                         WHEN spec ->> 'dimension' IS NULL
                         THEN format('$1::vector::%s', spec ->> 'vector_type')
                         ELSE format('$1::vector::%s(%s)', spec ->> 'vector_type',
                                     (spec ->> 'dimension')::integer) END);
    IF spec ->> 'dimension_column' IS NOT NULL THEN
        parts := parts || format('%I = %s', spec ->> 'dimension_column',
                                 (spec ->> 'dimension')::integer);
    END IF;
    FOR f IN SELECT e.key, e.value FROM jsonb_each(coalesce(spec -> 'filters', '{}')) e LOOP
        SELECT format_type(a.atttypid, a.atttypmod) INTO coltype
          FROM pg_attribute a WHERE a.attrelid = rel AND a.attname = f.key AND NOT a.attisdropped;
        IF coltype IS NULL THEN
            RAISE EXCEPTION 'pgeval.run_probe: filter column ''%'' of target ''%'' does not exist',
                f.key, p_target USING ERRCODE = 'undefined_column';
        END IF;
        vals := CASE WHEN jsonb_typeof(f.value) = 'array'
                     THEN ARRAY(SELECT jsonb_array_elements_text(f.value))
                     ELSE ARRAY[f.value #>> '{}'] END;
        SELECT string_agg(format('($2::text[])[%s]::%s', cardinality(fvals) + n, coltype), ', '
                          ORDER BY n)
          INTO cond FROM generate_series(1, cardinality(vals)) n;
        cond := CASE WHEN jsonb_typeof(f.value) = 'array' THEN format('%I IN (%s)', f.key, cond)
                     ELSE format('%I = %s', f.key, cond) END;
        IF coalesce(spec -> 'null_true', '[]') ? f.key THEN
            cond := format('(%I IS NULL OR %s)', f.key, cond);
        END IF;
        parts := parts || cond;
        fvals := fvals || vals;
    END LOOP;
    IF cardinality(parts) > 0 THEN
        wh := ' WHERE ' || array_to_string(parts, ' AND ');
    END IF;

    -- ---- the production setting -------------------------------------------------------------
    PERFORM '[1]'::vector;  -- pgvector's library defines hnsw.* and ivfflat.*
    IF kind.index_method = 'diskann' THEN  -- pgvectorscale's defines diskann.*
        FOR s IN SELECT n.nspname FROM pg_extension e JOIN pg_depend d ON d.refobjid = e.oid
                   JOIN pg_proc p ON p.oid = d.objid JOIN pg_namespace n ON n.oid = p.pronamespace
                  WHERE e.extname = 'vectorscale' AND p.proname = 'distance_type_cosine' LOOP
            EXECUTE format('SELECT %I.distance_type_cosine()', s.nspname);
        END LOOP;
    END IF;
    merged := pgeval.probe_scope(coalesce(spec -> 'settings', '{}') || coalesce(p_settings, '{}'),
                                 p_stage);
    setting := (SELECT w FROM unnest(kind.work_settings) WITH ORDINALITY u(w, o)
                 WHERE merged ? w ORDER BY o LIMIT 1);
    IF setting IS NULL THEN  -- the server's current value of the first work setting it has
        setting := (SELECT w FROM unnest(kind.work_settings) WITH ORDINALITY u(w, o)
                     WHERE current_setting(w, true) IS NOT NULL ORDER BY o LIMIT 1);
        setting_value := current_setting(setting, true);
    ELSE
        setting_value := merged ->> setting;
    END IF;
    IF setting IS NULL OR setting_value IS NULL THEN
        RAISE EXCEPTION 'pgeval.run_probe: the server has no setting % (is the % stage''s '
            'extension installed?)', array_to_string(kind.work_settings, ' or '), p_stage
            USING ERRCODE = 'undefined_object';
    END IF;
    measured := merged || jsonb_build_object(setting, setting_value);
    FOR s IN SELECT e.key FROM jsonb_each(measured) e LOOP
        IF s.key = ANY (guarded) OR s.key = 'statement_timeout' THEN
            RAISE EXCEPTION 'pgeval.run_probe: setting ''%'' cannot be changed by a probe', s.key
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_settings g WHERE g.name = s.key) THEN
            RAISE EXCEPTION 'pgeval.run_probe: unknown setting ''%''', s.key
                USING ERRCODE = 'undefined_object';
        END IF;
    END LOOP;
    bounds := jsonb_strip_nulls(jsonb_build_object('min_recall', p_min_recall,
                                                   'max_drop', p_max_drop,
                                                   'max_p95_ms', p_max_p95_ms));
    IF p_captured IS NOT NULL THEN  -- the application's own searches, shape by shape
        RETURN QUERY SELECT * FROM pgeval.run_probe_captured(p_target, p_stage, p_k, p_captured,
                                                             p_window, measured,
                                                             kind.index_method,
                                                             kind.build_defaults, rel, bounds);
        RETURN;
    END IF;
    -- everything the probe sets, with the value the caller's transaction has (put back at the end)
    FOR s IN SELECT u.name FROM unnest(ARRAY['enable_seqscan', 'enable_indexscan',
                                             'enable_indexonlyscan', 'extra_float_digits']) u(name)
             UNION SELECT e.key FROM jsonb_each(measured) e LOOP
        saved := saved || jsonb_build_object(s.name, current_setting(s.name));
    END LOOP;

    -- ---- the change log (`pgeval target track`) --------------------------------------------
    -- its triggers' row versions and the count of write statements (pgeval_changes.state, one
    -- snapshot): when they are those the last SQL probe of this target definition and sample
    -- recorded, so are the rows, the content checksum and the sampled ids (no pass over the
    -- table; the ids' vectors are read through the id column's index)
    IF has_function_privilege(to_regprocedure('pgeval_changes.state(oid)'), 'EXECUTE') THEN
        EXECUTE 'SELECT to_jsonb(pgeval_changes.state($1))' INTO changes USING rel;
        changes := nullif(changes, 'null'::jsonb);
    END IF;
    IF changes IS NOT NULL THEN
        SELECT p.table_rows, p.data_checksum,
               ARRAY(SELECT e FROM jsonb_array_elements_text(p.ground_truth -> 'ids')
                                   WITH ORDINALITY u(e, o) ORDER BY o)
          INTO data_rows, checksum, qids
          FROM pgeval.probe p
         WHERE p.via = 'sql' AND p.target = p_target AND p.ground_truth -> 'changes' = changes
           AND p.ground_truth ->> 'spec' = md5(spec::text) AND p.data_checksum IS NOT NULL
           AND jsonb_typeof(p.ground_truth -> 'ids') = 'array'
           AND p.query_source = jsonb_build_object('kind', 'sample', 'count', p_sample,
                                                   'seed', p_seed)
         ORDER BY p.probe_id DESC LIMIT 1;
    END IF;
    IF qids IS NOT NULL THEN
        SELECT format_type(a.atttypid, a.atttypmod) INTO idtype FROM pg_attribute a
         WHERE a.attrelid = rel AND a.attname = spec ->> 'id_column' AND NOT a.attisdropped;
        EXECUTE format('SELECT array_agg(t.q ORDER BY u.o) FROM unnest($3) WITH ORDINALITY '
                       'u(id, o) JOIN (SELECT %1$s AS id, (%2$s)::vector AS q FROM %3$s%4$s) t '
                       'ON t.id = u.id', idx, vexpr, tbl,
                       CASE WHEN wh = '' THEN ' WHERE ' ELSE wh || ' AND ' END
                           || format('%I = ANY ($3::text[]::%s[]) AND %s = ANY ($3)',
                                     spec ->> 'id_column', idtype, idx))
           INTO qvecs USING NULL::vector, fvals, qids;
        -- a write counted since the state was read: everything measured afresh below
        EXECUTE 'SELECT to_jsonb(pgeval_changes.state($1))' INTO again USING rel;
        IF nullif(again, 'null'::jsonb) IS DISTINCT FROM changes THEN
            changes := nullif(again, 'null'::jsonb);
            qids := NULL;
            data_rows := NULL;
            checksum := NULL;
        END IF;
    END IF;

    -- ---- the sample (query_source.sample's rule) --------------------------------------------
    IF qids IS NULL THEN
        -- two statements, as there: the ids in hash order (no vector read), then their vectors
        EXECUTE format('SELECT array_agg(s.id ORDER BY s.h, s.id) FROM (SELECT %1$s AS id, '
                       'hashtextextended(%1$s, $3) AS h FROM %2$s%3$s ORDER BY 2, 1 LIMIT $4) s',
                       idx, tbl,
                       CASE WHEN wh = '' THEN ' WHERE ' ELSE wh || ' AND ' END
                           || format('%I IS NOT NULL', spec ->> 'vector_column'))
           INTO qids USING NULL::vector, fvals, p_seed::bigint, p_sample;
        EXECUTE format('SELECT array_agg(t.q ORDER BY u.o) FROM unnest($3) WITH ORDINALITY '
                       'u(id, o) JOIN (SELECT %1$s AS id, (%2$s)::vector AS q FROM %3$s%4$s) t '
                       'ON t.id = u.id', idx, vexpr, tbl,
                       CASE WHEN wh = '' THEN ' WHERE ' ELSE wh || ' AND ' END
                           || format('%s = ANY ($3)', idx))
           INTO qvecs USING NULL::vector, fvals, qids;
    END IF;
    IF coalesce(cardinality(qids), 0) < p_sample THEN
        RAISE EXCEPTION 'pgeval.run_probe: target ''%'' has % chunks (after its filters), fewer '
            'than the % asked for', p_target, coalesce(cardinality(qids), 0), p_sample
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF coalesce(cardinality(qvecs), 0) <> cardinality(qids) THEN  -- a concurrent DELETE
        RAISE EXCEPTION 'pgeval.run_probe: rows of the sample of target ''%'' changed while it '
            'was read: run the probe again', p_target USING ERRCODE = 'serialization_failure';
    END IF;

    -- ---- the data and the index (what explains a change) ------------------------------------
    IF checksum IS NULL THEN
        EXECUTE format('SELECT count(*), coalesce(sum(hashtextextended(coalesce(%I::text, '''') '
                       '|| ''|'' || coalesce(md5(%s(%I)), ''null'')%s, 0)::numeric), 0) FROM %s%s',
                       spec ->> 'id_column',
                       (SELECT t.typsend::text FROM pg_attribute a
                          JOIN pg_type t ON t.oid = a.atttypid
                         WHERE a.attrelid = rel AND a.attname = spec ->> 'vector_column'),
                       spec ->> 'vector_column',
                       CASE WHEN spec ->> 'text_column' IS NOT NULL
                            THEN format(' || ''|'' || coalesce(md5(%I::text), ''null'')',
                                        spec ->> 'text_column') ELSE '' END,
                       tbl, wh)
           INTO data_rows, checksum USING NULL::vector, fvals;
        -- evaluator/table/data_checksum: the sum modulo 2^64 as 16 hex digits
        checksum := lpad(to_hex((CASE WHEN mod(mod(checksum::numeric, 18446744073709551616)
                                               + 18446744073709551616, 18446744073709551616)
                                           >= 9223372036854775808
                                      THEN mod(mod(checksum::numeric, 18446744073709551616)
                                               + 18446744073709551616, 18446744073709551616)
                                           - 18446744073709551616
                                      ELSE mod(mod(checksum::numeric, 18446744073709551616)
                                               + 18446744073709551616, 18446744073709551616)
                                 END)::bigint), 16, '0');
    END IF;
    stats := pgeval.probe_table_stats(rel);

    exact_sql := format('SELECT array_agg(s.id ORDER BY s.dist, s.id), '
                        'array_agg(s.dist ORDER BY s.dist, s.id) FROM (SELECT %s AS id, '
                        '%s AS dist FROM %s%s ORDER BY %s LIMIT %s) s',
                        idx, dexpr, tbl, wh, dexpr, p_k + 1);
    ann_sql := format('SELECT %s AS id, %s AS dist FROM %s%s ORDER BY %s LIMIT %s',
                      idx, dexpr, tbl, wh, dexpr, p_k + 1);

    -- ---- exact search: no ANN index ---------------------------------------------------------
    PERFORM set_config('enable_indexscan', 'off', true),
            set_config('enable_indexonlyscan', 'off', true),
            set_config('enable_seqscan', 'on', true);
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || exact_sql INTO plan USING qvecs[1], fvals;
    IF EXISTS (SELECT 1 FROM jsonb_path_query(plan, 'strict $.**."Index Name"') j(name)
                 JOIN pg_class c ON c.relname = j.name #>> '{}'
                 JOIN pg_index i ON i.indexrelid = c.oid AND i.indrelid = rel
                 JOIN pg_am am ON am.oid = c.relam
                WHERE am.amname IN (SELECT k.index_method FROM pgeval.probe_kinds() k)) THEN
        RAISE EXCEPTION 'pgeval.run_probe: exact search on target ''%'' would use an ANN index',
            p_target;
    END IF;
    -- per query: n = exact rows other than its own (at most k), d_K = the largest of them;
    -- those of the last SQL probe of the same queries on the same data (content checksum and
    -- rows) and target definition, else computed (stored in the row's ground_truth as text, at
    -- extra_float_digits 1: the shortest text that reads back as the same double)
    PERFORM set_config('extra_float_digits', '1', true);
    SELECT p.ground_truth INTO prior FROM pgeval.probe p
     WHERE p.via = 'sql' AND p.target = p_target AND p.k = p_k
       AND p.data_checksum = checksum AND p.table_rows = data_rows
       AND p.ground_truth ->> 'spec' = md5(spec::text)
       AND p.ground_truth ->> 'queries' = md5(qids::text)
     ORDER BY p.probe_id DESC LIMIT 1;
    IF prior IS NOT NULL THEN
        exact_n := ARRAY(SELECT e::integer FROM jsonb_array_elements_text(prior -> 'n')
                                                WITH ORDINALITY u(e, o) ORDER BY o);
        exact_dk := ARRAY(SELECT e::float8 FROM jsonb_array_elements_text(prior -> 'd_k')
                                                WITH ORDINALITY u(e, o) ORDER BY o);
        gt_status := 'reused';
    ELSE
        FOR i IN 1 .. cardinality(qids) LOOP
            EXECUTE exact_sql INTO ids, dists USING qvecs[i], fvals;
            SELECT count(*), max(x.d) INTO n_exact, d_k
              FROM (SELECT u.d FROM unnest(ids, dists) u(id, d)
                     WHERE u.id <> qids[i] ORDER BY u.d LIMIT p_k) x;
            exact_n := exact_n || n_exact;
            exact_dk := exact_dk || d_k;
        END LOOP;
        gt_status := 'computed';
    END IF;

    -- ---- the ANN statement at the production setting ----------------------------------------
    PERFORM set_config('enable_seqscan', 'off', true),
            set_config('enable_indexscan', saved ->> 'enable_indexscan', true),
            set_config('enable_indexonlyscan', saved ->> 'enable_indexonlyscan', true);
    FOR s IN SELECT e.key, e.value #>> '{}' AS value FROM jsonb_each(measured) e LOOP
        PERFORM set_config(s.key, s.value, true);
    END LOOP;
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || ann_sql INTO plan USING qvecs[1], fvals;
    SELECT c.relname::text AS name, c.oid, am.amname::text AS method, c.reloptions
      INTO ix
      FROM jsonb_path_query(plan, 'strict $.**."Index Name"') WITH ORDINALITY j(name, o)
      JOIN pg_class c ON c.relname = j.name #>> '{}'
      JOIN pg_index i ON i.indexrelid = c.oid AND i.indrelid = rel
      JOIN pg_am am ON am.oid = c.relam
     WHERE am.amname = kind.index_method
     ORDER BY j.o LIMIT 1;
    IF ix.name IS NULL THEN
        RAISE EXCEPTION 'pgeval.run_probe: the % statement of target ''%'' does not scan a % '
            'index at %=% (plan: %); is there one on the vector column with the target''s '
            'operator class?', p_stage, p_target, kind.index_method, setting, setting_value,
            (SELECT string_agg(DISTINCT j #>> '{}', ', ')
               FROM jsonb_path_query(plan, 'strict $.**."Node Type"') j)
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    FOR i IN 1 .. cardinality(qids) LOOP
        t1 := clock_timestamp();
        EXECUTE format('SELECT array_agg(a.id), array_agg(a.dist) FROM (%s) a', ann_sql)
           INTO ids, dists USING qvecs[i], fvals;
        lat := lat || (extract(epoch FROM clock_timestamp() - t1) * 1000.0)::float8;
        rows_back := rows_back || coalesce(cardinality(ids), 0);
        n_exact := exact_n[i];
        d_k := exact_dk[i];
        IF n_exact > 0 THEN
            SELECT count(*) FILTER (WHERE x.d <= d_k + 1e-6 * greatest(1.0, abs(d_k))) INTO hits
              FROM (SELECT u.d FROM unnest(ids, dists) u(id, d)
                     WHERE u.id <> qids[i] ORDER BY u.d, u.id COLLATE "C" LIMIT p_k) x;
            per_query := per_query || (hits::float8 / n_exact);
        END IF;
    END LOOP;

    -- ---- the row ----------------------------------------------------------------------------
    INSERT INTO pgeval.probe AS p (target, group_key, stage, k, settings, query_source, queries,
                                   recall, p50_ms, p95_ms, p99_ms, rows_mean, timed_ms,
                                   table_rows, data_checksum, index_name, index_build,
                                   index_state, table_stats, ground_truth, bounds, wall_ms, via)
    VALUES (p_target, NULL, p_stage, p_k, measured,
            jsonb_build_object('kind', 'sample', 'count', p_sample, 'seed', p_seed),
            cardinality(qids),
            (SELECT avg(v) FROM unnest(per_query) v),
            pgeval.nearest_rank(lat, 0.5), pgeval.nearest_rank(lat, 0.95),
            pgeval.nearest_rank(lat, 0.99),
            (SELECT avg(v)::float8 FROM unnest(rows_back) v),
            (SELECT sum(v) FROM unnest(lat) v),
            data_rows, checksum, ix.name,
            pgeval.probe_index_build(ix.oid, kind.build_defaults),
            pgeval.probe_index_state(ix.oid, rel),
            stats,
            jsonb_build_object('status', gt_status, 'method', 'sql', 'depth', p_k + 1,
                               'reason', CASE WHEN gt_status = 'computed' THEN
                                   'no earlier SQL probe of these queries on this data and '
                                   'target definition' END,
                               'spec', md5(spec::text), 'queries', md5(qids::text),
                               'n', to_jsonb(exact_n), 'd_k', to_jsonb(exact_dk::text[]),
                               'changes', changes,
                               'ids', CASE WHEN changes IS NOT NULL THEN to_jsonb(qids) END),
            bounds,
            extract(epoch FROM clock_timestamp() - t0) * 1000.0,
            'sql')
    RETURNING p.probe_id INTO new_id;
    FOR s IN SELECT e.key, e.value #>> '{}' AS value FROM jsonb_each(saved) e LOOP
        PERFORM set_config(s.key, s.value, true);  -- the caller's values again
    END LOOP;
    SELECT o.* INTO h FROM pgeval.probe_outcome(new_id) o;
    probe_id := new_id;
    recall := h.recall;
    p95_ms := h.p95_ms;
    crossed := h.crossed;
    status := h.status;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION pgeval.run_probe(text, text, integer, integer, integer, jsonb,
                                     double precision, double precision, double precision,
                                     text, interval) IS
    'One probe of a target''s ANN stage run inside the database (pg_cron): recall against '
    'exact search, latency, rows, index build; one row of pgeval.probe with via = ''sql'' '
    '(one per shape of a captured set with p_captured) (docs/watch.md, "From pg_cron")';
