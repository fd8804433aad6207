-- Trigger functions of schema pgeval. The triggers themselves belong to the tables (migrations);
-- their functions live here so that `pgeval init` brings an upgraded database the current body
-- (CREATE OR REPLACE keeps the triggers attached). A trigger function's signature never changes.

-- Results are stored one row per ranked list in pgeval.result_list (migration 0005_storage).

-- Fills pgeval.result_list.grades (the judged grade at each position, NULL: not judged) from the
-- run's test set when a list is written without them (trigger WHEN (NEW.grades IS NULL)). The
-- stage writer and run import join the judgements themselves and write the grades.
CREATE OR REPLACE FUNCTION pgeval.result_fill_grades() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.grades := pgeval.list_grades(
        (SELECT ru.testset_id FROM pgeval.run ru WHERE ru.run_id = NEW.run_id), NEW.query_id,
        NEW.chunk_ids);
    RETURN NEW;
END
$$;

-- Keeps pgeval.run.n_queries / n_rows (lists and results of the run) as lists are written,
-- changed or deleted: `run list` and `run delete` never count results.
CREATE OR REPLACE FUNCTION pgeval.result_list_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE pgeval.run ru SET n_queries = ru.n_queries + d.n, n_rows = ru.n_rows + d.r
          FROM (SELECT run_id, count(*) AS n, sum(cardinality(chunk_ids)) AS r
                  FROM new_lists GROUP BY run_id) d
         WHERE ru.run_id = d.run_id;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE pgeval.run ru SET n_queries = ru.n_queries - d.n, n_rows = ru.n_rows - d.r
          FROM (SELECT run_id, count(*) AS n, sum(cardinality(chunk_ids)) AS r
                  FROM old_lists GROUP BY run_id) d
         WHERE ru.run_id = d.run_id;
    END IF;
    RETURN NULL;
END
$$;

-- pgeval.result_list, query_timing and run_progress have no foreign key to pgeval.run (a
-- per-row check costs import and runner speed; migration 0007_run_rows): a run's rows go with it
-- through this statement-level trigger. Their writers lock the run row (evaluator/stages/store.py).
CREATE OR REPLACE FUNCTION pgeval.run_delete_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgeval.result_list r USING old_runs o WHERE r.run_id = o.run_id;
    DELETE FROM pgeval.query_timing t USING old_runs o WHERE t.run_id = o.run_id;
    DELETE FROM pgeval.run_progress p USING old_runs o WHERE p.run_id = o.run_id;
    RETURN NULL;
END
$$;

-- TRUNCATE pgeval.run (directly or by CASCADE) empties the tables of run rows, which have no
-- foreign key to it (trigger run_truncate_results, migration 0007_run_rows).
CREATE OR REPLACE FUNCTION pgeval.run_truncate_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- DELETE, not TRUNCATE: a table truncated by the same statement is in use here
    DELETE FROM pgeval.result_list;
    DELETE FROM pgeval.query_timing;
    DELETE FROM pgeval.run_progress;
    RETURN NULL;
END
$$;

-- INSTEAD OF INSERT on the view pgeval.result: a row appends to its ranked list (rank = the next
-- position; a chunk already listed or a taken rank: unique_violation; rank < 1: check_violation).
CREATE OR REPLACE FUNCTION pgeval.result_append_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cur pgeval.result_list;
BEGIN
    IF NEW.rank IS NULL OR NEW.rank < 1 THEN
        RAISE check_violation USING MESSAGE = format('rank %s of query %s: ranks start at 1',
                                                     NEW.rank, NEW.query_id);
    END IF;
    SELECT * INTO cur FROM pgeval.result_list
     WHERE run_id = NEW.run_id AND query_id = NEW.query_id FOR UPDATE;
    IF NOT FOUND THEN
        IF NEW.rank <> 1 THEN
            RAISE check_violation USING MESSAGE = format(
                'rank %s of query %s: a ranked list starts at rank 1', NEW.rank, NEW.query_id);
        END IF;
        INSERT INTO pgeval.result_list (run_id, query_id, chunk_ids, scores, grades)
        VALUES (NEW.run_id, NEW.query_id, ARRAY[NEW.chunk_id], ARRAY[NEW.score],
                CASE WHEN NEW.grade IS NOT NULL THEN ARRAY[NEW.grade] END);
        RETURN NEW;
    END IF;
    IF NEW.chunk_id = ANY (cur.chunk_ids) THEN
        RAISE unique_violation USING MESSAGE = format(
            'query %s lists chunk %s twice', NEW.query_id, NEW.chunk_id);
    END IF;
    IF NEW.rank <= cardinality(cur.chunk_ids) THEN
        RAISE unique_violation USING MESSAGE = format(
            'query %s has a result at rank %s', NEW.query_id, NEW.rank);
    END IF;
    IF NEW.rank <> cardinality(cur.chunk_ids) + 1 THEN
        RAISE check_violation USING MESSAGE = format(
            'rank %s of query %s: the next rank is %s', NEW.rank, NEW.query_id,
            cardinality(cur.chunk_ids) + 1);
    END IF;
    IF NEW.grade IS NULL THEN
        SELECT j.grade INTO NEW.grade FROM pgeval.qrel j JOIN pgeval.run ru
            ON ru.testset_id = j.testset_id
         WHERE ru.run_id = NEW.run_id AND j.query_id = NEW.query_id AND j.chunk_id = NEW.chunk_id;
    END IF;
    UPDATE pgeval.result_list
       SET chunk_ids = chunk_ids || NEW.chunk_id, scores = scores || NEW.score,
           grades = grades || NEW.grade
     WHERE run_id = NEW.run_id AND query_id = NEW.query_id;
    RETURN NEW;
END
$$;
