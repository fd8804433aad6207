"""results at database speed: one row per ranked list, counts kept with the run

Revision ID: 0005_storage
Revises: 0004_owntable
Create Date: 2026-12-10

Until 0003 pgeval.result held one row per (run, query, rank) under three indexes kept row by row
(a primary key, a UNIQUE (run, query, chunk) and a partial index of judged rows): storing a run cost
more than measuring it, and `run list` / `run delete` read every result row. From this revision:

- ``pgeval.result_list``: one row per (run, query) ranked list, the chunk ids, scores and judged
  grades as arrays in rank order (position i = rank i). One index entry per list, not per result;
  the metrics read only ``rel_ranks`` / ``rel_grades`` (the judged-relevant positions and their
  grades, generated from the grades array), never the chunk ids. Writers refuse a chunk
  listed twice while they build a list (naming the query, chunk and lines); the database checks
  the arrays' lengths. A query without results has no row (as before).
- ``pgeval.result``: a view with the old row shape (run_id, query_id, rank, chunk_id, score,
  grade), by ``unnest ... WITH ORDINALITY``, for the readers that want rows. A row inserted into
  the view is appended to its list (INSTEAD OF trigger): rank must be the next position, a chunk
  already listed is refused (unique_violation), a rank below 1 too (check_violation).
- ``pgeval.result_fill_grades`` (now a BEFORE INSERT row trigger of result_list, only for lists
  written without grades) joins the judgements at write time, as before.
- ``pgeval.run.n_queries`` / ``n_rows``: the run's lists and results, kept by a statement trigger
  of result_list, so `run list` and `run delete` need not read results.

Ids keep COLLATE "C" (byte order; 0003_order). Existing rows are converted list by list, their
judged grades kept; ranks are renumbered 1..n in rank order (pgeval's writers never left a gap).
"""

from alembic import op

revision = "0005_storage"
down_revision = "0004_owntable"
branch_labels = None
depends_on = None

# The trigger bodies are also in sql/005_triggers.sql (init re-applies them there).
FILL_GRADES = r"""
CREATE OR REPLACE FUNCTION pgeval.result_fill_grades() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT coalesce(array_agg(j.grade ORDER BY u.pos), '{}') INTO NEW.grades
      FROM unnest(NEW.chunk_ids) WITH ORDINALITY AS u(chunk_id, pos)
      LEFT JOIN pgeval.qrel j
             ON j.testset_id = (SELECT ru.testset_id FROM pgeval.run ru WHERE ru.run_id = NEW.run_id)
            AND j.query_id = NEW.query_id AND j.chunk_id = u.chunk_id;
    RETURN NEW;
END
$$;
"""

COUNT_ROWS = r"""
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
"""

DELETE_RESULTS = r"""
CREATE OR REPLACE FUNCTION pgeval.run_delete_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgeval.result_list r USING old_runs o WHERE r.run_id = o.run_id;
    RETURN NULL;
END
$$;
"""

APPEND_ROW = r"""
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
"""

VIEW = r"""
CREATE VIEW pgeval.result AS
SELECT l.run_id, l.query_id, u.rank::integer AS rank, u.chunk_id, u.score, u.grade
  FROM pgeval.result_list l
 CROSS JOIN LATERAL unnest(l.chunk_ids, l.scores, l.grades)
       WITH ORDINALITY AS u(chunk_id, score, grade, rank);
COMMENT ON VIEW pgeval.result IS
    'pgeval.result_list as one row per (run, query, rank); inserting appends to the list';
CREATE TRIGGER result_append_row INSTEAD OF INSERT ON pgeval.result
    FOR EACH ROW EXECUTE FUNCTION pgeval.result_append_row();
"""

UPGRADE = (
    r"""
CREATE TABLE pgeval.result_list (
    run_id    bigint NOT NULL,
    query_id  text COLLATE "C" NOT NULL,
    -- the judged grade at each position (NULL: not judged); small, read by the metrics
    grades    smallint[] NOT NULL,
    scores    double precision[] NOT NULL,
    chunk_ids text[] COLLATE "C" NOT NULL,
    -- the judged-relevant positions (grade > 0) and their grades, derived from grades whenever a
    -- list is written or its grades change: the metrics read these few numbers, nothing else
    rel_ranks integer[] GENERATED ALWAYS AS (
        array_positions(grades, 1::smallint) || array_positions(grades, 2::smallint)
        || array_positions(grades, 3::smallint)) STORED,
    rel_grades smallint[] GENERATED ALWAYS AS (
        array_fill(1::smallint, ARRAY[cardinality(array_positions(grades, 1::smallint))])
        || array_fill(2::smallint, ARRAY[cardinality(array_positions(grades, 2::smallint))])
        || array_fill(3::smallint, ARRAY[cardinality(array_positions(grades, 3::smallint))])) STORED,
    PRIMARY KEY (run_id, query_id),
    CHECK (cardinality(chunk_ids) >= 1 AND array_ndims(chunk_ids) = 1
           AND array_lower(chunk_ids, 1) = 1),
    CHECK (cardinality(scores) = cardinality(chunk_ids) AND array_lower(scores, 1) = 1),
    CHECK (cardinality(grades) = cardinality(chunk_ids) AND array_lower(grades, 1) = 1)
);
ALTER TABLE pgeval.run ADD COLUMN n_queries integer NOT NULL DEFAULT 0,
                       ADD COLUMN n_rows bigint NOT NULL DEFAULT 0;

INSERT INTO pgeval.result_list (run_id, query_id, grades, scores, chunk_ids)
SELECT run_id, query_id, array_agg(grade ORDER BY rank), array_agg(score ORDER BY rank),
       array_agg(chunk_id ORDER BY rank)
  FROM pgeval.result GROUP BY run_id, query_id;
UPDATE pgeval.run ru SET n_queries = c.n, n_rows = c.r
  FROM (SELECT run_id, count(*) AS n, sum(cardinality(chunk_ids)) AS r
          FROM pgeval.result_list GROUP BY run_id) c
 WHERE ru.run_id = c.run_id;

DROP TABLE pgeval.result;
DROP FUNCTION pgeval.result_fill_grades();
"""
    + FILL_GRADES
    + COUNT_ROWS
    + DELETE_RESULTS
    + APPEND_ROW
    + VIEW
    + r"""
CREATE TRIGGER result_fill_grades BEFORE INSERT ON pgeval.result_list
    FOR EACH ROW WHEN (NEW.grades IS NULL) EXECUTE FUNCTION pgeval.result_fill_grades();
CREATE TRIGGER result_list_count_insert AFTER INSERT ON pgeval.result_list
    REFERENCING NEW TABLE AS new_lists FOR EACH STATEMENT
    EXECUTE FUNCTION pgeval.result_list_count();
CREATE TRIGGER result_list_count_update AFTER UPDATE ON pgeval.result_list
    REFERENCING OLD TABLE AS old_lists NEW TABLE AS new_lists FOR EACH STATEMENT
    EXECUTE FUNCTION pgeval.result_list_count();
CREATE TRIGGER result_list_count_delete AFTER DELETE ON pgeval.result_list
    REFERENCING OLD TABLE AS old_lists FOR EACH STATEMENT
    EXECUTE FUNCTION pgeval.result_list_count();
"""
)

# back to 0003's table, its indexes and trigger, rows kept
DOWNGRADE = r"""
DROP VIEW pgeval.result;
DROP FUNCTION pgeval.result_append_row();
CREATE TABLE pgeval.result (
    run_id   bigint NOT NULL,
    query_id text COLLATE "C" NOT NULL,
    rank     integer NOT NULL CHECK (rank >= 1),
    chunk_id text COLLATE "C" NOT NULL,
    score    double precision,
    grade    smallint,
    PRIMARY KEY (run_id, rank, query_id) INCLUDE (chunk_id),
    UNIQUE (run_id, query_id, chunk_id)
);
CREATE INDEX result_judged_idx ON pgeval.result (run_id, rank) INCLUDE (query_id, grade)
    WHERE grade > 0;
INSERT INTO pgeval.result (run_id, query_id, rank, chunk_id, score, grade)
SELECT l.run_id, l.query_id, u.rank, u.chunk_id, u.score, u.grade
  FROM pgeval.result_list l
 CROSS JOIN LATERAL unnest(l.chunk_ids, l.scores, l.grades)
       WITH ORDINALITY AS u(chunk_id, score, grade, rank);
DROP TABLE pgeval.result_list;
DROP FUNCTION pgeval.result_list_count();
DROP FUNCTION pgeval.result_fill_grades();
ALTER TABLE pgeval.run DROP COLUMN n_queries CASCADE, DROP COLUMN n_rows CASCADE;
CREATE FUNCTION pgeval.result_fill_grades() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER result_fill_grades AFTER INSERT ON pgeval.result
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION pgeval.result_fill_grades();
CREATE OR REPLACE FUNCTION pgeval.run_delete_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgeval.result r USING old_runs o WHERE r.run_id = o.run_id;
    RETURN NULL;
END
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
