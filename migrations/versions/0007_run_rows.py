"""a run's timings and progress rows go with it by trigger, not by foreign key

Revision ID: 0007_run_rows
Revises: 0006_checksum
Create Date: 2026-11-30

``pgeval.query_timing`` and ``pgeval.run_progress`` get one row per query of a stage run. Their
foreign keys to ``pgeval.run`` checked each row as it was written (a lookup per row: 16 ms of
the 1,000-query HNSW benchmark's writes, bench/runner_overhead.py) and deleted them row by row
with their run. As for ``pgeval.result_list`` (0005_storage), the statement-level trigger
``run_delete_results`` now deletes them with their run, and a writer locks its run row in the
transaction that writes them (the stage writer's heartbeat UPDATE), so a run deleted by another
session is never written to (evaluator/stages/store.py). ``TRUNCATE pgeval.run`` (directly or by
``CASCADE`` from the test sets) empties the three tables through the new statement trigger
``run_truncate_results``, as the foreign keys' cascade did for two of them.
"""

from alembic import op

revision = "0007_run_rows"
down_revision = "0006_checksum"
branch_labels = None
depends_on = None

DELETE_RUN_ROWS = r"""
CREATE OR REPLACE FUNCTION pgeval.run_delete_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgeval.result_list r USING old_runs o WHERE r.run_id = o.run_id;
    DELETE FROM pgeval.query_timing t USING old_runs o WHERE t.run_id = o.run_id;
    DELETE FROM pgeval.run_progress p USING old_runs o WHERE p.run_id = o.run_id;
    RETURN NULL;
END
$$;
"""

# the foreign keys by what they are (their names come from PostgreSQL's default naming)
DROP_KEYS = r"""
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT conrelid::regclass AS tab, conname FROM pg_constraint
              WHERE contype = 'f' AND confrelid = 'pgeval.run'::regclass
                AND conrelid IN ('pgeval.query_timing'::regclass, 'pgeval.run_progress'::regclass)
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.tab, c.conname);
    END LOOP;
END
$$;
"""

TRUNCATE_RUN_ROWS = r"""
CREATE OR REPLACE FUNCTION pgeval.run_truncate_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- DELETE, not TRUNCATE: a table truncated by the same statement is in use here
    DELETE FROM pgeval.result_list;
    DELETE FROM pgeval.query_timing;
    DELETE FROM pgeval.run_progress;
    RETURN NULL;
END
$$;
CREATE TRIGGER run_truncate_results AFTER TRUNCATE ON pgeval.run
    FOR EACH STATEMENT EXECUTE FUNCTION pgeval.run_truncate_results();
"""

UPGRADE = DROP_KEYS + DELETE_RUN_ROWS + TRUNCATE_RUN_ROWS

DOWNGRADE = r"""
DROP TRIGGER run_truncate_results ON pgeval.run;
DROP FUNCTION pgeval.run_truncate_results();
DELETE FROM pgeval.query_timing t
 WHERE NOT EXISTS (SELECT 1 FROM pgeval.run r WHERE r.run_id = t.run_id);
DELETE FROM pgeval.run_progress p
 WHERE NOT EXISTS (SELECT 1 FROM pgeval.run r WHERE r.run_id = p.run_id);
ALTER TABLE pgeval.query_timing ADD FOREIGN KEY (run_id) REFERENCES pgeval.run ON DELETE CASCADE;
ALTER TABLE pgeval.run_progress ADD FOREIGN KEY (run_id) REFERENCES pgeval.run ON DELETE CASCADE;
CREATE OR REPLACE FUNCTION pgeval.run_delete_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgeval.result_list r USING old_runs o WHERE r.run_id = o.run_id;
    RETURN NULL;
END
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
