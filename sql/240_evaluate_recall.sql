-- A set of queries over a settings grid, in one SQL call, stored as a sweep (docs/sql.md):
--
--   SELECT * FROM pgeval.evaluate_recall(
--       $$SELECT id, embedding <=> $1 AS distance FROM docs WHERE tenant = $2
--         ORDER BY embedding <=> $1 LIMIT 10$$,
--       $$SELECT embedding, tenant FROM query_log ORDER BY id LIMIT 300$$,
--       '{"hnsw.ef_search": [10, 20, 40], "hnsw.iterative_scan": ["off", "relaxed_order"]}',
--       group_by => 'tenant');
--
-- statement  the application's SELECT with $1 the query vector and $2, $3 ... the values of the
--            queries' next columns (a tenant), checked as pgeval.evaluate_query_recall checks its
--            statement; each query's values are put in as literals (quote_nullable), so that the
--            planner sees them as it sees a one-shot statement (a custom plan)
-- queries    a SELECT yielding, per query, the vector ($1) and the other parameters in order; a
--            column named query_id names the query (else q1, q2, ... in the order returned) and is
--            no parameter; group_by names one of its columns (one sweep per value)
-- settings   a grid: values given as arrays are combined (every combination a point, at most
--            max_points), single values apply at every point
-- k          recall@k (default: the rows exact search returns at most, the statement's LIMIT)
--
-- Measured as pgeval.evaluate_query_recall measures (a READ ONLY subtransaction, rolled back: the
-- settings as they were): exact search once per query (the exact twin), then every point over
-- every query. Stored as the CLI stores a sweep (evaluator/tuning/sweep/store.py): a test set of the
-- queries (pgeval.testset, source 'queries'), an experiment, its exact run and one ANN run per
-- point (result lists, per-query timings), pgeval.sweep and pgeval.sweep_point with the values
-- filled from pgeval.index_recall, pgeval.run_throughput and pgeval.run_latency; `pgeval
-- stage-report NAME`, `pgeval report NAME.LABEL.1` and the views of sql/250_evaluation_views.sql
-- read it. The exact answer is reused from the last evaluation of the same statement, queries
-- and fixed settings while the data of every table the exact twin reads is unchanged (its rows'
-- count and content checksum, one scan of each); ground_truth says which.
--
-- One row per group and point: recall@k (pgeval.sweep_summary's index_recall), its 95 % margin
-- (pgeval.sweep_point_recall_margin), p50/p95/p99 (nearest rank), rows returned, queries, the
-- index type and plan of the point (EXPLAIN of its first query).

-- The rows and content checksum of the tables a plan reads (its "Relation Name"s): the identity
-- of the data an exact answer was computed on.
CREATE OR REPLACE FUNCTION pgeval.plan_data_version(p_plan jsonb)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    r record;
    v text;
    out_v jsonb := '{}';
BEGIN
    FOR r IN SELECT DISTINCT c.oid::regclass AS rel
               FROM jsonb_path_query(p_plan, 'strict $.**."Relation Name"') j(name)
               JOIN pg_class c ON c.oid = to_regclass(quote_ident(j.name #>> '{}'))
              ORDER BY 1 LOOP
        EXECUTE format('SELECT count(*) || '':'' || coalesce(sum(hashtextextended(t::text, 0)'
                       '::numeric), 0) FROM %s t', r.rel) INTO v;
        out_v := out_v || jsonb_build_object(r.rel::text, v);
    END LOOP;
    RETURN out_v;
END
$$;

-- The queries of an evaluation: per query its id, its parameters as literals (p_params of them:
-- $1, $2, ... from the columns in order, query_id left out) and its group (column p_group_by).
CREATE OR REPLACE FUNCTION pgeval.evaluation_queries(p_fn text, p_queries text, p_params integer,
                                                     p_group_by text, p_max_queries integer,
                                                     OUT ids text[], OUT literals text[],
                                                     OUT groups text[])
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    rows_json json[];
    j json;
    vals text[];
    keys text[];
    i integer := 0;
BEGIN
    EXECUTE format('SELECT array_agg(x.j ORDER BY x.n) FROM (SELECT to_json(q) AS j, '
                   'row_number() OVER () AS n FROM (%s) q LIMIT %s) x',
                   p_queries, p_max_queries + 1) INTO rows_json;
    IF coalesce(cardinality(rows_json), 0) = 0 THEN
        RAISE EXCEPTION '%: the queries statement returned no rows', p_fn
            USING ERRCODE = 'no_data_found';
    END IF;
    IF cardinality(rows_json) > p_max_queries THEN
        RAISE EXCEPTION '%: the queries statement returns more than max_queries => % rows (add '
            'a LIMIT, or raise max_queries)', p_fn, p_max_queries
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    ids := '{}';
    literals := '{}';
    groups := '{}';
    FOREACH j IN ARRAY rows_json LOOP
        i := i + 1;
        SELECT array_agg(e.key ORDER BY e.o), array_agg(e.value ORDER BY e.o)
          INTO keys, vals
          FROM json_each_text(j) WITH ORDINALITY e(key, value, o) WHERE e.key <> 'query_id';
        IF coalesce(cardinality(vals), 0) < p_params THEN
            RAISE EXCEPTION '%: the statement uses $% but the queries statement yields % '
                'column(s) (query_id aside)', p_fn, p_params, coalesce(cardinality(vals), 0)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF i = 1 AND p_group_by IS NOT NULL AND NOT (j::jsonb ? p_group_by) THEN
            RAISE EXCEPTION '%: group_by "%" is not a column of the queries statement (its '
                'columns: %)', p_fn, p_group_by, array_to_string(keys, ', ')
                USING ERRCODE = 'undefined_column';
        END IF;
        IF vals[1] IS NULL THEN
            RAISE EXCEPTION '%: query % has no vector (its first column is NULL)', p_fn,
                coalesce(j ->> 'query_id', 'q' || i) USING ERRCODE = 'null_value_not_allowed';
        END IF;
        ids := ids || coalesce(j ->> 'query_id', 'q' || i);
        literals := literals || ARRAY(SELECT quote_nullable(v) FROM unnest(vals[1:p_params]) v);
        groups := groups || CASE WHEN p_group_by IS NULL THEN NULL ELSE j ->> p_group_by END;
    END LOOP;
    IF (SELECT count(DISTINCT x) FROM unnest(ids) x) < cardinality(ids) THEN
        RAISE EXCEPTION '%: the queries statement repeats a query_id', p_fn
            USING ERRCODE = 'unique_violation';
    END IF;
END
$$;

-- A sweep's point label as the CLI writes it (evaluator/tuning/sweep/grid.label_of): NAME=VALUE of
-- each varying setting, NAME without its extension prefix, joined by commas; default without any.
CREATE OR REPLACE FUNCTION pgeval.point_label(p_settings jsonb)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(string_agg(CASE WHEN strpos(e.key, '.') > 0
                                    THEN substr(e.key, strpos(e.key, '.') + 1) ELSE e.key END
                               || '=' || (e.value #>> '{}'), ',' ORDER BY e.key), 'default')
      FROM jsonb_each(p_settings) e
$$;

-- Stores one run of an evaluation: its result lists (p_lists[q], p_dists[q]: query q's ids and
-- distances as array text; NULL: no rows; without distances, the rank when p_rank, else NULL)
-- and per-query timings of the queries p_pick; the run is complete.
CREATE OR REPLACE FUNCTION pgeval.store_evaluation_run(p_testset bigint, p_experiment bigint,
                                                       p_name text, p_stage text, p_params jsonb,
                                                       p_order text, p_depth integer,
                                                       p_qids text[], p_pick integer[],
                                                       p_lists text[], p_dists text[],
                                                       p_ms double precision[], p_rank boolean)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    new_run bigint;
BEGIN
    INSERT INTO pgeval.run (name, testset_id, experiment_id, stage, repetition, params,
                            order_rule, depth, timing_boundary, status, finished_at)
    VALUES (p_name, p_testset, p_experiment, p_stage, 1, p_params, p_order, p_depth,
            'server: clock_timestamp() around one execution of the statement inside '
            'pgeval.evaluate_recall (no client round trip); its parameters as literals',
            'complete', now())
    RETURNING run_id INTO new_run;
    INSERT INTO pgeval.result_list (run_id, query_id, chunk_ids, scores, grades)
    SELECT new_run, p_qids[q], l.ids,
           coalesce(p_dists[q]::float8[],
                    CASE WHEN p_rank
                         THEN ARRAY(SELECT generate_series(1, cardinality(l.ids))::float8)
                         ELSE array_fill(NULL::float8, ARRAY[cardinality(l.ids)]) END),
           array_fill(NULL::smallint, ARRAY[cardinality(l.ids)])
      FROM unnest(p_pick) q CROSS JOIN LATERAL (SELECT p_lists[q]::text[] AS ids) l
     WHERE cardinality(l.ids) > 0;
    INSERT INTO pgeval.query_timing (run_id, query_id, latency_ms, rows_returned)
    SELECT new_run, p_qids[q], p_ms[q], coalesce(cardinality(p_lists[q]::text[]), 0)
      FROM unnest(p_pick) q;
    RETURN new_run;
END
$$;

-- The test set of an evaluation's queries (one group's): found by its content, else created.
CREATE OR REPLACE FUNCTION pgeval.evaluation_testset(p_queries text, p_qids text[],
                                                     p_literals text[], p_pick integer[],
                                                     p_params integer)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    content text;
    ts bigint;
BEGIN
    content := md5(array_to_string(ARRAY(
        SELECT p_qids[q] || '=' || array_to_string(
                   p_literals[(q - 1) * p_params + 1:q * p_params], ',', 'NULL')
          FROM unnest(p_pick) q), E'\n'));
    SELECT t.testset_id INTO ts FROM pgeval.testset t WHERE t.name = 'sql-queries-' || content;
    IF FOUND THEN
        RETURN ts;
    END IF;
    INSERT INTO pgeval.testset (name, content_hash, source_format, n_queries, query_source)
    VALUES ('sql-queries-' || content, content, 'queries', cardinality(p_pick),
            jsonb_build_object('source', 'sql', 'sql', p_queries, 'count', cardinality(p_pick),
                               'content_hash', content, 'own_chunk_removed', false))
    RETURNING testset_id INTO ts;
    INSERT INTO pgeval.query (testset_id, query_id, position)
    SELECT ts, p_qids[u.q], u.o FROM unnest(p_pick) WITH ORDINALITY u(q, o);
    RETURN ts;
END
$$;

-- Whether an evaluation named p_name (or its groups' sweeps, p_name/COLUMN=VALUE) is stored.
CREATE OR REPLACE FUNCTION pgeval.evaluation_name_taken(p_name text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM pgeval.sweep s
                    WHERE s.name = p_name OR left(s.name, length(p_name) + 1) = p_name || '/')
        OR EXISTS (SELECT 1 FROM pgeval.experiment e WHERE e.name = p_name)
$$;

-- Deletes the evaluation named p_name: its sweeps, their experiments and runs.
CREATE OR REPLACE FUNCTION pgeval.drop_evaluation(p_name text)
RETURNS void LANGUAGE sql VOLATILE AS $$
    DELETE FROM pgeval.experiment e
     WHERE e.experiment_id IN (SELECT s.experiment_id FROM pgeval.sweep s
                                WHERE s.name = p_name
                                   OR left(s.name, length(p_name) + 1) = p_name || '/')
        OR e.name = p_name;
    DELETE FROM pgeval.sweep s
     WHERE s.name = p_name OR left(s.name, length(p_name) + 1) = p_name || '/';
$$;

-- Renames the evaluation named p_name (its sweeps, their experiments and runs) to p_new.
CREATE OR REPLACE FUNCTION pgeval.rename_evaluation(p_name text, p_new text)
RETURNS void LANGUAGE sql VOLATILE AS $$
    UPDATE pgeval.run r SET name = p_new || substr(r.name, length(p_name) + 1)
      FROM pgeval.experiment e
     WHERE r.experiment_id = e.experiment_id
       AND (e.name = p_name OR left(e.name, length(p_name) + 1) = p_name || '/')
       AND left(r.name, length(p_name)) = p_name;
    UPDATE pgeval.experiment e SET name = p_new || substr(e.name, length(p_name) + 1)
     WHERE e.name = p_name OR left(e.name, length(p_name) + 1) = p_name || '/';
    UPDATE pgeval.sweep s SET name = p_new || substr(s.name, length(p_name) + 1)
     WHERE s.name = p_name OR left(s.name, length(p_name) + 1) = p_name || '/';
$$;

-- Stores one group's evaluation as a sweep (see above) and returns its sweep_id. p_an_*: the ANN
-- lists over (point, query): list (p - 1) * nq + q; p_ex_*: exact search's per query (array
-- text, as pgeval.store_evaluation_run reads them).
CREATE OR REPLACE FUNCTION pgeval.store_evaluation(
    p_name text, p_target text, p_statement text, p_queries text, p_settings jsonb,
    p_points jsonb[], p_k integer, p_depth integer, p_target_recall double precision,
    p_qids text[], p_literals text[], p_params integer, p_pick integer[],
    p_by_distance boolean, p_exact_params jsonb, p_prior bigint,
    p_ex_lists text[], p_ex_dists text[], p_ex_ms double precision[],
    p_an_lists text[], p_an_dists text[], p_an_ms double precision[],
    p_index text[], p_plans jsonb[])
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    nq integer := cardinality(p_qids);
    ts bigint;
    exp_id bigint;
    sweep bigint;
    exact_run bigint;
    run bigint;
    p integer;
    labels text[] := '{}';
    varying jsonb[] := '{}';
    grid jsonb;
    kind text;
    dist_order CONSTANT text :=
        'distance ascending, ties by chunk id ascending (best distance per chunk)';
BEGIN
    ts := pgeval.evaluation_testset(p_queries, p_qids, p_literals, p_pick, p_params);
    grid := jsonb_build_object('build', '{}'::jsonb, 'params', coalesce(
        (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(p_settings) e
          WHERE jsonb_typeof(e.value) = 'array'), '{}'));
    FOR p IN 1 .. cardinality(p_points) LOOP  -- (a point's varying settings)
        varying := varying || coalesce((SELECT jsonb_object_agg(e.key, p_points[p] -> e.key)
                                          FROM jsonb_each(grid -> 'params') e), '{}');
        labels := labels || pgeval.point_label(varying[p]);
    END LOOP;
    kind := coalesce((SELECT i FROM unnest(p_index) i WHERE i IS NOT NULL LIMIT 1), 'ann');
    INSERT INTO pgeval.experiment (name, testset_id, target, config, config_hash, status,
                                   finished_at)
    VALUES (p_name, ts, p_target,
            jsonb_build_object('source', 'pgeval.evaluate_recall', 'statement', p_statement,
                               'queries', p_queries, 'settings', p_settings, 'k', p_k,
                               'stages', to_jsonb(ARRAY['exact'] || labels)),
            md5(p_statement || p_queries || p_settings::text || p_k), 'complete', now())
    RETURNING experiment_id INTO exp_id;
    IF p_prior IS NULL THEN
        exact_run := pgeval.store_evaluation_run(
            ts, exp_id, p_name || '.exact.1', 'exact', p_exact_params,
            CASE WHEN p_by_distance THEN dist_order ELSE 'the statement''s order' END, p_depth,
            p_qids, p_pick, p_ex_lists, p_ex_dists, p_ex_ms, true);
    ELSE  -- the exact answer of an earlier evaluation on the same data: its lists again
        exact_run := pgeval.store_evaluation_run(
            ts, exp_id, p_name || '.exact.1', 'exact', p_exact_params,
            CASE WHEN p_by_distance THEN dist_order ELSE 'the statement''s order' END, p_depth,
            p_qids, '{}', '{}', '{}', '{}', true);
        INSERT INTO pgeval.result_list (run_id, query_id, chunk_ids, scores, grades)
        SELECT exact_run, l.query_id, l.chunk_ids, l.scores, l.grades
          FROM pgeval.result_list l WHERE l.run_id = p_prior;
        INSERT INTO pgeval.query_timing (run_id, query_id, latency_ms, rows_returned)
        SELECT exact_run, t.query_id, t.latency_ms, t.rows_returned
          FROM pgeval.query_timing t WHERE t.run_id = p_prior;
    END IF;
    INSERT INTO pgeval.sweep (name, testset_id, experiment_id, target, stage, grid, settings, k,
                              depth, repeat, concurrency, target_recall, status, finished_at)
    VALUES (p_name, ts, exp_id, p_target, kind, grid,
            coalesce((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(p_settings) e
                       WHERE jsonb_typeof(e.value) <> 'array'), '{}'),
            p_k, p_depth, 1, 1, p_target_recall, 'complete', now())
    RETURNING sweep_id INTO sweep;
    FOR p IN 1 .. cardinality(p_points) LOOP
        run := pgeval.store_evaluation_run(
            ts, exp_id, p_name || '.' || labels[p] || '.1', coalesce(p_index[p], 'ann'),
            jsonb_strip_nulls(jsonb_build_object(
                'role', 'ann', 'kind', p_index[p], 'method', p_index[p],
                'score', CASE WHEN p_by_distance THEN 'distance' ELSE 'row' END,
                'settings', p_points[p], 'statement', p_statement,
                'index', (SELECT x.index_name FROM pgeval.plan_indexes(p_plans[p]) x
                           WHERE x.method = p_index[p] LIMIT 1),
                'plan', jsonb_build_object('mode', 'custom', 'served_by', coalesce(
                    (SELECT string_agg(DISTINCT x.index_name || ' (' || x.method || ')', ', ')
                       FROM pgeval.plan_indexes(p_plans[p]) x),
                    (SELECT string_agg(DISTINCT n #>> '{}', ', ')
                       FROM jsonb_path_query(p_plans[p], 'strict $.**."Node Type"') n))),
                'limits', jsonb_build_object('k', p_k))),
            CASE WHEN p_by_distance THEN dist_order ELSE 'the statement''s order' END, p_depth,
            p_qids, p_pick, p_an_lists[(p - 1) * nq + 1:p * nq],
            p_an_dists[(p - 1) * nq + 1:p * nq], p_an_ms[(p - 1) * nq + 1:p * nq], false);
        INSERT INTO pgeval.sweep_point (sweep_id, point, repetition, label, settings, build,
                                        config_hash, run_id)
        VALUES (sweep, p, 1, labels[p], varying[p],
                '{}', 'sql:' || md5(p_statement || p_points[p]::text || ts), run);
    END LOOP;
    -- the values, from the SQL API as the CLI fills them (evaluator/tuning/sweep/store.fill)
    UPDATE pgeval.sweep_point sp
       SET index_recall = ir.index_recall, metrics = '{}', queries = th.queries,
           rows_mean = th.rows_mean, rows_min = th.rows_min, qps = th.qps,
           p50_ms = (SELECT l.latency_ms FROM pgeval.run_latency(sp.run_id) l
                      WHERE l.percentile = 0.5),
           p95_ms = (SELECT l.latency_ms FROM pgeval.run_latency(sp.run_id) l
                      WHERE l.percentile = 0.95),
           p99_ms = (SELECT l.latency_ms FROM pgeval.run_latency(sp.run_id) l
                      WHERE l.percentile = 0.99)
      FROM pgeval.index_recall(exp_id, p_k, 1) ir, LATERAL pgeval.run_throughput(ir.run_id) th
     WHERE sp.sweep_id = sweep AND ir.run_id = sp.run_id;
    RETURN sweep;
END
$$;

CREATE OR REPLACE FUNCTION pgeval.evaluate_recall(statement text,
                                                  queries text,
                                                  settings jsonb DEFAULT '{}',
                                                  k integer DEFAULT NULL,
                                                  group_by text DEFAULT NULL,
                                                  name text DEFAULT NULL,
                                                  target text DEFAULT NULL,
                                                  replace boolean DEFAULT false,
                                                  target_recall double precision DEFAULT 0.95,
                                                  index_methods text[] DEFAULT NULL,
                                                  timeout_ms integer DEFAULT 600000,
                                                  max_points integer DEFAULT 32,
                                                  max_queries integer DEFAULT 10000)
RETURNS TABLE (sweep text, group_key text, point integer, label text, configurations jsonb,
               at_k integer, recall double precision, margin95 double precision,
               p50_ms double precision, p95_ms double precision, p99_ms double precision,
               rows_mean double precision, rows_min integer, n_queries integer,
               index_type text, plan jsonb, ground_truth text)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
#variable_conflict use_variable
DECLARE
    fn CONSTANT text := 'pgeval.evaluate_recall';
    st record;
    qst record;
    grid jsonb;
    points jsonb[];
    fixed jsonb;
    methods text[] := coalesce(index_methods, pgeval.ann_methods());
    deadline timestamptz;
    qs record;
    nq integer;
    np integer;
    base jsonb;
    sql text;
    plan_of jsonb;
    x record;
    q integer;
    p integer;
    by_distance boolean;
    data_version jsonb;
    exact_params jsonb;
    need integer[] := '{}';
    group_keys text[];
    priors bigint[] := '{}';
    idents jsonb[] := '{}';
    cols record;
    ex_lists text[];
    ex_dists text[];
    ex_ms double precision[];
    an_lists text[] := '{}';
    an_dists text[] := '{}';
    an_ms double precision[] := '{}';
    pt_index text[] := '{}';
    pt_plan jsonb[] := '{}';
    depth integer;
    kk integer;
    base_name text;
    sweeps bigint[] := '{}';
    gi integer;
    pick integer[];
    sw bigint;
    replaced text;
BEGIN
    deadline := pgeval.evaluation_deadline(fn, timeout_ms);
    IF k IS NOT NULL AND k < 1 THEN
        RAISE EXCEPTION '%: k must be at least 1, got %', fn, k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    st := pgeval.checked_statement(fn, statement);
    IF NOT 1 = ANY (st.params) THEN
        RAISE EXCEPTION '%: the statement has no $1 (the query vector): write it as the '
            'application does, e.g. ORDER BY embedding <=> $1 LIMIT 10', fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    qst := pgeval.checked_statement(fn, queries);
    IF qst.max_param > 0 THEN
        RAISE EXCEPTION '%: the queries statement has parameter $%: it must run as written', fn,
            qst.max_param USING ERRCODE = 'invalid_parameter_value';
    END IF;
    grid := pgeval.checked_settings(fn, settings);
    points := ARRAY(SELECT gp.settings FROM pgeval.settings_grid(fn, grid, max_points) gp
                     ORDER BY gp.point);
    fixed := coalesce((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(grid) e
                        WHERE jsonb_typeof(e.value) <> 'array'), '{}');
    base_name := coalesce(name, 'sql-' || to_char(clock_timestamp() AT TIME ZONE 'UTC',
                                                  'YYYYMMDD-HH24MISS-US'));
    IF pgeval.evaluation_name_taken(base_name) AND NOT replace THEN
        RAISE EXCEPTION '%: a sweep named ''%'' exists (choose another name, or replace '
            '=> true to measure it again)', fn, base_name USING ERRCODE = 'unique_violation';
    END IF;

    -- ---- measured READ ONLY, rolled back (settings as they were) --------------------------
    BEGIN
        PERFORM set_config('transaction_read_only', 'on', true);
        base := pgeval.settings_now(ARRAY(SELECT jsonb_object_keys(grid)));
        qs := pgeval.evaluation_queries(fn, queries, st.max_param, group_by, max_queries);
        nq := cardinality(qs.ids);
        np := st.max_param;
        group_keys := ARRAY(SELECT DISTINCT u.g FROM unnest(qs.groups) u(g) ORDER BY 1);
        -- the exact twin: its plan checked, its data's version, the earlier answer to reuse
        PERFORM pgeval.apply_settings(base, fixed, true);
        sql := format(st.template, VARIADIC qs.literals[1:np]);
        plan_of := pgeval.statement_plan(fn, sql);
        PERFORM pgeval.check_exact_plan(fn, plan_of, methods);
        data_version := pgeval.plan_data_version(plan_of);
        FOR gi IN 1 .. cardinality(group_keys) LOOP
            pick := ARRAY(SELECT i FROM generate_subscripts(qs.ids, 1) i
                           WHERE qs.groups[i] IS NOT DISTINCT FROM group_keys[gi] ORDER BY i);
            idents := idents || jsonb_build_object(
                'statement', md5(st.template), 'settings', fixed, 'data', data_version,
                'queries', md5(array_to_string(ARRAY(
                    SELECT qs.ids[i] || '=' || array_to_string(
                               qs.literals[(i - 1) * np + 1:i * np], ',', 'NULL')
                      FROM unnest(pick) i), E'\n')));
            priors := priors || (SELECT r.run_id FROM pgeval.run r
                                  WHERE r.stage = 'exact' AND r.status = 'complete'
                                    AND r.params -> 'ground_truth' -> 'identity'
                                        = idents[gi]
                                    AND (SELECT count(*) FROM pgeval.query_timing t
                                          WHERE t.run_id = r.run_id) = cardinality(pick)
                                  ORDER BY r.run_id DESC LIMIT 1);
            IF priors[gi] IS NULL THEN
                need := need || pick;
            END IF;
        END LOOP;
        cols := pgeval.statement_columns(sql);
        by_distance := cols.distance_column IS NOT NULL;
        ex_lists := array_fill(NULL::text, ARRAY[nq]);
        ex_dists := array_fill(NULL::text, ARRAY[nq]);
        ex_ms := array_fill(NULL::float8, ARRAY[nq]);
        depth := 0;
        FOREACH q IN ARRAY need LOOP
            PERFORM pgeval.check_deadline(fn, deadline, timeout_ms);
            x := pgeval.statement_rows(format(st.template,
                                              VARIADIC qs.literals[(q - 1) * np + 1:q * np]),
                                       cols.id_column, cols.distance_column);
            ex_lists[q] := x.ids::text;
            ex_dists[q] := x.dists::text;
            ex_ms[q] := x.ms;
            depth := greatest(depth, coalesce(cardinality(x.ids), 0));
        END LOOP;
        -- every point over every query
        FOR p IN 1 .. cardinality(points) LOOP
            PERFORM pgeval.apply_settings(base, points[p], false);
            plan_of := pgeval.statement_plan(fn, format(st.template, VARIADIC qs.literals[1:np]));
            pt_plan := pt_plan || plan_of;
            pt_index := pt_index || (SELECT i.method FROM pgeval.plan_indexes(plan_of) i
                                      WHERE i.method = ANY (methods) LIMIT 1);
            FOR q IN 1 .. nq LOOP
                PERFORM pgeval.check_deadline(fn, deadline, timeout_ms);
                x := pgeval.statement_rows(format(st.template,
                                                  VARIADIC qs.literals[(q - 1) * np + 1:q * np]),
                                           cols.id_column, cols.distance_column);
                an_lists := an_lists || x.ids::text;
                an_dists := an_dists || x.dists::text;
                an_ms := an_ms || x.ms;
            END LOOP;
        END LOOP;
        RAISE EXCEPTION USING ERRCODE = 'PE001', MESSAGE = 'pgeval: evaluation done';
    EXCEPTION
        WHEN SQLSTATE 'PE001' THEN
            NULL;  -- rolled back: settings and read-only mode as the caller had them
        WHEN read_only_sql_transaction THEN
            RAISE EXCEPTION '%', pgeval.write_refused(fn, SQLERRM)
                USING ERRCODE = 'read_only_sql_transaction';
    END;

    IF replace THEN  -- (kept until the new one is stored: its exact answer may be reused)
        replaced := base_name || '@replaced-' || txid_current();
        PERFORM pgeval.rename_evaluation(base_name, replaced);
    END IF;
    -- ---- stored: one sweep per group ----------------------------------------------------------
    depth := greatest(1, depth, coalesce((SELECT max(cardinality(r.chunk_ids))
                                            FROM pgeval.result_list r
                                           WHERE r.run_id = ANY (priors)), 0));
    kk := coalesce(k, depth);
    FOR gi IN 1 .. cardinality(group_keys) LOOP
        pick := ARRAY(SELECT i FROM generate_subscripts(qs.ids, 1) i
                       WHERE qs.groups[i] IS NOT DISTINCT FROM group_keys[gi] ORDER BY i);
        exact_params := jsonb_build_object(
            'kind', 'exact', 'role', 'exact',
            'score', CASE WHEN by_distance THEN 'distance' ELSE 'rank' END,
            'settings', fixed || '{"enable_indexscan": "off", "enable_indexonlyscan": "off",
                                   "enable_seqscan": "on"}'::jsonb,
            'statement', statement,
            'ground_truth', jsonb_build_object(
                'status', CASE WHEN priors[gi] IS NULL THEN 'computed' ELSE 'reused' END,
                'reused_from', priors[gi], 'method', 'sql', 'identity', idents[gi]));
        sw := pgeval.store_evaluation(
            CASE WHEN group_by IS NULL THEN base_name
                 ELSE base_name || '/' || group_by || '=' || coalesce(group_keys[gi], 'NULL') END,
            coalesce(target, 'sql'), statement, queries, grid, points, kk, depth, target_recall,
            qs.ids, qs.literals, np, pick, by_distance, exact_params, priors[gi],
            ex_lists, ex_dists, ex_ms, an_lists, an_dists, an_ms, pt_index, pt_plan);
        sweeps := sweeps || sw;
    END LOOP;
    IF replaced IS NOT NULL THEN
        PERFORM pgeval.drop_evaluation(replaced);
    END IF;
    FOR gi IN 1 .. cardinality(sweeps) LOOP
        RETURN QUERY
        SELECT w.name, group_keys[gi], s.point, s.label, points[s.point], kk, s.index_recall,
               m.margin95, s.p50_ms, s.p95_ms, s.p99_ms, s.rows_mean, s.rows_min,
               (SELECT sp.queries FROM pgeval.sweep_point sp
                 WHERE sp.sweep_id = w.sweep_id AND sp.point = s.point LIMIT 1),
               pt_index[s.point], pt_plan[s.point],
               CASE WHEN priors[gi] IS NULL THEN 'computed' ELSE 'reused' END
          FROM pgeval.sweep w
         CROSS JOIN LATERAL pgeval.sweep_summary(w.sweep_id) s
         CROSS JOIN LATERAL pgeval.sweep_point_recall_margin(w.sweep_id, s.point, kk) m
         WHERE w.sweep_id = sweeps[gi]
         ORDER BY s.point;
    END LOOP;
END
$$;

COMMENT ON FUNCTION pgeval.evaluate_recall(text, text, jsonb, integer, text, text, text, boolean,
                                           double precision, text[], integer, integer, integer) IS
    'Recall@k of the application''s statement ($1 the vector, $2... from the queries) over a '
    'set of queries and a settings grid against its exact twin, stored as a sweep (one per '
    'group with group_by): one row per group and point (docs/sql.md)';
