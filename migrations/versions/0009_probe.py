"""pgeval.probe: one row per `pgeval watch` probe (recall over time)

Revision ID: 0009_probe
Revises: 0008_list_storage
Create Date: 2026-12-02

A probe (one per group with ``--group-by``) measures the production setting of a target's ANN stage on a small, stable set of queries
against the stored exact ground truth (evaluator/tuning/watch/). Its row is written in one
transaction once everything is measured: an interrupted probe leaves none. The measured values
(recall, percentiles, rows returned) are copied from pgeval.sweep_summary of the probe's one-point
sweep; the row also keeps what explains a change: the table's size and data version, the index's
build identity (oid and relfilenode change on a rebuild, REINDEX included) and options, the
server's row counters, the ground truth's status, and the bounds the probe was checked against.
The view pgeval.probe_history (sql/210_probe.sql) reads it.
"""

from alembic import op

revision = "0009_probe"
down_revision = "0008_list_storage"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE pgeval.probe (
    probe_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    probed_at     timestamptz NOT NULL DEFAULT now(),
    target        text NOT NULL,
    stage         text NOT NULL,
    group_key     jsonb,                         -- {column: value} with --group-by, else NULL
    k             integer NOT NULL CHECK (k >= 1),
    settings      jsonb NOT NULL DEFAULT '{}',   -- the stage's settings as measured
    query_source  jsonb NOT NULL DEFAULT '{}',   -- how the queries are chosen (sample N seed S, sql)
    queries       integer,                       -- queries measured
    testset       text,                          -- the query set (its name is its content hash)
    recall        double precision,              -- recall@k against exact search
    p50_ms        double precision,
    p95_ms        double precision,
    p99_ms        double precision,
    rows_mean     double precision,              -- rows returned per query
    timed_ms      double precision,              -- sum of the timed statements' latencies
    table_rows    bigint,                        -- rows of the target (after its filters)
    data_checksum text,                          -- the data version (content checksum)
    index_name    text,
    index_build   jsonb,                         -- {oid, filenode, method, options}
    index_state   jsonb,                         -- {pages, dead_tuples} at the probe
    table_stats   jsonb,                         -- the server's counters: n_tup_ins, n_tup_upd, ...
    ground_truth  jsonb,                         -- {status: computed | reused, reason, ...}
    bounds        jsonb NOT NULL DEFAULT '{}',   -- {min_recall, max_drop, max_p95_ms} as given
    advice        jsonb,                         -- the remedy measured, when a bound was crossed
    wall_ms       double precision,              -- the probe's cost (a remedy's comes after)
    sweep         text,                          -- the sweep holding its runs (until the next probe)
    config_hash   text
);
CREATE INDEX probe_series_idx ON pgeval.probe (target, stage, probed_at);
"""

DOWNGRADE = """
DROP VIEW IF EXISTS pgeval.probe_history;
DROP TABLE pgeval.probe;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
