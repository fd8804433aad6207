"""run progress: which queries of a run are written, and which process is writing it

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

Resumable runs (`pgeval run resume`, issue 5). A run is complete only when every query of its
test set has its results; after Ctrl-C, `kill -9` or a server restart the run stays `running` or
`failed`, and resume must know exactly which queries are already written:

- ``pgeval.run_progress``: one row per (run, query) whose results (possibly none) and timing are
  written. The stage writer commits it in the same transaction as the query's result rows, so a
  query is either wholly there or not at all — resume runs the others, never a query twice.
- ``pgeval.run.pid`` / ``host`` / ``heartbeat_at``: the process writing the run and the time of
  its last write, so that a refusal to resume a run another live process holds can say who.
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE pgeval.run
    ADD COLUMN pid          integer,
    ADD COLUMN host         text,
    ADD COLUMN heartbeat_at timestamptz;

CREATE TABLE pgeval.run_progress (
    run_id   bigint NOT NULL REFERENCES pgeval.run ON DELETE CASCADE,
    query_id text NOT NULL,
    PRIMARY KEY (run_id, query_id)
);
"""

DOWNGRADE = r"""
DROP TABLE IF EXISTS pgeval.run_progress;
ALTER TABLE pgeval.run
    DROP COLUMN IF EXISTS heartbeat_at CASCADE,
    DROP COLUMN IF EXISTS host CASCADE,
    DROP COLUMN IF EXISTS pid CASCADE;  -- views over run.* are re-created by `pgeval init`
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
