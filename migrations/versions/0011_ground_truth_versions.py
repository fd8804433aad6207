"""row versions of a stored ground truth, for its incremental refresh

Revision ID: 0011_ground_truth_versions
Revises: 0010_probe_via
Create Date: 2026-12-02

``pgeval.ground_truth_versions``: for a ground truth a probe keeps up to date
(evaluator/stages/ground_truth_refresh.py), the version of every row of the target it was computed
on: a 64-bit hash of each row version's (tableoid, ctid, xmin), the term of the data checksum's
version value (evaluator/table/data_checksum.py), packed big-endian in one bytea. A row inserted or
updated since has a version not in the set; a listed row that was deleted or updated no longer
has its version in the table; a changed row whose chunk id is in the set was updated (for the
count of rows changed). Deleted with its ground truth.
"""

from alembic import op

revision = "0011_ground_truth_versions"
down_revision = "0010_probe_via"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE pgeval.ground_truth_versions (
    gt_id    bigint PRIMARY KEY REFERENCES pgeval.ground_truth ON DELETE CASCADE,
    rows     bigint NOT NULL,               -- rows of the target when the versions were read
    versions bytea NOT NULL,                -- int8 row-version hashes, 8 bytes each, big-endian
    ids      bytea NOT NULL                 -- the chunk ids of those rows, UTF-8, NUL-separated
);
"""

DOWNGRADE = """
DROP TABLE pgeval.ground_truth_versions;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
