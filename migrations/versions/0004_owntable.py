"""query vectors without judgements; exact ground truth stored once

Revision ID: 0004_owntable
Revises: 0004_service
Create Date: 2026-12-10

- ``pgeval.testset.query_source``: where the query vectors of a query set came from (``sample``
  of the target's rows, ``sql``, ``file``), with seed, count and content hash. NULL for graded
  test sets. Such sets have queries with embeddings and no judgements.
- ``pgeval.ground_truth`` / ``pgeval.ground_truth_result``: the exact top-``depth`` chunks of a
  query set on a target, computed once and reused while its ``slot`` (target table, columns,
  distance, filters, query set) and its ``data`` fingerprint (rows, content checksum) hold.
  ``uses`` counts the runs materialised from it; ``computed_at`` says when it was computed.
"""

from alembic import op

revision = "0004_owntable"
down_revision = "0004_service"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE pgeval.testset ADD COLUMN query_source jsonb;

CREATE TABLE pgeval.ground_truth (
    gt_id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    slot         text NOT NULL UNIQUE,          -- hash of target, distance, filters, query set
    target       text NOT NULL,
    spec         jsonb NOT NULL,                -- what the slot hashes (for messages)
    data         jsonb NOT NULL,                -- data fingerprint: {"rows", "checksum"}
    depth        integer NOT NULL CHECK (depth >= 1),
    queries      integer NOT NULL,
    method       text NOT NULL,                 -- client-scan | server
    compute_ms   double precision,
    computed_at  timestamptz NOT NULL DEFAULT now(),
    uses         integer NOT NULL DEFAULT 0,
    last_used_at timestamptz
);

CREATE TABLE pgeval.ground_truth_result (
    gt_id    bigint NOT NULL REFERENCES pgeval.ground_truth ON DELETE CASCADE,
    query_id text COLLATE "C" NOT NULL,
    rank     integer NOT NULL CHECK (rank >= 1),
    chunk_id text COLLATE "C" NOT NULL,
    dist     double precision,
    PRIMARY KEY (gt_id, query_id, rank)
);
"""

DOWNGRADE = """
DROP TABLE pgeval.ground_truth_result;
DROP TABLE pgeval.ground_truth;
ALTER TABLE pgeval.testset DROP COLUMN query_source;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
