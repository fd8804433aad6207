-- Trigger functions of schema pgeval. The triggers themselves belong to the tables (migrations);
-- their functions live here so that `pgeval init` brings an upgraded database the current body
-- (CREATE OR REPLACE keeps the triggers attached). A trigger function's signature never changes.

-- Fills pgeval.result.grade from the run's test set as rows are written. A writer that joins the
-- judgements itself (run import) says so for its statement with
-- SET LOCAL pgeval.result_grades = 'filled', and the trigger has nothing to do.
CREATE OR REPLACE FUNCTION pgeval.result_fill_grades() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('pgeval.result_grades', true) = 'filled' THEN
        RETURN NULL;
    END IF;
    UPDATE pgeval.result r SET grade = j.grade
      FROM new_rows n
      JOIN pgeval.run ru ON ru.run_id = n.run_id
      JOIN pgeval.qrel j ON j.testset_id = ru.testset_id AND j.query_id = n.query_id
                        AND j.chunk_id = n.chunk_id
     WHERE r.run_id = n.run_id AND r.rank = n.rank AND r.query_id = n.query_id;
    RETURN NULL;
END
$$;

-- pgeval.result has no foreign key to pgeval.run (the per-row check halved import speed): a
-- run's results go with it through this statement-level trigger.
CREATE OR REPLACE FUNCTION pgeval.run_delete_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgeval.result r USING old_runs o WHERE r.run_id = o.run_id;
    RETURN NULL;
END
$$;
