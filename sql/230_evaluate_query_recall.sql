-- The application's own statement, evaluated by one SQL call (docs/sql.md):
--
--   SELECT * FROM pgeval.evaluate_query_recall(
--       $$SELECT id FROM docs ORDER BY embedding <=> '[0.1, 0.2, ...]' LIMIT 10$$,
--       '{"hnsw.ef_search": 40}');
--
-- Google AlloyDB's function of the same name and shape (query, settings; recall,
-- ann_execution_time, ground_truth_execution_time, index_type), on any PostgreSQL with pgvector.
-- The statement is checked first (one SELECT: no second statement, no write; its vector a literal),
-- then, in a READ ONLY subtransaction that is rolled back before the function returns (every
-- setting, the caller's included, is as it was; nothing is left on a pooled connection):
--
--   ANN     the statement as written, with the settings applied (SET LOCAL), timed with
--           clock_timestamp() around its execution; its EXPLAIN is the plan returned
--   exact   its exact twin: the same statement with the approximate index scans disabled
--           (enable_indexscan and enable_indexonlyscan off, enable_seqscan on: a btree on a
--           filter still serves it through a bitmap scan, which no ANN access method offers); its
--           plan is checked to scan no index of the approximate access methods
--   recall  pgeval.index_recall's rule (METRICS.md "Index recall", sql/100_index_recall.sql:
--           pgeval.kth_distance and pgeval.list_hits): K = the rows exact search returned (the
--           statement's LIMIT), a returned row counts when its distance is within the K-th exact
--           distance (ties count). The distance is the statement's column named "distance";
--           without one, a returned row counts when it is one of exact search's rows (the
--           statement's column "id", else its first column, names a row), and ties beyond the
--           K-th row cannot be seen.
--
-- pgeval.evaluate_recall (sql/240_evaluate_recall.sql) measures a set of queries over a grid and
-- stores it as a sweep; the pieces below are shared by both.

-- The access methods whose scans are approximate: those pgeval measures (pgeval.probe_kinds).
CREATE OR REPLACE FUNCTION pgeval.ann_methods()
RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT array_agg(DISTINCT k.index_method ORDER BY k.index_method) FROM pgeval.probe_kinds() k
$$;

-- A statement read as PostgreSQL's lexer reads it, outside string literals, quoted identifiers,
-- comments and dollar quotes: code (the statement with those blanked, for the checks), template
-- (the statement as a format() string: each parameter $n as %n$s, every % doubled) and params (the
-- parameter numbers, in order of appearance).
CREATE OR REPLACE FUNCTION pgeval.statement_parts(p_statement text,
                                                  OUT code text, OUT template text,
                                                  OUT params integer[])
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n integer := length(p_statement);
    i integer := 1;
    j integer;
    depth integer;
    c text;
    prev text := ' ';
    tag text;
    piece text;
BEGIN
    code := '';
    template := '';
    params := '{}';
    WHILE i <= n LOOP
        c := substr(p_statement, i, 1);
        j := i + 1;  -- the first character after the token
        IF c = '''' THEN  -- a string literal ('' inside; backslashes in E'...')
            WHILE j <= n LOOP
                IF substr(p_statement, j, 1) = '\' AND lower(prev) = 'e' THEN
                    j := j + 2;
                ELSIF substr(p_statement, j, 1) = '''' THEN
                    IF substr(p_statement, j + 1, 1) = '''' THEN j := j + 2; ELSE EXIT; END IF;
                ELSE
                    j := j + 1;
                END IF;
            END LOOP;
            j := j + 1;
            code := code || ''' ''';
        ELSIF c = '"' THEN  -- a quoted identifier ("" inside)
            LOOP
                j := j + strpos(substr(p_statement, j), '"');
                EXIT WHEN j = i + 1 OR substr(p_statement, j, 1) <> '"' OR j > n;
                j := j + 1;
            END LOOP;
            IF j = i + 1 THEN j := n + 1; END IF;  -- unterminated
            code := code || '"x"';
        ELSIF c = '-' AND substr(p_statement, j, 1) = '-' THEN  -- a comment to the line's end
            j := strpos(substr(p_statement, i), E'\n');
            j := CASE WHEN j = 0 THEN n + 1 ELSE i + j END;
            code := code || ' ';
        ELSIF c = '/' AND substr(p_statement, j, 1) = '*' THEN  -- a comment, nested
            depth := 1;
            j := j + 1;
            WHILE j <= n AND depth > 0 LOOP
                IF substr(p_statement, j, 2) = '/*' THEN depth := depth + 1; j := j + 2;
                ELSIF substr(p_statement, j, 2) = '*/' THEN depth := depth - 1; j := j + 2;
                ELSE j := j + 1; END IF;
            END LOOP;
            code := code || ' ';
        ELSIF c = '$' AND prev !~ '[[:alnum:]_$]' AND substr(p_statement, j, 1) ~ '[0-9]' THEN
            piece := substring(substr(p_statement, j) FROM '^[0-9]+');  -- a parameter $n
            j := j + length(piece);
            params := params || piece::integer;
            code := code || '$' || piece;
            template := template || '%' || piece::integer || '$s';
            prev := '0';
            i := j;
            CONTINUE;
        ELSIF c = '$' AND prev !~ '[[:alnum:]_$]'
              AND substr(p_statement, i) ~ '^\$([[:alpha:]_][[:alnum:]_]*)?\$' THEN
            tag := substring(substr(p_statement, i) FROM '^(\$([[:alpha:]_][[:alnum:]_]*)?\$)');
            j := strpos(substr(p_statement, i + length(tag)), tag);
            j := CASE WHEN j = 0 THEN n + 1 ELSE i + length(tag) + j - 1 + length(tag) END;
            code := code || ''' ''';
        ELSE
            code := code || c;
        END IF;
        template := template || replace(substr(p_statement, i, j - i), '%', '%%');
        prev := substr(p_statement, j - 1, 1);
        i := j;
    END LOOP;
END
$$;

-- The statement as pgeval runs it: checked to be one query (a SELECT, WITH ... SELECT, VALUES or
-- TABLE: a write, another command or a second statement is refused with one line naming p_fn),
-- the trailing semicolon dropped; template and params as pgeval.statement_parts gives them.
CREATE OR REPLACE FUNCTION pgeval.checked_statement(p_fn text, p_statement text,
                                                    OUT template text, OUT params integer[],
                                                    OUT max_param integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    sp record;
    body text;
    first_word text;
BEGIN
    IF p_statement IS NULL OR btrim(p_statement) = '' THEN
        RAISE EXCEPTION '%: the statement is empty: give the application''s SELECT', p_fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    sp := pgeval.statement_parts(p_statement);
    body := regexp_replace(sp.code, '[[:space:];]+$', '');
    IF strpos(body, ';') > 0 THEN
        RAISE EXCEPTION '%: the statement holds two statements (a ";" before its end): give '
            'one SELECT', p_fn USING ERRCODE = 'syntax_error';
    END IF;
    first_word := lower(substring(body FROM '^[[:space:](]*([[:alpha:]]+)'));
    IF first_word IS NULL OR first_word NOT IN ('select', 'with', 'values', 'table') THEN
        RAISE EXCEPTION '%: the statement is % , not a SELECT: only a query is evaluated',
            p_fn, coalesce(upper(first_word), 'no command')
            USING ERRCODE = CASE WHEN first_word IN ('insert', 'update', 'delete', 'merge',
                                                     'copy', 'truncate')
                                 THEN 'read_only_sql_transaction'
                                 ELSE 'invalid_parameter_value' END;
    END IF;
    -- the template without the trailing semicolon: cut where the code was cut
    template := sp.template;
    WHILE template ~ '[[:space:];]$' AND length(template) > 0 LOOP
        template := left(template, -1);
    END LOOP;
    params := sp.params;
    max_param := coalesce((SELECT max(p) FROM unnest(sp.params) p), 0);
END
$$;

-- Settings as text values ({"hnsw.ef_search": 40} -> {"hnsw.ef_search": "40"}), each checked to
-- be a setting the server knows (an extension's settings once its library is loaded: pgvector's
-- here, pgvectorscale's when a diskann.* setting is named) and not one that would change the
-- transaction or the role; one-line errors naming p_fn. Values that are arrays (a grid) are kept
-- as arrays of text.
CREATE OR REPLACE FUNCTION pgeval.checked_settings(p_fn text, p_settings jsonb)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    e record;
    s record;
    out_settings jsonb := '{}';
    guarded CONSTANT text[] := ARRAY['transaction_read_only', 'default_transaction_read_only',
        'transaction_isolation', 'default_transaction_isolation', 'transaction_deferrable',
        'default_transaction_deferrable', 'role', 'session_authorization',
        'statement_timeout', 'search_path'];
BEGIN
    IF p_settings IS NULL THEN
        RETURN '{}';
    END IF;
    IF jsonb_typeof(p_settings) <> 'object' THEN
        RAISE EXCEPTION '%: settings must be a JSON object such as {"hnsw.ef_search": 40}, got %',
            p_fn, p_settings USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM '[1]'::vector;  -- pgvector's library defines hnsw.* and ivfflat.*
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(p_settings) k WHERE k LIKE 'diskann.%') THEN
        FOR s IN SELECT n.nspname FROM pg_extension x JOIN pg_depend d ON d.refobjid = x.oid
                   JOIN pg_proc p ON p.oid = d.objid JOIN pg_namespace n ON n.oid = p.pronamespace
                  WHERE x.extname = 'vectorscale' AND p.proname = 'distance_type_cosine' LOOP
            EXECUTE format('SELECT %I.distance_type_cosine()', s.nspname);
        END LOOP;
    END IF;
    FOR e IN SELECT key, value FROM jsonb_each(p_settings) LOOP
        IF lower(e.key) = ANY (guarded) THEN
            RAISE EXCEPTION '%: setting "%" may not be changed by an evaluation (it would change '
                'the transaction, the role or the time bound)', p_fn, e.key
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_settings g WHERE g.name = lower(e.key)) THEN
            RAISE EXCEPTION '%: unknown setting "%" (not in pg_settings; is its extension '
                'installed?)', p_fn, e.key USING ERRCODE = 'undefined_object';
        END IF;
        IF jsonb_typeof(e.value) = 'array' THEN
            IF jsonb_array_length(e.value) = 0
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(e.value) v
                           WHERE jsonb_typeof(v) IN ('object', 'array', 'null')) THEN
                RAISE EXCEPTION '%: setting "%" needs values (numbers, strings or booleans), '
                    'got %', p_fn, e.key, e.value USING ERRCODE = 'invalid_parameter_value';
            END IF;
            out_settings := out_settings || jsonb_build_object(lower(e.key),
                (SELECT jsonb_agg(v #>> '{}' ORDER BY o)
                   FROM jsonb_array_elements(e.value) WITH ORDINALITY a(v, o)));
        ELSIF jsonb_typeof(e.value) IN ('object', 'null') THEN
            RAISE EXCEPTION '%: setting "%" needs a value (a number, string or boolean), got %',
                p_fn, e.key, e.value USING ERRCODE = 'invalid_parameter_value';
        ELSE
            out_settings := out_settings || jsonb_build_object(lower(e.key), e.value #>> '{}');
        END IF;
    END LOOP;
    RETURN out_settings;
END
$$;

-- The points of a settings grid in order: every combination of the values of the settings given
-- as arrays (the first setting varying slowest), each with the settings given as one value.
-- p_max_points bounds it (a one-line error naming p_fn above it).
CREATE OR REPLACE FUNCTION pgeval.settings_grid(p_fn text, p_settings jsonb,
                                                p_max_points integer)
RETURNS TABLE (point integer, settings jsonb)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    fixed jsonb;
    points bigint;
BEGIN
    fixed := coalesce((SELECT jsonb_object_agg(key, value) FROM jsonb_each(p_settings)
                        WHERE jsonb_typeof(value) <> 'array'), '{}');
    points := coalesce((SELECT exp(sum(ln(jsonb_array_length(value))))::numeric
                          FROM jsonb_each(p_settings) WHERE jsonb_typeof(value) = 'array'), 1);
    points := round(points);
    IF points > p_max_points THEN
        RAISE EXCEPTION '%: the grid has % points, more than max_points => % (narrow it, or '
            'raise max_points)', p_fn, points, p_max_points
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    RETURN QUERY
    WITH RECURSIVE axes AS (
        SELECT row_number() OVER (ORDER BY key) AS ax, key, value
          FROM jsonb_each(p_settings) WHERE jsonb_typeof(value) = 'array'),
    combos AS (
        SELECT 0::bigint AS ax, '{}'::jsonb AS s, ARRAY[]::integer[] AS ord
        UNION ALL
        SELECT a.ax, c.s || jsonb_build_object(a.key, v.value), c.ord || v.o::integer
          FROM combos c JOIN axes a ON a.ax = c.ax + 1
         CROSS JOIN LATERAL jsonb_array_elements(a.value) WITH ORDINALITY v(value, o))
    SELECT row_number() OVER (ORDER BY c.ord)::integer, fixed || c.s
      FROM combos c
     WHERE c.ax = (SELECT count(*) FROM axes);
END
$$;

-- The indexes a plan scans (EXPLAIN FORMAT JSON) and their access methods, in plan order.
CREATE OR REPLACE FUNCTION pgeval.plan_indexes(p_plan jsonb)
RETURNS TABLE (index_name text, method text)
LANGUAGE sql STABLE AS $$
    SELECT j.name #>> '{}', (SELECT am.amname::text FROM pg_class c JOIN pg_am am
                                ON am.oid = c.relam
                              WHERE c.relname = j.name #>> '{}' AND c.relkind = 'i'
                              ORDER BY pg_table_is_visible(c.oid) DESC LIMIT 1)
      FROM jsonb_path_query(p_plan, 'strict $.**."Index Name"') WITH ORDINALITY j(name, o)
     ORDER BY j.o
$$;

-- The columns of a checked statement that name its rows and give their distances: "id", else
-- its first column; "distance", else none (NULL). Read from its result's shape (LIMIT 0: planned,
-- not run).
CREATE OR REPLACE FUNCTION pgeval.statement_columns(p_sql text, OUT id_column text,
                                                    OUT distance_column text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    shape record;
    cols text[];
BEGIN
    EXECUTE format('SELECT * FROM (%s) s LIMIT 0', p_sql) INTO shape;
    cols := ARRAY(SELECT e.key FROM json_each(to_json(shape)) WITH ORDINALITY e(key, value, o)
                   ORDER BY e.o);
    id_column := CASE WHEN 'id' = ANY (cols) THEN 'id' ELSE cols[1] END;
    distance_column := CASE WHEN 'distance' = ANY (cols) THEN 'distance' END;
END
$$;

-- One execution of a checked statement (its parameters substituted): the rows' ids (p_id: the
-- column pgeval.statement_columns names, as text), their distances (p_distance; NULL without
-- one) and the milliseconds it took. Rows with a distance are ranked by (distance, id), as
-- pgeval ranks an ANN stage's rows (evaluator/stages/base.py); without one, in the statement's
-- order.
CREATE OR REPLACE FUNCTION pgeval.statement_rows(p_sql text, p_id text, p_distance text,
                                                 OUT ids text[], OUT dists double precision[],
                                                 OUT ms double precision)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t1 timestamptz;
    wrapped text;
BEGIN
    wrapped := CASE WHEN p_distance IS NULL
                    THEN format('SELECT array_agg(s.%I::text), NULL::float8[] FROM (%s) s',
                                p_id, p_sql)
                    ELSE format('SELECT array_agg(s.%1$I::text ORDER BY s.%2$I, s.%1$I::text '
                                'COLLATE "C"), array_agg(s.%2$I::float8 ORDER BY s.%2$I, '
                                's.%1$I::text COLLATE "C") FROM (%3$s) s', p_id, p_distance, p_sql)
               END;
    t1 := clock_timestamp();
    EXECUTE wrapped INTO ids, dists;
    ms := extract(epoch FROM clock_timestamp() - t1) * 1000.0;
END
$$;

-- EXPLAIN (FORMAT JSON) of a checked statement, the error of a statement that does not plan
-- given as one line naming p_fn (a write inside WITH, a syntax error, a missing table).
CREATE OR REPLACE FUNCTION pgeval.statement_plan(p_fn text, p_sql text)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    plan jsonb;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) SELECT * FROM (' || p_sql || ') pgeval_statement' INTO plan;
    IF EXISTS (SELECT 1 FROM jsonb_path_query(plan, 'strict $.**."Node Type"') j
                WHERE j #>> '{}' = 'ModifyTable') THEN
        RAISE EXCEPTION '%: the statement writes: only a SELECT is evaluated', p_fn
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    RETURN plan;
EXCEPTION
    WHEN feature_not_supported OR read_only_sql_transaction THEN
        RAISE EXCEPTION '%: the statement writes (%): only a SELECT is evaluated', p_fn,
            regexp_replace(SQLERRM, '^[^:]*: ', '') USING ERRCODE = 'read_only_sql_transaction';
    WHEN syntax_error OR undefined_table OR undefined_column OR undefined_function
         OR datatype_mismatch OR invalid_text_representation OR ambiguous_column THEN
        RAISE EXCEPTION '%: the statement does not run: %', p_fn, SQLERRM
            USING ERRCODE = SQLSTATE;
END
$$;

-- The time bound of an evaluation: p_timeout_ms, or the caller's statement_timeout when that is
-- shorter; checked before each execution (a statement already running is cancelled only by the
-- caller's statement_timeout: PostgreSQL arms it when the caller's statement starts).
CREATE OR REPLACE FUNCTION pgeval.evaluation_deadline(p_fn text, p_timeout_ms integer)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    caller integer;
BEGIN
    IF p_timeout_ms IS NULL OR p_timeout_ms < 1 THEN
        RAISE EXCEPTION '%: timeout_ms must be at least 1, got %', p_fn, p_timeout_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT CASE WHEN g.unit = 's' THEN g.setting::integer * 1000 ELSE g.setting::integer END
      INTO caller FROM pg_settings g WHERE g.name = 'statement_timeout';
    RETURN statement_timestamp()
           + make_interval(secs => least(p_timeout_ms, nullif(caller, 0)) / 1000.0);
END
$$;

CREATE OR REPLACE FUNCTION pgeval.check_deadline(p_fn text, p_deadline timestamptz,
                                                 p_timeout_ms integer)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF clock_timestamp() > p_deadline THEN
        RAISE EXCEPTION '%: stopped at its time bound of % ms (timeout_ms, or the caller''s '
            'statement_timeout when shorter)', p_fn,
            round(extract(epoch FROM p_deadline - statement_timestamp()) * 1000)
            USING ERRCODE = 'query_canceled';
    END IF;
END
$$;

-- The one line of a statement refused for writing (its own message already says so when it
-- comes from pgeval).
CREATE OR REPLACE FUNCTION pgeval.write_refused(p_fn text, p_message text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_message LIKE p_fn || ':%' THEN p_message
                ELSE p_fn || ': the statement writes (' || p_message
                     || '): only a SELECT is evaluated, in a READ ONLY transaction' END
$$;

-- The caller's values of the settings an evaluation changes (p_keys, and the three the exact
-- twin sets), put back by pgeval.apply_settings before each point's.
CREATE OR REPLACE FUNCTION pgeval.settings_now(p_keys text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(k, current_setting(k))
      FROM unnest(p_keys || ARRAY['enable_indexscan', 'enable_indexonlyscan', 'enable_seqscan']) k
$$;

-- A point's settings (SET LOCAL) on top of the caller's (p_base: pgeval.settings_now); p_exact: the
-- exact twin's on top of those, approximate index scans off (see above).
CREATE OR REPLACE FUNCTION pgeval.apply_settings(p_base jsonb, p_settings jsonb, p_exact boolean)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    s record;
BEGIN
    FOR s IN SELECT key, value #>> '{}' AS value FROM jsonb_each(p_base || p_settings) LOOP
        PERFORM set_config(s.key, s.value, true);
    END LOOP;
    IF p_exact THEN
        PERFORM set_config('enable_indexscan', 'off', true),
                set_config('enable_indexonlyscan', 'off', true),
                set_config('enable_seqscan', 'on', true);
    END IF;
END
$$;

-- Refuses an exact twin whose plan scans an index of an approximate access method.
CREATE OR REPLACE FUNCTION pgeval.check_exact_plan(p_fn text, p_plan jsonb, p_methods text[])
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
    ix record;
BEGIN
    SELECT * INTO ix FROM pgeval.plan_indexes(p_plan) WHERE method = ANY (p_methods) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: the exact twin of the statement would still scan index % (%) with '
            'index scans disabled: no exact answer to compare with', p_fn, ix.index_name,
            ix.method USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION pgeval.evaluate_query_recall(query text,
                                                        settings jsonb DEFAULT '{}',
                                                        index_methods text[] DEFAULT NULL,
                                                        timeout_ms integer DEFAULT 60000,
                                                        max_points integer DEFAULT 32)
RETURNS TABLE (id integer, configurations jsonb, recall double precision,
               ann_execution_time double precision,
               ground_truth_execution_time double precision, index_type text,
               rows_returned integer, k integer, plan jsonb, exact_plan jsonb)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
#variable_conflict use_column
DECLARE
    fn CONSTANT text := 'pgeval.evaluate_query_recall';
    st record;
    grid jsonb;
    methods text[] := coalesce(index_methods, pgeval.ann_methods());
    deadline timestamptz;
    sql text;
    ex record;
    an record;
    g record;
    kd record;
    lh record;
    by_distance boolean;
    out_rows jsonb[] := '{}';
    r jsonb;
    plan_of jsonb;
    base jsonb;
    cols record;
BEGIN
    deadline := pgeval.evaluation_deadline(fn, timeout_ms);
    st := pgeval.checked_statement(fn, query);
    IF st.max_param > 0 THEN
        RAISE EXCEPTION '%: the statement has parameter $% : give its vector as a literal '
            '(''[0.1, 0.2, ...]''), or evaluate a set of queries with pgeval.evaluate_recall',
            fn, st.max_param USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF query !~ '''\s*\[\s*[-+0-9.eE]+(\s*,\s*[-+0-9.eE]+)*\s*\]\s*''' THEN
        RAISE EXCEPTION '%: the statement has no vector literal (''[0.1, 0.2, ...]''): '
            'nothing to search for', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    sql := replace(st.template, '%%', '%');
    grid := pgeval.checked_settings(fn, settings);
    -- everything measured in a READ ONLY subtransaction rolled back at its end (the sentinel
    -- below): the settings, the caller's own included, are as they were, and nothing is written
    BEGIN
        PERFORM set_config('transaction_read_only', 'on', true);
        base := pgeval.settings_now(ARRAY(SELECT jsonb_object_keys(grid)));
        FOR g IN SELECT * FROM pgeval.settings_grid(fn, grid, max_points) LOOP
            PERFORM pgeval.check_deadline(fn, deadline, timeout_ms);
            PERFORM pgeval.apply_settings(base, g.settings, false);
            plan_of := pgeval.statement_plan(fn, sql);  -- (first: it refuses a write by name)
            cols := pgeval.statement_columns(sql);
            SELECT plan_of AS plan, x.ids, x.dists, x.ms INTO an
              FROM pgeval.statement_rows(sql, cols.id_column, cols.distance_column) x;
            PERFORM pgeval.check_deadline(fn, deadline, timeout_ms);
            PERFORM pgeval.apply_settings(base, g.settings, true);
            plan_of := pgeval.statement_plan(fn, sql);
            PERFORM pgeval.check_exact_plan(fn, plan_of, methods);
            SELECT plan_of AS plan, x.ids, x.dists, x.ms INTO ex
              FROM pgeval.statement_rows(sql, cols.id_column, cols.distance_column) x;
            by_distance := cols.distance_column IS NOT NULL;
            IF NOT by_distance THEN  -- exact search's rank stands in for its distance
                ex.dists := ARRAY(SELECT generate_series(1, coalesce(cardinality(ex.ids), 0))
                                         ::float8);
            END IF;
            SELECT * INTO kd FROM pgeval.kth_distance(ex.dists, coalesce(cardinality(ex.ids), 0));
            SELECT * INTO lh FROM pgeval.list_hits(an.ids, an.dists, ex.ids, ex.dists, kd.d_k,
                                                   kd.n::integer, by_distance);
            out_rows := out_rows || jsonb_build_object(
                'id', g.point, 'configurations', g.settings,
                'recall', CASE WHEN kd.n > 0 THEN lh.hits::float8 / kd.n END,
                'ann', an.ms, 'exact', ex.ms,
                'index_type', (SELECT p.method FROM pgeval.plan_indexes(an.plan) p
                                WHERE p.method = ANY (methods) LIMIT 1),
                'rows', coalesce(cardinality(an.ids), 0), 'k', kd.n,
                'plan', an.plan, 'exact_plan', ex.plan);
        END LOOP;
        RAISE EXCEPTION USING ERRCODE = 'PE001', MESSAGE = 'pgeval: evaluation done';
    EXCEPTION
        WHEN SQLSTATE 'PE001' THEN
            NULL;  -- rolled back: settings and read-only mode as the caller had them
        WHEN read_only_sql_transaction THEN
            RAISE EXCEPTION '%', pgeval.write_refused(fn, SQLERRM)
                USING ERRCODE = 'read_only_sql_transaction';
    END;
    FOREACH r IN ARRAY out_rows LOOP
        id := (r ->> 'id')::integer;
        configurations := r -> 'configurations';
        recall := (r ->> 'recall')::float8;
        ann_execution_time := (r ->> 'ann')::float8;
        ground_truth_execution_time := (r ->> 'exact')::float8;
        index_type := r ->> 'index_type';
        rows_returned := (r ->> 'rows')::integer;
        k := (r ->> 'k')::integer;
        plan := r -> 'plan';
        exact_plan := r -> 'exact_plan';
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION pgeval.evaluate_query_recall(text, jsonb, text[], integer, integer) IS
    'Recall of the application''s statement (its vector a literal) against its exact twin (the '
    'same statement with approximate index scans disabled), with both execution times, the '
    'index type and the plan: one row per point of the settings (docs/sql.md)';
