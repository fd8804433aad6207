"""core tables of schema pgeval: test sets, queries, judgements, experiments, runs, results, timings

Revision ID: 0001
Revises:
Create Date: 2026-11-29

The tables, their indexes and triggers. The SQL API (functions) lives in sql/*.sql and is
re-applied by `pgeval init`; this revision also created the first version of the two trigger
functions, whose current bodies are in sql/005_triggers.sql (init replaces them). A migration is
never edited once released: a later change is a new revision.
The database itself refuses a rank of 0, a grade outside 0-3, a duplicate (run, query, rank) or a
duplicate (run, query, chunk).
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE pgeval.testset (
    testset_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE CHECK (name <> ''),
    content_hash  text NOT NULL,
    source_format text NOT NULL,
    source_file   text,
    grade_map     jsonb,
    n_queries     integer NOT NULL DEFAULT 0,
    n_judgements  bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pgeval.query (
    testset_id     bigint NOT NULL REFERENCES pgeval.testset ON DELETE CASCADE,
    query_id       text NOT NULL CHECK (query_id <> ''),
    position       integer NOT NULL,
    query_text     text,
    types          text[] NOT NULL DEFAULT '{}',
    answerable     boolean NOT NULL DEFAULT true,
    expected_facts jsonb NOT NULL DEFAULT '[]',
    embedding      vector,
    -- properties of the test set that every run's metrics reuse (METRICS.md nDCG, Recall):
    grades_desc    smallint[] NOT NULL DEFAULT '{}',          -- judged grades > 0, descending
    n_rel          integer[] NOT NULL DEFAULT '{0,0,0}',      -- chunks of grade >= 1, >= 2, >= 3
    ideal_dcg      double precision[] NOT NULL DEFAULT '{}',  -- IDCG@1..n, cumulative
    PRIMARY KEY (testset_id, query_id)
);

CREATE TABLE pgeval.qrel (
    testset_id   bigint NOT NULL,
    query_id     text NOT NULL,
    chunk_id     text NOT NULL CHECK (chunk_id <> ''),
    grade        smallint NOT NULL CHECK (grade BETWEEN 0 AND 3),
    source_grade text,
    PRIMARY KEY (testset_id, query_id, chunk_id),
    -- to the test set, not to (testset_id, query_id) in pgeval.query: that composite text key's
    -- per-row check cost ~5 s per million judgements at load. The loader writes judgements only
    -- for queries it wrote in the same transaction; they go with their test set.
    FOREIGN KEY (testset_id) REFERENCES pgeval.testset ON DELETE CASCADE
);

CREATE TABLE pgeval.query_embedding (
    testset_id bigint NOT NULL,
    query_id   text NOT NULL,
    embedder   text NOT NULL,
    dim        integer NOT NULL CHECK (dim > 0),
    embedding  vector NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (testset_id, embedder, query_id),
    FOREIGN KEY (testset_id, query_id) REFERENCES pgeval.query ON DELETE CASCADE
);

CREATE TABLE pgeval.target (
    name       text PRIMARY KEY CHECK (name <> ''),
    spec       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pgeval.experiment (
    experiment_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE CHECK (name <> ''),
    testset_id    bigint NOT NULL REFERENCES pgeval.testset ON DELETE CASCADE,
    target        text,
    config        jsonb NOT NULL DEFAULT '{}',
    config_hash   text,
    fingerprint   jsonb,
    status        text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'complete', 'failed')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);

CREATE TABLE pgeval.run (
    run_id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text NOT NULL UNIQUE CHECK (name <> ''),
    testset_id      bigint NOT NULL REFERENCES pgeval.testset ON DELETE CASCADE,
    experiment_id   bigint REFERENCES pgeval.experiment ON DELETE CASCADE,
    stage           text NOT NULL,
    repetition      integer NOT NULL DEFAULT 1 CHECK (repetition >= 1),
    params          jsonb NOT NULL DEFAULT '{}',
    order_rule      text NOT NULL,
    depth           integer CHECK (depth >= 1),
    timing_boundary text,
    status          text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'complete', 'failed')),
    config_hash     text,
    fingerprint     jsonb,
    n_unknown_queries integer NOT NULL DEFAULT 0,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
);
CREATE INDEX run_experiment_idx ON pgeval.run (experiment_id);

-- No foreign key to pgeval.run: the per-row RI check halved the import speed of a 1M-row run.
-- Results are written only after their run row, inside the same transaction, and the trigger
-- pgeval.run_delete_results (below) removes them with their run.
CREATE TABLE pgeval.result (
    run_id   bigint NOT NULL,
    query_id text NOT NULL,
    rank     integer NOT NULL CHECK (rank >= 1),
    chunk_id text NOT NULL,
    score    double precision,
    -- the chunk's judged grade for this query in the run's test set (NULL: not judged), filled
    -- by the trigger pgeval.result_fill_grades when the row is written. Judgements never change
    -- under a run (replacing a test set deletes its runs), so the metrics need no join.
    grade    smallint,
    -- (run_id, rank, query_id) INCLUDE (chunk_id): "the first K results of a run" is one
    -- index-only range scan; per-query access goes through the UNIQUE index.
    PRIMARY KEY (run_id, rank, query_id) INCLUDE (chunk_id),
    UNIQUE (run_id, query_id, chunk_id)
);
-- the metrics read only judged relevant results: a small index of just those rows
CREATE INDEX result_judged_idx ON pgeval.result (run_id, rank) INCLUDE (query_id, grade)
    WHERE grade > 0;

-- A writer that joins the judgements itself (run import) says so for its statement with
-- SET LOCAL pgeval.result_grades = 'filled', and the trigger has nothing to do.
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

CREATE FUNCTION pgeval.run_delete_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgeval.result r USING old_runs o WHERE r.run_id = o.run_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER run_delete_results AFTER DELETE ON pgeval.run
    REFERENCING OLD TABLE AS old_runs FOR EACH STATEMENT
    EXECUTE FUNCTION pgeval.run_delete_results();

CREATE TABLE pgeval.query_timing (
    run_id        bigint NOT NULL REFERENCES pgeval.run ON DELETE CASCADE,
    query_id      text NOT NULL,
    latency_ms    double precision NOT NULL CHECK (latency_ms >= 0),
    server_ms     double precision CHECK (server_ms >= 0),
    rows_returned integer NOT NULL CHECK (rows_returned >= 0),
    PRIMARY KEY (run_id, query_id)
);

CREATE TABLE pgeval.query_plan (
    run_id   bigint NOT NULL REFERENCES pgeval.run ON DELETE CASCADE,
    query_id text NOT NULL,
    plan     jsonb NOT NULL,
    PRIMARY KEY (run_id, query_id)
);

-- ---- end-to-end answers (issue 6; METRICS.md "End-to-end") -------------------------------------
-- One imported answer per (run, query): the generated text, the chunk ids it cites, and the cited
-- ids a judge found to support it. Citation precision and answer accuracy are computed from these
-- rows by sql/300_answers.sql. latency_ms: the end-to-end time of the answer, when known.
CREATE TABLE pgeval.answer (
    run_id      bigint NOT NULL REFERENCES pgeval.run ON DELETE CASCADE,
    query_id    text NOT NULL CHECK (query_id <> ''),
    answer      text NOT NULL,
    cited       text[] NOT NULL DEFAULT '{}',
    supported   text[] NOT NULL DEFAULT '{}' CHECK (supported <@ cited),
    latency_ms  double precision CHECK (latency_ms >= 0),
    source_file text,
    imported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, query_id)
);

-- Phrases that mark an answer as a refusal ("the knowledge base does not say"). Empty table: the
-- built-in Chinese and English defaults of pgeval.default_refusal_phrases() are in force.
CREATE TABLE pgeval.refusal_phrase (
    phrase   text PRIMARY KEY CHECK (btrim(phrase) <> ''),
    added_at timestamptz NOT NULL DEFAULT now()
);
-- ---- end of end-to-end answers ------------------------------------------------------------------

-- ---- parameter sweeps (issue 4: `pgeval sweep`, evaluator/sweep/) --------------------------------
-- A sweep is one experiment (pgeval.experiment, its runs named {sweep}.{point label}.{rep}) over a
-- grid of query-time settings and/or index build options. One sweep_point row per grid point and
-- repetition, written when the point's run is complete; the measured values (index recall, qrels
-- metrics, latency percentiles, throughput) are filled in from the SQL API right after. A point is
-- identified by the config hash of its fingerprint, so a later sweep reuses a point measured under
-- the same configuration (reused_from: the sweep that measured it) unless --fresh.
CREATE TABLE pgeval.sweep (
    sweep_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE CHECK (name <> ''),
    testset_id    bigint NOT NULL REFERENCES pgeval.testset ON DELETE CASCADE,
    experiment_id bigint REFERENCES pgeval.experiment ON DELETE SET NULL,
    target        text NOT NULL,
    stage         text NOT NULL,
    grid          jsonb NOT NULL,        -- {"params": {GUC: [v, ...]}, "build": {option: [v, ...]}}
    settings      jsonb NOT NULL DEFAULT '{}',   -- --set: applied at every point
    k             integer NOT NULL CHECK (k >= 1),
    depth         integer NOT NULL CHECK (depth >= 1),
    repeat        integer NOT NULL CHECK (repeat >= 1),
    concurrency   integer NOT NULL DEFAULT 1 CHECK (concurrency >= 1),
    target_recall double precision NOT NULL DEFAULT 0.95,
    status        text NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'complete', 'failed', 'interrupted')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);

CREATE TABLE pgeval.sweep_point (
    sweep_id      bigint NOT NULL REFERENCES pgeval.sweep ON DELETE CASCADE,
    point         integer NOT NULL CHECK (point >= 1),      -- grid order
    repetition    integer NOT NULL CHECK (repetition >= 1),
    label         text NOT NULL,
    settings      jsonb NOT NULL DEFAULT '{}',   -- the point's query-time settings
    build         jsonb NOT NULL DEFAULT '{}',   -- the point's index build options
    config_hash   text NOT NULL,
    run_id        bigint REFERENCES pgeval.run ON DELETE SET NULL,
    reused_from   bigint,                        -- sweep_id that measured it; NULL: measured here
    index_recall  double precision,              -- recall@K against exact search (index's loss)
    metrics       jsonb,                         -- measure -> value (pgeval.summary)
    queries       integer,
    rows_mean     double precision,              -- rows the statement returned per query
    rows_min      integer,
    p50_ms        double precision,
    p95_ms        double precision,
    p99_ms        double precision,
    qps           double precision,              -- queries per second at `concurrency` clients
    concurrency   integer NOT NULL DEFAULT 1,
    build_ms      double precision,              -- build sweeps: CREATE INDEX time
    index_bytes   bigint,                        -- build sweeps: pg_relation_size of the index
    measured_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sweep_id, point, repetition)
);
CREATE INDEX sweep_point_hash_idx ON pgeval.sweep_point (config_hash, repetition);
-- ---- end of parameter sweeps ---------------------------------------------------------------------
"""

DOWNGRADE = r"""
DROP TABLE IF EXISTS pgeval.sweep_point, pgeval.sweep CASCADE;    -- parameter sweeps (issue 4)
DROP TABLE IF EXISTS pgeval.refusal_phrase, pgeval.answer CASCADE;
DROP TRIGGER IF EXISTS result_fill_grades ON pgeval.result;
DROP FUNCTION IF EXISTS pgeval.result_fill_grades();
DROP TRIGGER IF EXISTS run_delete_results ON pgeval.run;
DROP FUNCTION IF EXISTS pgeval.run_delete_results();
DROP TABLE IF EXISTS pgeval.query_plan, pgeval.query_timing, pgeval.result, pgeval.run,
    pgeval.experiment, pgeval.target, pgeval.query_embedding, pgeval.qrel, pgeval.query,
    pgeval.testset CASCADE;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
